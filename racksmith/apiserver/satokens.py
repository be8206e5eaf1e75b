"""ServiceAccount tokens: the TokenRequest API and the tokens' authentication.

Owns :class:`TokenIssuer`: it signs short-lived JWTs for ServiceAccounts
(``POST /api/v1/namespaces/NS/serviceaccounts/NAME/token``, what ``kubectl
create token NAME`` sends) and verifies them on every request that offers
one. The signing key is an EC P-256 key made once in ``DATA/pki/sa.key``
(0600); tokens are ES256 JWTs with kube's claims: ``iss`` (``racksmith``),
``sub`` (``system:serviceaccount:NS:NAME``), ``aud`` (the requested
audiences; default the API server's own, ``racksmith``), ``iat``, ``nbf``,
``exp`` and ``kubernetes.io`` (namespace, ServiceAccount name and uid).

Verification (a token is refused with a 401 unless all hold): the signature
is ours; now is within ``nbf``..``exp``; the audiences include the API
server's; and the ServiceAccount still exists with the same uid (deleting
the ServiceAccount revokes its tokens); a token bound to a kind it does not
know (an LCMMachine, by an earlier release) is refused. The user is
``system:serviceaccount:NS:NAME`` in the groups ``system:serviceaccounts``,
``system:serviceaccounts:NS`` and ``system:authenticated``.

``expirationSeconds`` defaults to 3600 and must be at least 600 (422
otherwise, as kube-apiserver); longer requests are capped at 48 hours.

Bound tokens (``spec.boundObjectRef``, kube's bound ServiceAccount tokens):
a token bound to a Pod or a Secret of the ServiceAccount's namespace, or to
a Node — the kinds kube-apiserver binds to; any other kind is a 422, as on
kube — names it in its ``kubernetes.io`` claim (``{"secret": {"name",
"uid"}}``) and is valid only while that object exists with that uid:
deleting the object revokes the token. (Racksmith's host agents carry
tokens bound to their machine's user-data Secret: :mod:`racksmith.hostcreds`.)
Because deletion revokes them, bound tokens may last up to a year
(kube-apiserver's extended bound-token lifetime); an unbound one, 48 hours.
Every token carries a ``jti``, logged as its credential id.

Verified signatures are remembered (an LRU of ``VERIFIED_CACHE`` tokens), so
a client that sends the same token on every request pays for the ECDSA
check once; the time window is checked on every request.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import (
    decode_dss_signature,
    encode_dss_signature,
)

from racksmith.apiserver import errors
from racksmith.apiserver.errors import Cause
from racksmith.filemodes import private_dir, write_private
from racksmith.redact import register_secret

ISSUER = "racksmith"
API_AUDIENCE = "racksmith"
SA_PREFIX = "system:serviceaccount:"
DEFAULT_SECONDS = 3600
MIN_SECONDS = 600
MAX_SECONDS = 48 * 3600
MAX_BOUND_SECONDS = 365 * 24 * 3600
"""The longest life of a token bound to an object (its deletion revokes it)."""
KEY_FILE = "sa.key"
VERIFIED_CACHE = 4096


@dataclass(frozen=True)
class BoundKind:
    """A kind a token may be bound to: its apiVersion, resource and claim key."""

    kind: str
    api_version: str
    plural: str
    namespaced: bool = True

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0] if "/" in self.api_version else ""

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]

    @property
    def claim(self) -> str:
        return self.kind.lower()


BOUND_KINDS: dict[str, BoundKind] = {k.kind: k for k in (
    BoundKind("Pod", "v1", "pods"),
    BoundKind("Secret", "v1", "secrets"),
    BoundKind("Node", "v1", "nodes", namespaced=False),
)}
"""What ``spec.boundObjectRef.kind`` may name, as on kube: a Pod or Secret of
the ServiceAccount's namespace, or a Node."""


@dataclass(frozen=True)
class BoundRef:
    """The object a token is bound to (in the ServiceAccount's namespace)."""

    kind: BoundKind
    name: str
    uid: str


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True)
class Claims:
    """A verified token's ServiceAccount (before the existence check)."""

    namespace: str
    name: str
    uid: str
    bound: BoundRef | None = None
    credential_id: str = ""

    @property
    def username(self) -> str:
        return f"{SA_PREFIX}{self.namespace}:{self.name}"

    @property
    def groups(self) -> tuple[str, ...]:
        return ("system:serviceaccounts", f"system:serviceaccounts:{self.namespace}",
                "system:authenticated")


class TokenIssuer:
    """Signs and verifies ServiceAccount tokens (see the module docstring)."""

    def __init__(self, pki_dir: Path) -> None:
        path = pki_dir / KEY_FILE
        if path.exists():
            key = serialization.load_pem_private_key(path.read_bytes(), password=None)
            assert isinstance(key, ec.EllipticCurvePrivateKey)
        else:
            private_dir(pki_dir)
            key = ec.generate_private_key(ec.SECP256R1())
            write_private(path, key.private_bytes(serialization.Encoding.PEM,
                                                  serialization.PrivateFormat.PKCS8,
                                                  serialization.NoEncryption()))
        self._key = key
        self._verified: OrderedDict[str, dict[str, Any]] = OrderedDict()

    @staticmethod
    def looks_like_jwt(token: str) -> bool:
        return token.count(".") == 2

    def issue(self, namespace: str, name: str, uid: str, spec: Mapping[str, Any],
              now: float | None = None, bound: BoundRef | None = None
              ) -> tuple[str, int, int]:
        """A token for ServiceAccount ``namespace/name`` per a TokenRequest's ``spec``
        (``bound``: the object it is bound to, already checked to exist);
        returns (token, expiry as Unix seconds, lifetime in seconds). Raises a 422
        ApiError for a bad spec."""
        seconds = spec.get("expirationSeconds")
        seconds = DEFAULT_SECONDS if seconds is None else seconds
        audiences = spec.get("audiences") or [API_AUDIENCE]
        causes: list[Cause] = []
        if not isinstance(seconds, int) or isinstance(seconds, bool) or seconds < MIN_SECONDS:
            causes.append(Cause("spec.expirationSeconds", f"Invalid value: {seconds!r}: may "
                                f"not specify a duration less than {MIN_SECONDS} seconds"))
        if not isinstance(audiences, list) or not all(isinstance(a, str) and a
                                                      for a in audiences):
            causes.append(Cause("spec.audiences", "Invalid value: must be a list of "
                                "non-empty strings"))
        if causes:
            raise errors.invalid("TokenRequest", name, causes, group="authentication.k8s.io")
        assert isinstance(seconds, int) and isinstance(audiences, list)
        issued = int(now if now is not None else time.time())
        expiry = issued + min(seconds, MAX_BOUND_SECONDS if bound is not None else MAX_SECONDS)
        header = {"alg": "ES256", "typ": "JWT", "kid": "racksmith-sa"}
        k8s: dict[str, Any] = {"namespace": namespace,
                               "serviceaccount": {"name": name, "uid": uid}}
        if bound is not None:
            k8s[bound.kind.claim] = {"name": bound.name, "uid": bound.uid}
        claims = {"iss": ISSUER, "sub": f"{SA_PREFIX}{namespace}:{name}", "aud": audiences,
                  "iat": issued, "nbf": issued, "exp": expiry, "jti": str(uuid.uuid4()),
                  "kubernetes.io": k8s}
        signing_input = (_b64(json.dumps(header, separators=(",", ":")).encode()) + "." +
                         _b64(json.dumps(claims, separators=(",", ":")).encode()))
        der = self._key.sign(signing_input.encode("ascii"), ec.ECDSA(hashes.SHA256()))
        r, s = decode_dss_signature(der)
        token = signing_input + "." + _b64(r.to_bytes(32, "big") + s.to_bytes(32, "big"))
        register_secret(token)
        return token, expiry, expiry - issued

    def verify(self, token: str, now: float | None = None,
               audience: str = API_AUDIENCE) -> Claims | None:
        """The token's ServiceAccount if the token is ours, current and for us."""
        claims = self._verified.get(token)
        if claims is not None:
            self._verified.move_to_end(token)
        else:
            claims = self._signed_claims(token)
            if claims is None:
                return None
            self._verified[token] = claims
            if len(self._verified) > VERIFIED_CACHE:
                self._verified.popitem(last=False)
        t = now if now is not None else time.time()
        exp, nbf = claims.get("exp"), claims.get("nbf")
        if not isinstance(exp, int) or not isinstance(nbf, int) or not nbf <= t < exp:
            return None
        aud = claims.get("aud")
        if not isinstance(aud, Sequence) or audience not in aud:
            return None
        k8s = claims.get("kubernetes.io") or {}
        sa = k8s.get("serviceaccount") if isinstance(k8s, dict) else None
        if not isinstance(sa, dict):
            return None
        bound: BoundRef | None = None
        for kind in BOUND_KINDS.values():
            ref = k8s.get(kind.claim)
            if isinstance(ref, dict):
                bound = BoundRef(kind, str(ref.get("name") or ""), str(ref.get("uid") or ""))
                break
        if bound is None and any(isinstance(v, dict) for k, v in k8s.items()
                                 if k not in ("namespace", "serviceaccount")):
            # bound to a kind no longer bound to (an LCMMachine, by an earlier
            # release): refused, never taken for an unbound token that would
            # outlive its binding
            return None
        return Claims(str(k8s.get("namespace") or ""), str(sa.get("name") or ""),
                      str(sa.get("uid") or ""), bound, str(claims.get("jti") or ""))

    def _signed_claims(self, token: str) -> dict[str, Any] | None:
        """The claims of ``token`` if the signature is ours and the issuer is us."""
        try:
            head, body, sig = token.split(".")
            raw = _unb64(sig)
            if len(raw) != 64:
                return None
            der = encode_dss_signature(int.from_bytes(raw[:32], "big"),
                                       int.from_bytes(raw[32:], "big"))
            self._key.public_key().verify(der, f"{head}.{body}".encode("ascii"),
                                          ec.ECDSA(hashes.SHA256()))
            claims = json.loads(_unb64(body))
        except (ValueError, InvalidSignature, UnicodeError):
            return None
        if not isinstance(claims, dict) or claims.get("iss") != ISSUER:
            return None
        return claims

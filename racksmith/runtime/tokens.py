"""What a ServiceAccount token says about itself: its claims, read unverified.

Owns :func:`token_claims` (the JWT's ``iat``, ``exp``, ServiceAccount and
bound object, without checking the signature — the API server does that)
and :meth:`TokenClaims.due`, the one renewal rule: a token is renewed once
less than a fifth of its life is left (what the kubelet does for its
projected tokens). Used by the Machine controller (is the token in a
host's user data still good to write?) and the host agent (is it time to
ask for a new one?). Pure.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass

RENEW_FRACTION = 0.2
"""A token is renewed once less than this fraction of its life is left."""


@dataclass(frozen=True)
class TokenClaims:
    """The claims Racksmith reads from a ServiceAccount token."""

    namespace: str
    service_account: str
    issued: float
    expires: float
    bound_kind: str = ""
    """The claim key of the bound object (``lcmmachine``, ``pod``...); "" when unbound."""
    bound_name: str = ""
    bound_uid: str = ""

    @property
    def seconds(self) -> int:
        """The token's whole life, in seconds."""
        return int(self.expires - self.issued)

    def due(self, now: float) -> bool:
        """Is it time to renew the token at ``now`` (Unix seconds)?"""
        return self.expires - now <= (self.expires - self.issued) * RENEW_FRACTION


def token_claims(token: str | None) -> TokenClaims | None:
    """The claims of a ServiceAccount token (None: not one)."""
    if not token or token.count(".") != 2:
        return None
    body = token.split(".")[1]
    try:
        claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        k8s = claims["kubernetes.io"]
        out = TokenClaims(namespace=str(k8s["namespace"]),
                          service_account=str(k8s["serviceaccount"]["name"]),
                          issued=float(claims["iat"]), expires=float(claims["exp"]))
    except (ValueError, binascii.Error, KeyError, TypeError):
        return None
    for key, value in k8s.items():
        if key not in ("namespace", "serviceaccount") and isinstance(value, dict):
            return TokenClaims(out.namespace, out.service_account, out.issued, out.expires,
                               str(key), str(value.get("name") or ""),
                               str(value.get("uid") or ""))
    return out

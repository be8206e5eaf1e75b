"""How machines join a cluster with the real kubeadm: bootstrap tokens, the CA
hash and the certificate key. Pure.

Owns, for one cluster:

* the **join Secret** ``<cluster>-join`` in the management API (Opaque,
  owned by the Cluster; :func:`join_secret`, :func:`parse_join`): a
  bootstrap token (``token``: kube's ``[a-z0-9]{6}.[a-z0-9]{16}``),
  when it was made and when it ends (``issued``, ``expiration``, RFC 3339)
  and a certificate key (``certificate-key``: 32 random bytes in hex, what
  ``kubeadm init --upload-certs`` and ``kubeadm join --control-plane
  --certificate-key`` take). Short-lived: the token lasts :data:`TOKEN_TTL`
  and is made anew, with a new certificate key, once less than a third of
  its life is left (:meth:`JoinCredentials.due`), so a machine whose user
  data carries it still has hours to join;
* the token as the cluster's own API holds it (:func:`cluster_token_secret`):
  Secret ``kube-system/bootstrap-token-<id>`` of type
  ``bootstrap.kubernetes.io/token`` with kube's keys (``token-id``,
  ``token-secret``, ``expiration``, ``usage-bootstrap-authentication``,
  ``usage-bootstrap-signing``, ``auth-extra-groups``
  ``system:bootstrappers:kubeadm:default-node-token``), which kube's
  bootstrap token authenticator reads and its token cleaner deletes once
  expired;
* the CA pin (:func:`ca_cert_hash`): ``sha256:`` and the hex SHA-256 of the
  cluster CA's DER SubjectPublicKeyInfo, kubeadm's ``caCertHashes``;
* what a machine's user data carries (:func:`join_file`): the file
  :data:`JOIN_FILE` (0600) with, per kubeadm phase, what the agent merges
  into its kubeadm document — for ``init`` (the first control-plane
  machine) ``bootstrapTokens`` (the token, its end, kube's usages and
  group) and the ``certificateKey``; for ``join`` the token discovery
  (``discovery.bootstrapToken``: token, the cluster's endpoint, the CA
  hash; ``discovery.tlsBootstrapToken``) and, for a control-plane machine,
  ``controlPlane.certificateKey``. Workers never get the certificate key.

The token is a credential: it goes into Secrets only, never into an
LCMMachine, a status, an Event or a log.
"""

from __future__ import annotations

import base64
import datetime as dt
import functools
import hashlib
import re
import secrets
import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization

__all__ = ["JOIN_FILE", "TOKEN_TTL", "JoinCredentials", "ca_cert_hash", "cluster_token_secret",
           "join_file", "join_secret", "join_secret_name", "new_join", "parse_join"]

JOIN_FILE = "/etc/kubernetes/racksmith/join.yaml"
"""Where a machine's user data puts what kubeadm needs to join (0600)."""
TOKEN_TTL = dt.timedelta(hours=24)
"""A bootstrap token's life (kubeadm's default); renewed with a third left."""
TOKEN_RE = re.compile(r"^([a-z0-9]{6})\.([a-z0-9]{16})$")
"""kube's bootstrap token format (id.secret)."""
NODE_GROUP = "system:bootstrappers:kubeadm:default-node-token"
"""The group kubeadm's join RBAC is bound to."""
_ALPHABET = string.ascii_lowercase + string.digits
_KEYS = ("token", "issued", "expiration", "certificate-key")


def join_secret_name(cluster: str) -> str:
    return f"{cluster}-join"


@dataclass(frozen=True)
class JoinCredentials:
    """A cluster's current bootstrap token and certificate key. Never log it."""

    token: str
    issued: dt.datetime
    expires: dt.datetime
    certificate_key: str

    def __repr__(self) -> str:
        return f"JoinCredentials(id={self.token_id}, expires={self.expires.isoformat()})"

    @property
    def token_id(self) -> str:
        """The public half of the token (kube names its Secret after it)."""
        return self.token.partition(".")[0]

    def due(self, now: dt.datetime) -> bool:
        """Time to make new ones: less than a third of the token's life is left."""
        return self.expires - now <= (self.expires - self.issued) / 3


def new_join(now: dt.datetime, ttl: dt.timedelta = TOKEN_TTL) -> JoinCredentials:
    """A fresh random token and certificate key, from ``now`` for ``ttl``."""
    token_id = "".join(secrets.choice(_ALPHABET) for _ in range(6))
    token_secret = "".join(secrets.choice(_ALPHABET) for _ in range(16))
    now = now.replace(microsecond=0)
    return JoinCredentials(f"{token_id}.{token_secret}", now, now + ttl,
                           secrets.token_hex(32))


def _stamp(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def join_secret(namespace: str, cluster: str, join: JoinCredentials,
                labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The management API's ``<cluster>-join`` Secret."""
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": join_secret_name(cluster), "namespace": namespace,
                         "labels": dict(labels or {})},
            "data": {"token": _b64(join.token), "issued": _b64(_stamp(join.issued)),
                     "expiration": _b64(_stamp(join.expires)),
                     "certificate-key": _b64(join.certificate_key)}}


def parse_join(secret: Mapping[str, Any] | None) -> JoinCredentials | None:
    """The credentials of a ``<cluster>-join`` Secret (None: missing or damaged,
    which the Cluster controller replaces)."""
    data = (secret or {}).get("data")
    if not isinstance(data, Mapping):
        return None
    try:
        values = {k: base64.b64decode(str(data[k])).decode() for k in _KEYS}
        issued = dt.datetime.fromisoformat(values["issued"].replace("Z", "+00:00"))
        expires = dt.datetime.fromisoformat(values["expiration"].replace("Z", "+00:00"))
    except (KeyError, ValueError, UnicodeDecodeError):
        return None
    key = values["certificate-key"]
    if not TOKEN_RE.match(values["token"]) or not re.fullmatch(r"[0-9a-f]{64}", key) \
            or expires <= issued:
        return None
    return JoinCredentials(values["token"], issued, expires, key)


def cluster_token_secret(join: JoinCredentials) -> dict[str, Any]:
    """The token as kube's bootstrap authenticator reads it, in the cluster."""
    token_id, _, token_secret = join.token.partition(".")
    return {"apiVersion": "v1", "kind": "Secret", "type": "bootstrap.kubernetes.io/token",
            "metadata": {"name": f"bootstrap-token-{token_id}", "namespace": "kube-system"},
            "data": {k: _b64(v) for k, v in (
                ("token-id", token_id), ("token-secret", token_secret),
                ("expiration", _stamp(join.expires)),
                ("description", "made by Racksmith for joining machines"),
                ("usage-bootstrap-authentication", "true"),
                ("usage-bootstrap-signing", "true"),
                ("auth-extra-groups", NODE_GROUP))}}


@functools.lru_cache(maxsize=64)
def ca_cert_hash(ca_pem: bytes) -> str:
    """kubeadm's CA pin: ``sha256:`` + hex SHA-256 of the CA's SubjectPublicKeyInfo."""
    cert = x509.load_pem_x509_certificate(ca_pem)
    spki = cert.public_key().public_bytes(serialization.Encoding.DER,
                                          serialization.PublicFormat.SubjectPublicKeyInfo)
    return f"sha256:{hashlib.sha256(spki).hexdigest()}"


@functools.lru_cache(maxsize=256)
def join_file(join: JoinCredentials, ca_hash: str, endpoint: str, *,
              control_plane: bool) -> bytes:
    """The content of :data:`JOIN_FILE` for one machine (see the module docstring);
    ``endpoint``: ``host:port`` of the cluster's API. The same for the same
    credentials (the token's end is a time, not a TTL), so a machine's user
    data changes only when the token does; kept per arguments (the Machine
    controller renders it on every reconcile of every machine)."""
    join_doc: dict[str, Any] = {"discovery": {
        "bootstrapToken": {"token": join.token, "apiServerEndpoint": endpoint,
                           "caCertHashes": [ca_hash]},
        "tlsBootstrapToken": join.token}}
    doc: dict[str, Any] = {"join": join_doc}
    if control_plane:
        join_doc["controlPlane"] = {"certificateKey": join.certificate_key}
        doc["init"] = {"bootstrapTokens": [{
            "token": join.token, "expires": _stamp(join.expires),
            "usages": ["signing", "authentication"], "groups": [NODE_GROUP],
            "description": "made by Racksmith for joining machines"}],
            "certificateKey": join.certificate_key}
    return yaml.safe_dump(doc, sort_keys=True).encode()

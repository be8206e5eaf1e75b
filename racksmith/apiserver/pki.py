"""The API server's TLS material, static tokens and the kubeconfig that uses them.

Owns, under the data directory:

* ``pki/ca.crt`` / ``pki/ca.key`` — a private CA (EC P-256, ten years),
  generated once and kept: kubeconfigs embed it. The certificates are made
  by :mod:`racksmith.controlplane.pki` (the clusters' own PKI), as etcd's are.
* ``pki/apiserver.crt`` / ``pki/apiserver.key`` — the serving certificate,
  signed by that CA with IP and DNS SANs for the requested hosts; reissued when
  the host set changes, when it expires within 30 days, or when it no longer
  chains to the CA.
* ``tokens.csv`` — bearer tokens in kube-apiserver's static token file format
  (``token,user,uid,"group1,group2"``), with the ``racksmith-admin`` user in
  ``system:masters``.

and writes kubeconfig files pointing at the server. kubectl drops bearer
tokens over plain http, so tokens go with TLS (``certificate-authority-data``).

Every file here (keys, tokens, certificates alike) is created 0600 and
written atomically (temp file + rename), in 0700 directories
(:mod:`racksmith.filemodes`).
Neither tokens nor keys ever appear in logs or error messages: every token
read or made here is registered with :mod:`racksmith.redact`, which takes
them out of any log line.
"""

from __future__ import annotations

import base64
import contextlib
import csv
import datetime as dt
import ipaddress
import logging
import os
import secrets
import ssl
import tempfile
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from racksmith.controlplane import pki as certs
from racksmith.filemodes import private_dir
from racksmith.redact import register_secrets

__all__ = [
    "ADMIN_GROUPS",
    "ADMIN_USER",
    "AGENT_USER",
    "HostIdentity",
    "Pki",
    "PkiError",
    "TokenFileError",
    "User",
    "drop_user",
    "ensure_admin_token",
    "ensure_pki",
    "ensure_user_token",
    "load_tokens",
    "write_kubeconfig",
]

log = logging.getLogger(__name__)

ADMIN_USER = "racksmith-admin"
ADMIN_GROUPS: tuple[str, ...] = ("system:masters",)
#: The host agents' shared user of earlier releases (removed from the token
#: file at start; the name stays reserved). Agents now carry tokens of their
#: own ServiceAccounts (racksmith.hostcreds, racksmith.apiserver.tokenauth).
AGENT_USER = "racksmith-agent"
TOKENS_FILE = "tokens.csv"
PKI_DIR = "pki"

RENEW_BEFORE = dt.timedelta(days=30)


class PkiError(RuntimeError):
    """The PKI directory is in a state we will not silently repair."""


class TokenFileError(ValueError):
    """A malformed static token file (the message names the line, never the token)."""


# --------------------------------------------------------------------------- files


def _atomic_write(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Write ``data`` to ``path`` via a temp file in the same directory and a rename."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _private_dir(path: Path) -> None:
    private_dir(path)


# --------------------------------------------------------------------------- certificates


@dataclass(frozen=True)
class Pki:
    """Paths of the CA and serving certificate, and the CA's PEM for kubeconfigs."""

    ca_cert_pem: bytes
    ca_path: Path
    cert_path: Path
    key_path: Path

    def ssl_context(self) -> ssl.SSLContext:
        """A server-side TLS context presenting the serving certificate (TLS 1.2+)."""
        return server_ssl_context(self.cert_path, self.key_path)


def server_ssl_context(cert_file: Path, key_file: Path, client_ca_file: Path | None = None
                       ) -> ssl.SSLContext:
    """A server-side TLS 1.2+ context presenting ``cert_file``; with
    ``client_ca_file``, client certificates that CA issued are asked for
    (optional: a request may carry a token instead, or nothing) and verified
    (``racksmith.apiserver.x509auth`` reads who they name)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert_file, key_file)
    if client_ca_file is not None:
        context.load_verify_locations(cafile=str(client_ca_file))
        context.verify_mode = ssl.CERT_OPTIONAL
    return context


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


_IP = ipaddress.IPv4Address | ipaddress.IPv6Address


def _normalise_hosts(hosts: Iterable[str]) -> tuple[list[_IP], list[str]]:
    ips: list[_IP] = []
    names: list[str] = []
    for raw in hosts:
        host = raw.strip().strip("[]")
        if not host:
            continue
        try:
            ip = ipaddress.ip_address(host)
        except ValueError:
            name = host.lower().rstrip(".")
            if name not in names:
                names.append(name)
        else:
            if ip not in ips:
                ips.append(ip)
    if not ips and not names:
        raise ValueError("ensure_pki needs at least one host name or IP address")
    return ips, names


def _load_ca(cert_path: Path, key_path: Path) -> certs.KeyPair:
    try:
        ca = certs.KeyPair(cert_path.read_bytes(), key_path.read_bytes())
        cert, key = ca.certificate(), ca.private_key()
    except (ValueError, TypeError):
        raise PkiError(
            f"cannot read the CA in {cert_path.parent}; remove that directory to generate a new"
            " CA (existing kubeconfigs must then be rewritten)"
        ) from None
    if key.public_key() != cert.public_key():
        raise PkiError(
            f"{key_path} does not belong to {cert_path}; remove {cert_path.parent} to start over"
        )
    return ca


def _serving_is_current(
    cert_path: Path,
    key_path: Path,
    ca_cert: x509.Certificate,
    ips: Sequence[_IP],
    names: Sequence[str],
) -> bool:
    if not cert_path.exists() or not key_path.exists():
        return False
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
        cert.verify_directly_issued_by(ca_cert)
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (ValueError, TypeError, InvalidSignature, x509.ExtensionNotFound):
        log.warning("serving certificate in %s is unusable; issuing a new one", cert_path.parent)
        return False
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.public_key() != cert.public_key():
        return False
    if set(san.get_values_for_type(x509.IPAddress)) != set(ips) or set(
        san.get_values_for_type(x509.DNSName)
    ) != set(names):
        log.info("API server host names changed; issuing a new serving certificate")
        return False
    if cert.not_valid_after_utc - RENEW_BEFORE <= _now():
        log.info("serving certificate expires soon; issuing a new one")
        return False
    return True


def ensure_pki(data_dir: Path, hosts: Sequence[str] = ("127.0.0.1", "localhost"), *,
               ca_dir: Path | None = None) -> Pki:
    """Create (first start) or check the CA and serving certificate under ``data_dir/pki``
    (the CA under ``ca_dir/pki`` when given: API server replicas share one CA
    and each has its own serving certificate).

    The CA is generated only when neither ``ca.crt`` nor ``ca.key`` exists (or
    the CA is about to expire); the serving certificate is reissued whenever it
    does not cover exactly ``hosts``, expires within 30 days or does not chain
    to the CA. ``hosts`` entries that parse as IP addresses become IP SANs, the
    rest DNS SANs.
    """
    ips, names = _normalise_hosts(hosts)
    pki_dir = data_dir / PKI_DIR
    _private_dir(pki_dir)
    ca_pki = (ca_dir or data_dir) / PKI_DIR
    _private_dir(ca_pki)
    ca_path, ca_key_path = ca_pki / "ca.crt", ca_pki / "ca.key"
    cert_path, key_path = pki_dir / "apiserver.crt", pki_dir / "apiserver.key"

    if not ca_path.exists() and not ca_key_path.exists():
        ca = _generate_ca(ca_path, ca_key_path)
    elif ca_path.exists() and ca_key_path.exists():
        ca = _load_ca(ca_path, ca_key_path)
        if ca.certificate().not_valid_after_utc - RENEW_BEFORE <= _now():
            log.warning("the racksmith CA expires soon; generating a new one (rewrite kubeconfigs)")
            ca = _generate_ca(ca_path, ca_key_path)
    else:
        missing = ca_key_path if ca_path.exists() else ca_path
        raise PkiError(
            f"{missing} is missing; restore it, or remove {pki_dir} to generate a new CA"
            " (existing kubeconfigs must then be rewritten)"
        )
    ca_key_path.chmod(0o600)

    if not _serving_is_current(cert_path, key_path, ca.certificate(), ips, names):
        serving = certs.issue_serving(ca, "racksmith-apiserver",
                                      [*names, *(str(ip) for ip in ips)])
        _atomic_write(key_path, serving.key_pem)
        _atomic_write(cert_path, serving.cert_pem)
    key_path.chmod(0o600)

    return Pki(
        ca_cert_pem=ca.cert_pem,
        ca_path=ca_path,
        cert_path=cert_path,
        key_path=key_path,
    )


def _generate_ca(ca_path: Path, ca_key_path: Path) -> certs.KeyPair:
    log.info("generating the racksmith CA in %s", ca_path.parent)
    ca = certs.new_ca("racksmith-ca")
    _atomic_write(ca_key_path, ca.key_pem)
    _atomic_write(ca_path, ca.cert_pem)
    return ca


# --------------------------------------------------------------------------- tokens


@dataclass(frozen=True)
class HostIdentity:
    """The host a credential belongs to (see
    :mod:`racksmith.apiserver.rbac.hostrestriction`): either a host agent's
    token (ServiceAccount ``racksmith-host-<machine>``, bound to the
    machine's user-data Secret, :mod:`racksmith.hostcreds`; the host's
    LCMMachine and Node have the machine's name), or a kubelet's client certificate (user
    ``system:node:<node>`` in group ``system:nodes``, :meth:`of_node`),
    which names the Node and no LCMMachine."""

    namespace: str
    lcm_machine: str
    uid: str
    """The uid of the user-data Secret the host agent's token is bound to."""
    node_name: str = ""
    """The Node of a kubelet's identity ("" for a host agent's: its LCMMachine's name)."""

    @classmethod
    def of_node(cls, node: str) -> HostIdentity:
        """The identity of the kubelet of Node ``node`` (no LCMMachine)."""
        return cls(namespace="", lcm_machine="", uid="", node_name=node)

    @property
    def node(self) -> str:
        return self.node_name or self.lcm_machine

    @property
    def kubelet(self) -> bool:
        """A kubelet's identity (a node certificate), not a host agent's."""
        return not self.lcm_machine

    def extra(self) -> dict[str, list[str]]:
        """kube's ``user.extra`` for this binding (as for pod-bound tokens);
        none for a kubelet's certificate, as in kube."""
        if self.kubelet:
            return {}
        return {"authentication.kubernetes.io/node-name": [self.node],
                "authentication.racksmith.io/lcmmachine-name": [self.lcm_machine]}


@dataclass(frozen=True)
class User:
    """An authenticated user: name, uid and groups, as in kube's ``user.Info``;
    ``host``: the host a host agent's credential is bound to."""

    name: str
    uid: str
    groups: tuple[str, ...] = ()
    host: HostIdentity | None = None
    credential_id: str = ""


def load_tokens(path: Path) -> dict[str, User]:
    """Parse a static token file (``token,user,uid[,"group1,group2"]`` per line).

    Blank lines and lines starting with ``#`` are skipped. Raises
    :class:`TokenFileError` naming the file and line for malformed lines and
    duplicate tokens; the token itself is never part of the message.
    """
    users: dict[str, User] = {}
    seen_at: dict[str, int] = {}
    text = path.read_text(encoding="utf-8")
    for lineno, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        where = f"{path}:{lineno}"
        try:
            (record,) = list(csv.reader([stripped], strict=True))
        except (csv.Error, ValueError):
            raise TokenFileError(f"{where}: not a valid CSV record") from None
        record = [field.strip() for field in record]
        if len(record) < 3:
            raise TokenFileError(
                f"{where}: expected token,user,uid[,groups] but found {len(record)} column(s)"
            )
        token, name, uid = record[0], record[1], record[2]
        if not token:
            raise TokenFileError(f"{where}: the token column is empty")
        if not name:
            raise TokenFileError(f"{where}: the user column is empty")
        groups: tuple[str, ...] = ()
        if len(record) > 3 and record[3]:
            groups = tuple(g.strip() for g in record[3].split(",") if g.strip())
        if token in users:
            raise TokenFileError(f"{where}: duplicates the token of line {seen_at[token]}")
        users[token] = User(name=name, uid=uid, groups=groups)
        seen_at[token] = lineno
    # Whoever reads tokens (the API server) never logs them: see racksmith.redact.
    register_secrets(users)
    return users


def _token_line(token: str, user: User) -> str:
    return f'{token},{user.name},{user.uid},"{",".join(user.groups)}"\n'


def write_tokens(path: Path, users: dict[str, User]) -> None:
    """Replace the token file with ``users`` (atomically, 0600)."""
    _atomic_write(path, "".join(_token_line(t, u) for t, u in users.items()).encode("utf-8"))


def ensure_admin_token(data_dir: Path) -> str:
    """Return the ``racksmith-admin`` token from ``data_dir/tokens.csv``, creating it if needed.

    Idempotent: an existing admin token is reused, other users' lines are kept.
    The file is (re)written atomically with mode 0600.
    """
    return ensure_user_token(data_dir, ADMIN_USER, ADMIN_GROUPS)


def ensure_user_token(data_dir: Path, name: str, groups: tuple[str, ...]) -> str:
    """Return user ``name``'s token from ``data_dir/tokens.csv``, creating it if needed.

    Idempotent: an existing token of that user is reused, other users' lines are
    kept. The file is (re)written atomically with mode 0600.
    """
    _private_dir(data_dir)
    path = data_dir / TOKENS_FILE
    existing = ""
    if path.exists():
        for token, user in load_tokens(path).items():
            if user.name == name:
                if path.stat().st_mode & 0o077:
                    log.warning("%s was readable by others; setting mode 0600", path)
                    path.chmod(0o600)
                return token
        existing = path.read_text(encoding="utf-8")
        if existing and not existing.endswith("\n"):
            existing += "\n"
    token = secrets.token_urlsafe(32)
    register_secrets([token])
    user = User(name=name, uid=str(uuid.uuid4()), groups=groups)
    _atomic_write(path, (existing + _token_line(token, user)).encode("utf-8"))
    log.info("created the %s token in %s", name, path)
    return token


def drop_user(data_dir: Path, name: str) -> bool:
    """Remove every line of user ``name`` from ``data_dir/tokens.csv``; False
    when it had none."""
    path = data_dir / TOKENS_FILE
    if not path.exists():
        return False
    users = load_tokens(path)
    if not any(u.name == name for u in users.values()):
        return False
    write_tokens(path, {t: u for t, u in users.items() if u.name != name})
    log.info("removed the %s token from %s", name, path)
    return True


# --------------------------------------------------------------------------- kubeconfig


def write_kubeconfig(
    path: Path,
    *,
    server: str,
    token: str,
    ca_pem: bytes | None,
    context_name: str = "racksmith",
    user_name: str | None = None,
) -> None:
    """Write a kubeconfig for ``server`` with a bearer ``token`` (mode 0600, atomically).

    ``ca_pem`` goes in as ``certificate-authority-data``; pass ``None`` only for
    a server whose certificate the system trusts — or for plain http, where
    kubectl will not send the token at all.
    """
    if server.startswith("http://"):
        log.warning("kubeconfig %s points at plain http: kubectl will not send its token", path)
    cluster: dict[str, Any] = {"server": server}
    if ca_pem is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode("ascii")
    config: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context_name, "cluster": cluster}],
        "users": [{"name": user_name or f"{context_name}-admin", "user": {"token": token}}],
        "contexts": [
            {
                "name": context_name,
                "context": {"cluster": context_name,
                            "user": user_name or f"{context_name}-admin"},
            }
        ],
        "current-context": context_name,
        "preferences": {},
    }
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    _atomic_write(path, yaml.safe_dump(config, sort_keys=False).encode("utf-8"))

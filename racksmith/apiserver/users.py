"""The people who use the API server: accounts in the static token file.

Owns the ``racksmith user`` operations on ``DATA/tokens.csv`` and
``DATA/users/``: :func:`add_user` (a new token for NAME in the group of its
role, and ``DATA/users/NAME.kubeconfig`` that uses it), :func:`revoke_user`
(its line and kubeconfig go), :func:`list_users` (names and roles, never
tokens), and :class:`TokenFile`, the server's view of the token file: it is
re-read when the file changes (looked at no more than once a second), so a
user added or revoked takes effect on a running server within a second.

A role is a group (``ROLE_GROUPS``) that a built-in ClusterRoleBinding
binds (racksmith.apiserver.rbac.bootstrap): ``view`` → ``view``,
``operator`` → ``racksmith:operator``, ``admin`` → ``cluster-admin``.
Revoking a user is removing its token, so nothing in the store needs
cleaning up. The admin and agent identities of the server itself cannot be
added or revoked here.
"""

from __future__ import annotations

import base64
import logging
import re
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from racksmith.apiserver import pki
from racksmith.apiserver.rbac.bootstrap import ROLE_GROUPS
from racksmith.filemodes import private_dir

log = logging.getLogger("racksmith.apiserver")

USERS_DIR = "users"
_RESERVED = (pki.ADMIN_USER, pki.AGENT_USER)
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9._@]{0,61}[a-z0-9])?$")


class UserError(ValueError):
    """A user that cannot be added or revoked (the message says why)."""


@dataclass(frozen=True)
class Account:
    name: str
    role: str
    """view, operator, admin; or the groups, for a line written by hand."""


def role_of(user: pki.User) -> str:
    for role, group in ROLE_GROUPS.items():
        if group in user.groups:
            return role
    return ",".join(user.groups) or "-"


def kubeconfig_path(data_dir: Path, name: str) -> Path:
    return data_dir / USERS_DIR / f"{name}.kubeconfig"


def add_user(data_dir: Path, name: str, role: str) -> Path:
    """Give ``name`` a token with ``role``; returns its kubeconfig's path.

    Raises UserError for a reserved or malformed name, an unknown role, a
    user that exists already, or a data dir the server never started in."""
    if role not in ROLE_GROUPS:
        raise UserError(f"unknown role {role!r}: valid roles are {', '.join(ROLE_GROUPS)}")
    if name in _RESERVED or name.startswith("system:"):
        raise UserError(f"{name!r} is reserved for Racksmith's own identities")
    if not _NAME.match(name):
        raise UserError(f"{name!r} is not a valid user name: lower-case letters, digits and "
                        "'-._@', 1 to 63 characters, starting and ending alphanumeric")
    admin_config = data_dir / "kubeconfig"
    if not admin_config.exists():
        raise UserError(f"{data_dir} has no kubeconfig: run `racksmith up` (or `racksmith "
                        "apiserver`) on it once first")
    tokens = data_dir / pki.TOKENS_FILE
    if tokens.exists() and any(u.name == name for u in pki.load_tokens(tokens).values()):
        raise UserError(f"user {name!r} exists already: `racksmith user revoke {name}` first")
    token = pki.ensure_user_token(data_dir, name, (ROLE_GROUPS[role],))
    config = yaml.safe_load(admin_config.read_text(encoding="utf-8"))
    cluster = config["clusters"][0]["cluster"]
    ca = cluster.get("certificate-authority-data")
    path = kubeconfig_path(data_dir, name)
    private_dir(path.parent)
    pki.write_kubeconfig(path, server=cluster["server"], token=token,
                         ca_pem=base64.b64decode(ca) if ca else None, user_name=name)
    return path


def revoke_user(data_dir: Path, name: str) -> bool:
    """Remove ``name``'s token(s) and kubeconfig; False if there was no such user."""
    if name in _RESERVED:
        raise UserError(f"{name!r} is one of Racksmith's own identities and cannot be revoked")
    path = data_dir / pki.TOKENS_FILE
    if not path.exists():
        return False
    users = pki.load_tokens(path)
    if not any(u.name == name for u in users.values()):
        return False
    pki.write_tokens(path, {t: u for t, u in users.items() if u.name != name})
    kubeconfig_path(data_dir, name).unlink(missing_ok=True)
    return True


def list_users(data_dir: Path) -> list[Account]:
    path = data_dir / pki.TOKENS_FILE
    if not path.exists():
        return []
    return sorted({Account(u.name, role_of(u)) for u in pki.load_tokens(path).values()},
                  key=lambda a: a.name)


class TokenFile:
    """The token file as the server sees it: re-read when it changes."""

    def __init__(self, path: Path, *, check_every: float = 1.0) -> None:
        self.path = path
        self.check_every = check_every
        self._stamp: tuple[int, int] | None = None
        self._checked = float("-inf")
        self._tokens: dict[str, pki.User] = {}
        self.generation = 0
        self.current()

    def current(self) -> dict[str, pki.User]:
        now = time.monotonic()
        if now - self._checked < self.check_every:
            return self._tokens
        self._checked = now
        try:
            st = self.path.stat()
        except FileNotFoundError:
            stamp = None
        else:
            stamp = (st.st_mtime_ns, st.st_size)
        if stamp == self._stamp:
            return self._tokens
        try:
            self._tokens = pki.load_tokens(self.path) if stamp is not None else {}
        except (pki.TokenFileError, OSError) as exc:
            # Keep serving the last good set; the message never holds a token.
            log.warning("token file not reloaded: %s", exc)
            return self._tokens
        self._stamp = stamp
        self.generation += 1
        return self._tokens

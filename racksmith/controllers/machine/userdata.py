"""The user data a Machine's host boots with: the agent config in a cloud-config.

Owns ``AgentAccess`` (server and CA read from the agent Secret),
``agent_access`` (parsing that Secret's data), ``render_user_data``, the
cloud-config of the contracts ("User data and the agent config"): one
``write_files`` entry ``/etc/racksmith/agent.yaml`` (mode 0600) and one
``runcmd`` starting ``racksmith agent``, and reading the token back out of
written user data (``token_of``, ``token_fresh``). Pure.

The token is the host's own: a ServiceAccount token bound to the machine's
LCMMachine, requested by the committer (``WriteUserData`` with no token).
Written user data keeps its token while that token is bound to the current
LCMMachine and more than a fifth of its life is left; otherwise a new one
is requested. The token is a secret: it is never in a repr, a log line, a
status or an Event.

Reading written user data back (``token_of``, ``file_of``) happens on every
reconcile of a Machine, and a control-plane machine's user data carries the
cluster's PKI (tens of kilobytes of YAML): the parsed parts of the last 2,048
documents are kept (an LRU keyed by the text; libyaml parses a miss).
Same text, same answer: the functions stay pure.
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from racksmith.controllers.machine.names import AGENT_CONFIG_PATH, AGENT_SECRET_KEYS
from racksmith.runtime.tokens import token_claims


@dataclass(frozen=True)
class AgentAccess:
    """How an agent reaches the API server; ``ca_pem`` is the CA bundle (PEM)."""

    server: str
    ca_pem: bytes = field(repr=False)


def agent_access(data: Mapping[str, bytes]) -> AgentAccess | str:
    """The access in the agent Secret's decoded ``data``, or what is missing."""
    missing = [k for k in AGENT_SECRET_KEYS if not data.get(k)]
    if missing:
        return f"has no {', '.join(missing)} key"
    return AgentAccess(
        server=data["server"].decode("utf-8", "replace").strip(),
        ca_pem=data["ca.crt"],
    )


@dataclass(frozen=True)
class _Read:
    """What ``token_of`` and ``file_of`` read from one document."""

    token: str | None = field(default=None, repr=False)
    files: Mapping[str, bytes] = field(default_factory=dict, repr=False)


def _load(text: str) -> Any:
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


@functools.lru_cache(maxsize=2048)
def _read(user_data: str) -> _Read:
    """The parsed parts of ``user_data`` (kept: module docstring)."""
    try:
        document = _load(user_data.removeprefix("#cloud-config\n"))
        entries = document["write_files"]
    except (yaml.YAMLError, KeyError, TypeError):
        return _Read()
    token: str | None = None
    try:
        found = _load(entries[0]["content"])["token"]
        token = found if isinstance(found, str) and found else None
    except (yaml.YAMLError, KeyError, IndexError, TypeError):
        pass
    files: dict[str, bytes] = {}
    try:
        for entry in entries:
            path = entry.get("path")
            if isinstance(path, str) and path not in files and entry.get("encoding") == "b64":
                try:
                    files[path] = base64.b64decode(entry["content"], validate=True)
                except (KeyError, TypeError, ValueError):
                    continue
    except (TypeError, AttributeError):
        pass
    return _Read(token, files)


def token_of(user_data: str | None) -> str | None:
    """The agent token in user data this module rendered (None: none found)."""
    return _read(user_data or "").token


def file_of(user_data: str | None, path: str) -> bytes | None:
    """The content of file ``path`` in user data this module rendered (None:
    not there)."""
    return _read(user_data or "").files.get(path)


def token_fresh(token: str | None, secret_uid: str, now: float) -> bool:
    """Is ``token`` bound to the user-data Secret of uid ``secret_uid`` and
    not yet due for renewal at ``now`` (Unix seconds)? Reads the claims only
    (the API server checks the signature)."""
    claims = token_claims(token)
    return (claims is not None and bool(secret_uid) and claims.bound_kind == "secret"
            and claims.bound_uid == secret_uid and not claims.due(now))


class _Literal(str):
    """A string dumped in YAML's literal block style (``|``)."""


class _Dumper(yaml.SafeDumper):
    pass


def _literal(dumper: yaml.SafeDumper, value: _Literal) -> Any:
    return dumper.represent_scalar("tag:yaml.org,2002:str", str(value), style="|")


_Dumper.add_representer(_Literal, _literal)


def agent_config(access: AgentAccess, token: str, namespace: str,
                 machine: str) -> dict[str, str]:
    """The content of ``/etc/racksmith/agent.yaml`` for ``machine``."""
    return {
        "server": access.server,
        "certificateAuthorityData": base64.b64encode(access.ca_pem).decode("ascii"),
        "token": token,
        "namespace": namespace,
        "lcmMachine": machine,
        "nodeName": machine,
    }


def render_user_data(access: AgentAccess, token: str, namespace: str, machine: str,
                     files: Mapping[str, bytes] | None = None) -> str:
    """The ``#cloud-config`` document for ``machine`` (same input, same text).
    ``files``: more files the host gets (path → content, mode 0600, base64 in
    the document), after the agent config: a control-plane machine's share of
    the cluster's PKI in kubeadm's layout, as Cluster API's bootstrap data
    carries it."""
    config = yaml.dump(agent_config(access, token, namespace, machine), Dumper=_Dumper,
                       sort_keys=False, width=1 << 16)
    extra = [{"path": path, "permissions": "0600", "encoding": "b64",
              "content": base64.b64encode(data).decode("ascii")}
             for path, data in sorted((files or {}).items())]
    document = {
        "write_files": [{
            "path": AGENT_CONFIG_PATH,
            "permissions": "0600",
            "content": _Literal(config),
        }, *extra],
        "runcmd": [["racksmith", "agent", "--config", AGENT_CONFIG_PATH]],
    }
    body = yaml.dump(document, Dumper=_Dumper, sort_keys=False, default_flow_style=None,
                     width=1 << 16)
    return "#cloud-config\n" + body

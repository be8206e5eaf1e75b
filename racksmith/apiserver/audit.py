"""The audit trail: who did what through the API server, and who was refused.

Owns :class:`AuditLog` (the writer) and :func:`read_events` / :func:`matches`
(the reader of ``racksmith audit``). Every mutating request (create, update,
patch, delete, deletecollection) and every refused one (401, 403) becomes
one ``audit.k8s.io/v1`` Event at the ``Metadata`` level — user, groups,
verb, resource, namespace, name, response code, the request-received and
response-complete timestamps, source address, user agent and the
authorization decision — as one JSON line in ``DATA/audit/audit.log``
(directory 0700, files 0600), rotated at ``max_bytes`` into
``audit.log.1`` … ``audit.log.<keep>`` (the oldest dropped).

Metadata level means no request or response body is ever written: a
Secret's value cannot reach the audit log. The request URI goes in without
its query string's values (a label selector can be anything the client
typed); reads that were allowed are not recorded (kube's usual policy for
a site: writes and denials).

Two kinds of allowed request are not changes and are left out too, as the
audit policies of managed Kubernetes leave them out (GKE's drops leader
election renewals): **heartbeats** — an update or patch of a Lease (leader
election, node leases) or of a Node's status — and **questions** — a
create of a review (``SelfSubjectAccessReview``, ``SubjectAccessReview``,
``TokenReview``...), which stores nothing. Each is still recorded when it is
refused. Without this the trail holds minutes at scale: 1,000 host agents
heartbeat 200 times a second, which fills the five 10 MiB files in about four
minutes and pushes every person's action out.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from racksmith.apiserver.rbac.rules import Attributes
from racksmith.filemodes import open_private, private_dir

AUDIT_DIR = "audit"
AUDIT_FILE = "audit.log"
MUTATING = frozenset({"create", "update", "patch", "delete", "deletecollection"})
HEARTBEATS = frozenset({("coordination.k8s.io", "leases", ""), ("", "nodes", "status")})
"""(API group, resource, subresource) whose allowed update or patch is a heartbeat."""
REVIEW_GROUPS = frozenset({"authorization.k8s.io", "authentication.k8s.io"})
"""Whose creates are questions (reviews), not writes."""

Obj = dict[str, Any]


def _stamp(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _uri(path: str, query_keys: list[str]) -> str:
    if not query_keys:
        return path
    return path + "?" + "&".join(f"{k}=..." for k in query_keys)


@dataclass
class AuditRecord:
    """What one request was, for its audit line."""

    attrs: Attributes
    code: int
    received: dt.datetime
    user: str = ""
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: dict[str, list[str]] | None = None
    """kube's ``user.extra`` (a host agent's node and LCMMachine)."""
    source_ip: str = ""
    user_agent: str = ""
    query_keys: tuple[str, ...] = ()

    def event(self, now: dt.datetime) -> Obj:
        a = self.attrs
        ev: Obj = {"kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata",
                   "auditID": str(uuid.uuid4()), "stage": "ResponseComplete",
                   "requestURI": _uri(a.path, list(self.query_keys)), "verb": a.verb,
                   "user": {"username": self.user or "system:anonymous",
                            "groups": list(self.groups) or ["system:unauthenticated"]},
                   "sourceIPs": [self.source_ip] if self.source_ip else [],
                   "userAgent": self.user_agent[:256],
                   "responseStatus": {"metadata": {}, "code": self.code},
                   "requestReceivedTimestamp": _stamp(self.received),
                   "stageTimestamp": _stamp(now)}
        if self.uid:
            ev["user"]["uid"] = self.uid
        if self.extra:
            ev["user"]["extra"] = self.extra
        if a.resource_request:
            ref: Obj = {"resource": a.resource, "apiGroup": a.api_group,
                        "apiVersion": a.api_version}
            for key, value in (("namespace", a.namespace), ("name", a.name),
                               ("subresource", a.subresource)):
                if value:
                    ref[key] = value
            ev["objectRef"] = ref
        decision = "forbid" if self.code == 403 else "allow"
        if self.code != 401:
            ev["annotations"] = {"authorization.k8s.io/decision": decision}
        return ev


class AuditLog:
    """Appends audit events to ``DATA/audit/audit.log``, rotating it."""

    def __init__(self, data_dir: Path, *, max_bytes: int = 10 * 1024 * 1024,
                 keep: int = 5) -> None:
        self.dir = private_dir(data_dir / AUDIT_DIR)
        self.path = self.dir / AUDIT_FILE
        self.max_bytes = max_bytes
        self.keep = keep
        self._file: IO[Any] | None = None
        self._size = 0

    @staticmethod
    def wanted(attrs: Attributes, code: int) -> bool:
        """Is this request recorded (a write, or refused; not a heartbeat or a
        question that was allowed)?"""
        if code in (401, 403):
            return True
        if not attrs.resource_request or attrs.verb not in MUTATING:
            return False
        if attrs.verb == "create" and attrs.api_group in REVIEW_GROUPS:
            return False
        return not (attrs.verb in ("update", "patch") and
                    (attrs.api_group, attrs.resource, attrs.subresource) in HEARTBEATS)

    def write(self, record: AuditRecord) -> None:
        line = json.dumps(record.event(dt.datetime.now(dt.UTC)), separators=(",", ":"))
        data = (line + "\n").encode("utf-8")
        if self._file is None:
            self._file = open_private(self.path, "ab")
            self._size = self.path.stat().st_size
        if self._size and self._size + len(data) > self.max_bytes:
            self._rotate()
        assert self._file is not None
        self._file.write(data)
        self._file.flush()
        self._size += len(data)

    def _rotate(self) -> None:
        if self._file is not None:
            self._file.close()
        for i in range(self.keep - 1, 0, -1):
            older = self.dir / f"{AUDIT_FILE}.{i}"
            if older.exists():
                os.replace(older, self.dir / f"{AUDIT_FILE}.{i + 1}")
        if self.keep > 0:
            os.replace(self.path, self.dir / f"{AUDIT_FILE}.1")
        else:
            self.path.unlink(missing_ok=True)
        self._file = open_private(self.path, "ab")
        self._size = 0

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


# ---- reading (racksmith audit) ---------------------------------------------------------


def read_events(data_dir: Path) -> Iterator[Obj]:
    """Every audit event of ``data_dir``, oldest first; unreadable lines are skipped."""
    folder = data_dir / AUDIT_DIR
    rotated = sorted((p for p in folder.glob(f"{AUDIT_FILE}.*") if p.suffix[1:].isdigit()),
                     key=lambda p: -int(p.suffix[1:]))
    for path in [*rotated, folder / AUDIT_FILE]:
        if not path.exists():
            continue
        with path.open(encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    ev = json.loads(line)
                except ValueError:
                    continue
                if isinstance(ev, dict):
                    yield ev


def _resource_matches(ref: Obj, kind: str) -> bool:
    kind = kind.lower()
    resource = str(ref.get("resource") or "")
    group = str(ref.get("apiGroup") or "")
    names = {resource, f"{resource}.{group}" if group else resource}
    return kind in names or f"{kind}s" in names or f"{kind}es" in names


def matches(ev: Obj, *, user: str | None = None, obj: str | None = None,
            since: dt.datetime | None = None) -> bool:
    """Does ``ev`` match ``racksmith audit``'s filters? ``obj`` is KIND/NAME
    (kind as resource, plural or singular, optionally ``.group``) or KIND."""
    if user is not None and (ev.get("user") or {}).get("username") != user:
        return False
    if obj is not None:
        kind, _, name = obj.partition("/")
        ref = ev.get("objectRef") or {}
        if not _resource_matches(ref, kind) or (name and ref.get("name") != name):
            return False
    if since is not None:
        stamp = str(ev.get("stageTimestamp") or "")
        try:
            when = dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.UTC)
        except ValueError:
            return False
        if when < since:
            return False
    return True


def parse_duration(text: str) -> dt.timedelta:
    """``90s``, ``10m``, ``2h``, ``1d`` (or a combination, ``1h30m``); ValueError otherwise."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    total, number = 0, ""
    for ch in text.strip():
        if ch.isdigit():
            number += ch
        elif ch in units and number:
            total += int(number) * units[ch]
            number = ""
        else:
            raise ValueError(f"not a duration: {text!r} (use e.g. 90s, 10m, 2h, 1d)")
    if number or not total:
        raise ValueError(f"not a duration: {text!r} (use e.g. 90s, 10m, 2h, 1d)")
    return dt.timedelta(seconds=total)

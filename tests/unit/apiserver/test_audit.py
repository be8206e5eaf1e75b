"""The audit trail's writer and reader: rotation, filters, durations."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from racksmith.apiserver.audit import (
    AuditLog,
    AuditRecord,
    matches,
    parse_duration,
    read_events,
)
from racksmith.apiserver.rbac.rules import Attributes

NOW = dt.datetime(2026, 12, 3, 12, 0, tzinfo=dt.UTC)


def record(name: str, verb: str = "create", code: int = 201, user: str = "alice") -> AuditRecord:
    return AuditRecord(attrs=Attributes(verb=verb, resource="baremetalhosts",
                                        api_group="metal3.io", api_version="v1alpha1",
                                        namespace="default", name=name,
                                        path=f"/apis/metal3.io/v1alpha1/namespaces/"
                                             f"default/baremetalhosts/{name}"),
                       code=code, received=NOW, user=user, groups=("g",),
                       query_keys=("fieldManager",))


def test_only_writes_and_refusals_are_recorded() -> None:
    read = Attributes(verb="get", resource="pods")
    assert not AuditLog.wanted(read, 200)
    assert AuditLog.wanted(read, 403) and AuditLog.wanted(read, 401)
    assert AuditLog.wanted(Attributes(verb="patch", resource="pods"), 200)
    assert not AuditLog.wanted(Attributes(verb="post", resource_request=False, path="/x"), 200)


def test_heartbeats_and_questions_are_recorded_only_when_refused() -> None:
    """A Lease renewal, a Node's status heartbeat and an access or token
    review change nothing: left out unless refused (1,000 agents' heartbeats
    would push every person's action out of the trail in minutes)."""
    renewal = Attributes(verb="update", resource="leases", api_group="coordination.k8s.io",
                         namespace="kube-system", name="racksmith-controllers")
    node_status = Attributes(verb="patch", resource="nodes", subresource="status", name="n1")
    review = Attributes(verb="create", resource="selfsubjectaccessreviews",
                        api_group="authorization.k8s.io")
    token_review = Attributes(verb="create", resource="tokenreviews",
                              api_group="authentication.k8s.io")
    for attrs in (renewal, node_status, review, token_review):
        assert not AuditLog.wanted(attrs, 200) and not AuditLog.wanted(attrs, 201), attrs
        assert AuditLog.wanted(attrs, 403), attrs
    # still changes: a Lease made or deleted, a Node's spec or labels, a token issued
    assert AuditLog.wanted(Attributes(verb="create", resource="leases",
                                      api_group="coordination.k8s.io"), 201)
    assert AuditLog.wanted(Attributes(verb="delete", resource="leases",
                                      api_group="coordination.k8s.io"), 200)
    assert AuditLog.wanted(Attributes(verb="patch", resource="nodes", name="n1"), 200)
    assert AuditLog.wanted(Attributes(verb="create", resource="serviceaccounts",
                                      subresource="token", name="agent"), 201)


def test_rotation_keeps_the_newest_files_and_the_reader_reads_them_in_order(
        tmp_path: Path) -> None:
    log = AuditLog(tmp_path, max_bytes=2000, keep=2)
    for i in range(30):
        log.write(record(f"h{i}"))
    log.close()
    files = sorted(p.name for p in (tmp_path / "audit").iterdir())
    assert files == ["audit.log", "audit.log.1", "audit.log.2"]
    names = [ev["objectRef"]["name"] for ev in read_events(tmp_path)]
    assert names == sorted(names, key=lambda n: int(n[1:]))  # oldest first
    assert names[-1] == "h29" and "h0" not in names  # the oldest were dropped
    ev = next(read_events(tmp_path))
    assert ev["apiVersion"] == "audit.k8s.io/v1" and ev["level"] == "Metadata"
    assert ev["requestURI"].endswith("?fieldManager=...")  # no query values


def test_filters() -> None:
    ev = record("node-01", verb="delete", code=200).event(NOW)
    assert matches(ev, user="alice") and not matches(ev, user="bob")
    for obj in ("baremetalhost/node-01", "baremetalhosts/node-01",
                "baremetalhosts.metal3.io/node-01", "baremetalhost"):
        assert matches(ev, obj=obj), obj
    assert not matches(ev, obj="baremetalhost/node-02")
    assert not matches(ev, obj="secrets")
    assert matches(ev, since=NOW - dt.timedelta(minutes=1))
    assert not matches(ev, since=NOW + dt.timedelta(minutes=1))


@pytest.mark.parametrize(("text", "seconds"), [("90s", 90), ("10m", 600), ("2h", 7200),
                                               ("1d", 86400), ("1h30m", 5400)])
def test_durations(text: str, seconds: int) -> None:
    assert parse_duration(text).total_seconds() == seconds


@pytest.mark.parametrize("text", ["", "10", "m", "yesterday", "-5m", "1.5h"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration(text)

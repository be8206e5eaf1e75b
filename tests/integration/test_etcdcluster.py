"""The local etcd cluster (racksmith.etcdcluster): three real members on
loopback with TLS and client certificates; a member killed with SIGKILL
leaves a quorum and rejoins as itself; everything on disk is private; a
restart on the same base dir reuses ports and data, and adopts members that
are still running. Every process is stopped by pid, whatever happens."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import ssl
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from racksmith import etcdcluster
from racksmith.etcdcluster import EtcdClusterError, LocalEtcdCluster
from tests.harness.etcd import etcd_cluster, etcdctl

NAMES = ["member-0", "member-1", "member-2"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalEtcdCluster]:
    with etcd_cluster(tmp_path_factory.mktemp("etcd"), members=3) as started:
        yield started


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return Path(f"/proc/{pid}/cmdline").read_bytes() == b""  # a zombie not yet reaped


def test_three_members_serve_clients_over_tls_with_certificates(
        cluster: LocalEtcdCluster) -> None:
    assert sorted(cluster.pids()) == NAMES
    assert all(url.startswith("https://127.0.0.1:") for url in cluster.endpoints)
    assert len(set(cluster.endpoints)) == 3
    tls = cluster.tls
    assert tls is not None

    etcdctl(cluster, "put", "/greeting", "hello")
    got = etcdctl(cluster, "get", "/greeting", "--print-value-only")
    assert got.stdout.strip() == "hello"

    client = x509.load_pem_x509_certificate(tls.cert_file.read_bytes())
    eku = client.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    member = x509.load_pem_x509_certificate((cluster.dir / "pki" / "member-0.crt").read_bytes())
    san = member.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert san.get_values_for_type(x509.DNSName) == ["localhost"]
    eku = member.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert set(eku) == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}


def test_a_client_without_a_certificate_is_refused(cluster: LocalEtcdCluster) -> None:
    tls = cluster.tls
    assert tls is not None
    # It trusts the members' CA, but has no certificate of its own.
    context = ssl.create_default_context(cafile=str(tls.ca_file))
    conn = http.client.HTTPSConnection("127.0.0.1", _port(cluster.endpoints[0]),
                                       context=context, timeout=10)
    try:
        with pytest.raises((ssl.SSLError, ConnectionError)):
            conn.request("GET", "/health")
            conn.getresponse().read()
    finally:
        conn.close()
    refused = etcdctl(cluster, "get", "/greeting", client_cert=False, command_timeout=1,
                      check=False)
    assert refused.returncode != 0
    # With the certificate, the same request is answered.
    context.load_cert_chain(tls.cert_file, tls.key_file)
    conn = http.client.HTTPSConnection("127.0.0.1", _port(cluster.endpoints[0]),
                                       context=context, timeout=10)
    try:
        conn.request("GET", "/health")
        assert conn.getresponse().status == 200
    finally:
        conn.close()


def _put_eventually(cluster: LocalEtcdCluster, endpoints: list[str], key: str,
                    value: str, limit: float = 20.0) -> None:
    """``etcdctl put`` on ``endpoints``, retried while the members elect a
    new leader (a bound, not an expectation)."""
    deadline = time.monotonic() + limit
    while True:
        done = etcdctl(cluster, "put", key, value, endpoints=endpoints, command_timeout=3,
                       check=False)
        if done.returncode == 0:
            return
        if time.monotonic() >= deadline:
            raise AssertionError(f"put on {endpoints} kept failing: {done.stderr.strip()}")
        time.sleep(0.1)


def test_a_killed_member_leaves_a_quorum_and_rejoins_as_itself(
        cluster: LocalEtcdCluster) -> None:
    victim = cluster.leader()  # the hard case: the others must elect a new one
    assert victim is not None
    name = f"member-{victim}"
    pid = cluster.pids()[name]
    cluster.kill(victim)
    assert _gone(pid)
    assert name not in cluster.pids()
    assert not (cluster.dir / f"{name}.pid").exists()

    others = [url for i, url in enumerate(cluster.endpoints) if i != victim]
    _put_eventually(cluster, others, "/while-down", "written")
    assert cluster.leader() not in (None, victim)

    cluster.start_member(victim)
    cluster.wait_healthy(30)
    new_pid = cluster.pids()[name]
    assert new_pid != pid
    assert (cluster.dir / f"{name}.pid").read_text().strip() == str(new_pid)
    # The member came back on its data dir and ports, and caught up...
    got = etcdctl(cluster, "get", "/while-down", "--print-value-only",
                  endpoints=[cluster.endpoints[victim]])
    assert got.stdout.strip() == "written"
    # ...as itself: three members, no ghost.
    assert sorted(cluster.member_list()) == sorted(cluster.member_names()) == NAMES


def test_everything_on_disk_is_private(cluster: LocalEtcdCluster) -> None:
    loose = []
    for top, dirs, files in os.walk(cluster.dir):
        for name in dirs:
            mode = stat.S_IMODE(os.lstat(Path(top) / name).st_mode)
            if mode != 0o700:
                loose.append(f"{Path(top) / name} {mode:04o}")
        for name in files:
            mode = stat.S_IMODE(os.lstat(Path(top) / name).st_mode)
            if mode != 0o600:
                loose.append(f"{Path(top) / name} {mode:04o}")
    assert stat.S_IMODE(cluster.dir.stat().st_mode) == 0o700
    assert not loose, loose
    expected = {"cluster.json", "pki", *NAMES, *(f"{n}.log" for n in NAMES),
                *(f"{n}.pid" for n in NAMES)}
    assert {p.name for p in cluster.dir.iterdir()} == expected
    assert {p.name for p in (cluster.dir / "pki").iterdir()} == {
        "ca.crt", "ca.key", "client.crt", "client.key",
        *(f"{n}.{ext}" for n in NAMES for ext in ("crt", "key"))}


def test_a_restart_reuses_ports_and_data_and_adopts_running_members(tmp_path: Path) -> None:
    first = LocalEtcdCluster(tmp_path, 3)
    again: LocalEtcdCluster | None = None
    try:
        first.start(timeout=60)
        endpoints, pids = first.endpoints, first.pids()
        etcdctl(first, "put", "/kept", "across restarts")

        # A later process (``racksmith down``, a crashed ``up`` restarted)
        # finds the running members by their pid files and stops them.
        adopter = LocalEtcdCluster(tmp_path, 3)
        assert adopter.pids() == pids
        adopter.stop()
        assert all(_gone(pid) for pid in pids.values())
        assert first.pids() == {}
        assert not list(first.dir.glob("*.pid"))

        with pytest.raises(EtcdClusterError, match="3 members, not 1"):
            LocalEtcdCluster(tmp_path, 1)

        again = LocalEtcdCluster(tmp_path, 3)
        again.start(timeout=60)
        assert again.endpoints == endpoints
        assert set(again.pids().values()).isdisjoint(pids.values())
        got = etcdctl(again, "get", "/kept", "--print-value-only")
        assert got.stdout.strip() == "across restarts"
        assert sorted(again.member_list()) == NAMES
    finally:
        for started in (first, again):
            if started is not None:
                started.stop()


def test_kill_with_sigterm_stops_one_member_gracefully(tmp_path: Path) -> None:
    with etcd_cluster(tmp_path, members=1) as single:
        pid = single.pids()["member-0"]
        single.kill(0, signal.SIGTERM)
        assert _gone(pid)
        assert single.pids() == {}
        with pytest.raises(EtcdClusterError, match="member-0 is not running"):
            single.wait_healthy(5)
        single.start_member(0)
        single.wait_healthy(30)
        assert single.member_list() == ["member-0"]


def _listening(host: str = "127.0.0.1") -> socket.socket:
    sock = socket.socket()
    sock.bind((host, 0))
    sock.listen()
    return sock


def test_taken_ports_of_a_first_start_are_picked_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    taken = _listening()
    picks: list[list[tuple[int, int]]] = []
    real = etcdcluster._free_port_pairs

    def first_pick_taken(host: str, count: int) -> list[tuple[int, int]]:
        pairs = real(host, count)
        if not picks:
            pairs[0] = (taken.getsockname()[1], pairs[0][1])
        picks.append(pairs)
        return pairs

    monkeypatch.setattr(etcdcluster, "_free_port_pairs", first_pick_taken)
    try:
        with etcd_cluster(tmp_path, members=1) as single:
            assert len(picks) == 2
            assert single.endpoints == [f"https://127.0.0.1:{picks[1][0][0]}"]
            assert json.loads((single.dir / "cluster.json").read_text())["members"][0][
                "client_port"] == picks[1][0][0]
            assert single.member_list() == ["member-0"]
    finally:
        taken.close()


def test_taken_ports_that_were_asked_for_fail_the_start_and_leave_nothing_running(
        tmp_path: Path) -> None:
    taken = _listening()
    peer_port = etcdcluster._free_port_pairs("127.0.0.1", 1)[0][1]
    cluster = LocalEtcdCluster(tmp_path, 1, ports=[(taken.getsockname()[1], peer_port)])
    try:
        with pytest.raises(EtcdClusterError, match="could not bind"):
            cluster.start(timeout=30)
        assert cluster.pids() == {}
    finally:
        cluster.stop()
        taken.close()

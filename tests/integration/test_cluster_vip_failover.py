"""The API VIP moves when its holder's keepalived and API server die, with
the real programs, in network namespaces this test makes.

Three control-plane hosts and a client on one L2 segment (a bridge in a
namespace of its own; ``tests.harness.netns``). On each host: a
``racksmith apiserver`` standing in for kube-apiserver on the cluster's PKI
(port 6443 on the host's address), Debian's HAProxy (port 8443, every
host's API behind it, health-checked on ``/readyz``) and Debian's
keepalived holding the VIP (VRRP unicast, tracking the local ``/readyz``),
each configured by ``racksmith.controlplane``. The client reaches the API
through ``https://VIP:8443`` with the cluster's admin kubeconfig. Then the
holder's keepalived is killed with SIGKILL and its API server stopped: the
VIP shows up on another host and the client gets answers again. How long
that took is printed (and recorded in docs/benchmarks.md), never asserted.
Every process is killed by PID and every namespace removed at the end, also
when the test fails. Needs root (CAP_NET_ADMIN), keepalived and haproxy,
which `make test` installs: without them it fails saying so."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from racksmith.controlplane.endpoint import Endpoint
from racksmith.controlplane.haproxy import Backend, render_haproxy
from racksmith.controlplane.kubeconfig import admin_kubeconfig
from racksmith.controlplane.pki import ClusterPki, issue_serving
from racksmith.controlplane.vrrp import Peer, new_auth_pass, render_keepalived
from tests.harness.netns import Segment
from tests.harness.process import ServerProc, kubectl_path, start_server

NET = "10.251.0"
VIP = f"{NET}.5"
MASTERS = {f"m{i}": f"{NET}.10{i}" for i in (1, 2, 3)}
CLIENT = f"{NET}.200"
KEEPALIVED = shutil.which("keepalived") or "/usr/sbin/keepalived"
HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"


def _wait(what: str, check: object, limit: float = 60.0) -> float:
    start = time.monotonic()
    while time.monotonic() - start < limit:
        if check():  # type: ignore[operator]
            return time.monotonic() - start
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for: {what}")


def test_the_vip_moves_to_another_master(tmp_path: Path) -> None:
    for program in (KEEPALIVED, HAPROXY):
        assert Path(program).exists(), f"{program} is missing: `make test` installs it"
    pki = ClusterPki.generate()
    files = tmp_path / "pki"
    files.mkdir(mode=0o700)
    (files / "ca.crt").write_bytes(pki.ca.cert_pem)
    serving = issue_serving(pki.ca, "kube-apiserver", [VIP, *MASTERS.values()])
    (files / "apiserver.crt").write_bytes(serving.cert_pem)
    (files / "apiserver.key").write_bytes(serving.key_pem)
    peers = [Peer(name, address) for name, address in MASTERS.items()]
    auth = new_auth_pass()
    config = tmp_path / "admin.conf"
    config.write_text(admin_kubeconfig("demo", Endpoint(VIP, 8443), pki.ca))
    servers: dict[str, ServerProc] = {}
    with Segment() as segment:
        for name, address in MASTERS.items():
            segment.add_host(name, address)
        segment.add_host("client", CLIENT)
        for name, address in MASTERS.items():
            servers[name] = start_server(tmp_path / name, command="apiserver", extra=[
                "--host", address, "--port", "6443",
                "--tls-cert-file", str(files / "apiserver.crt"),
                "--tls-private-key-file", str(files / "apiserver.key"),
                "--client-ca-file", str(files / "ca.crt")], prefix=segment.prefix(name))
            segment.procs.append(servers[name].proc)
            haproxy_cfg = tmp_path / f"{name}-haproxy.cfg"
            haproxy_cfg.write_text(render_haproxy(
                bind_host="0.0.0.0", bind_port=8443, ca_file=str(files / "ca.crt"),
                check_interval="500ms", backends=[
                    Backend(peer, peer_address, 6443) for peer, peer_address in MASTERS.items()]))
            segment.run(name, [HAPROXY, "-db", "-f", str(haproxy_cfg)],
                        tmp_path / f"{name}-haproxy.log")
            conf = tmp_path / f"{name}-keepalived.conf"
            conf.write_text(render_keepalived(
                cluster="demo", me=Peer(name, address), peers=peers, vip=VIP,
                prefix_length=24, interface="eno1", router_id=51, auth_pass=auth,
                api_port=6443, ca_file=str(files / "ca.crt")))
            segment.run(name, [KEEPALIVED, "--dont-fork", "--log-console", "--vrrp",
                               "-f", str(conf), "-p", str(tmp_path / f"{name}-k.pid"),
                               "-r", str(tmp_path / f"{name}-kv.pid")],
                        tmp_path / f"{name}-keepalived.log")

        def holder() -> str | None:
            return next((n for n in MASTERS if VIP in segment.addresses(n)), None)

        def kubectl_ok() -> bool:
            res = subprocess.run([*segment.prefix("client"), str(kubectl_path(33)),
                                  "--kubeconfig", str(config), "--request-timeout=3s",
                                  "get", "namespaces", "-o", "name"],
                                 capture_output=True, text=True, timeout=30)
            return res.returncode == 0 and "namespace/kube-system" in res.stdout.split()

        _wait("a master holds the VIP", holder)
        _wait("the client reaches the API through the VIP", kubectl_ok)
        first = holder()
        assert first is not None
        # The holder's keepalived dies (SIGKILL) and its API server stops.
        for pidfile in (f"{first}-k.pid", f"{first}-kv.pid"):
            pid = int((tmp_path / pidfile).read_text().split()[0])
            signal_kill(pid)
        servers[first].kill(signal.SIGKILL)
        start = time.monotonic()
        _wait("the VIP on another master", lambda: any(
            VIP in segment.addresses(n) for n in MASTERS if n != first))
        moved = time.monotonic() - start
        _wait("the client reaches the API again", kubectl_ok)
        answered = time.monotonic() - start
        for _ in range(3):
            assert kubectl_ok()
        print(f"VIP moved in {moved:.2f}s; the client got answers {answered:.2f}s after "
              "the holder's keepalived and API server died")


def signal_kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass

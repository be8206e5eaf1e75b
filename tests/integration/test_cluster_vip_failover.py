"""The API VIP moves when its holder's keepalived and API server die, with
the real programs, in network namespaces this test makes.

Three control-plane hosts and a client on one L2 segment (a bridge in a
namespace of its own; ``tests.harness.netns``). On each host: a
``racksmith apiserver`` standing in for kube-apiserver on the cluster's PKI
(port 6444 on the host's address, where kubeadm's ``localAPIEndpoint`` puts
it), Debian's HAProxy (port 6443, every host's API behind it,
health-checked on ``/readyz``) and Debian's keepalived holding the VIP
(VRRP unicast, tracking the local ``/readyz``), configured by the files the
Machine controller's state items carry (``racksmith.planners.apivip``,
``tests.harness.apivip``). The client reaches the API through
``https://VIP:6443`` with the cluster's admin kubeconfig. Then the
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
from racksmith.controlplane.kubeconfig import admin_kubeconfig
from racksmith.controlplane.pki import ClusterPki, issue_serving
from racksmith.controlplane.vrrp import new_auth_pass
from racksmith.planners.apivip import API_SERVER_BIND_PORT
from tests.harness.apivip import rendered
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
    configs = rendered(tmp_path, masters=MASTERS, vip=VIP, cidr=f"{NET}.0/24", router_id=51,
                       auth_pass=new_auth_pass(), ca_file=files / "ca.crt")
    config = tmp_path / "admin.conf"
    config.write_text(admin_kubeconfig("demo", Endpoint(VIP, 6443), pki.ca))
    servers: dict[str, ServerProc] = {}
    with Segment() as segment:
        for name, address in MASTERS.items():
            segment.add_host(name, address)
        segment.add_host("client", CLIENT)
        for name, address in MASTERS.items():
            servers[name] = start_server(tmp_path / name, command="apiserver", extra=[
                "--host", address, "--port", str(API_SERVER_BIND_PORT),
                "--tls-cert-file", str(files / "apiserver.crt"),
                "--tls-private-key-file", str(files / "apiserver.key"),
                "--client-ca-file", str(files / "ca.crt")], prefix=segment.prefix(name))
            segment.procs.append(servers[name].proc)
            segment.run(name, [HAPROXY, "-db", "-f", str(configs[name].haproxy)],
                        tmp_path / f"{name}-haproxy.log")
            conf = configs[name].keepalived
            segment.run(name, [KEEPALIVED, "--dont-fork", "--log-console", "--vrrp",
                               "-f", str(conf), "-p", str(tmp_path / f"{name}-k.pid"),
                               "-r", str(tmp_path / f"{name}-kv.pid")],
                        tmp_path / f"{name}-keepalived.log")

        def holder() -> str | None:
            """The one master holding the VIP (None: none, or several while
            the instances settle after their start)."""
            holding = [n for n in MASTERS if VIP in segment.addresses(n)]
            return holding[0] if len(holding) == 1 else None

        def kubectl_ok() -> bool:
            res = subprocess.run([*segment.prefix("client"), str(kubectl_path(33)),
                                  "--kubeconfig", str(config), "--request-timeout=3s",
                                  "get", "namespaces", "-o", "name"],
                                 capture_output=True, text=True, timeout=30)
            return res.returncode == 0 and "namespace/kube-system" in res.stdout.split()

        settled: list[tuple[float, str | None]] = []

        def one_settled_holder() -> bool:
            # the same single holder over three VRRP advertisement intervals
            # (advert_int 1): the instances have settled after their start
            settled.append((time.monotonic(), holder()))
            now, current = settled[-1]
            since = [t for t, h in settled if h != current]
            return current is not None and now - (since[-1] if since else settled[0][0]) >= 3

        _wait("exactly one master holds the VIP, settled", one_settled_holder)
        _wait("the client reaches the API through the VIP", kubectl_ok)
        first = holder()
        assert first is not None
        # The holder's keepalived dies (SIGKILL) and its API server stops.
        # the VRRP process first: killed after its parent, it could still say
        # goodbye (priority 0) on the parent's death signal, which a crash never does
        for pidfile in (f"{first}-kv.pid", f"{first}-k.pid"):
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
        left = "kept" if VIP in segment.addresses(first) else "released"
        print(f"VIP moved in {moved:.2f}s; the client got answers {answered:.2f}s after "
              f"the holder's keepalived and API server died (the old holder {left} it)")


def signal_kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass

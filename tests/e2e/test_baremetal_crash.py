"""The whole ``racksmith up`` process is SIGKILLed while 3 Redfish hosts
provision: after a restart every host converges to provisioned, and each was
deployed exactly once (one Ironic node per host, one image write per host).
Three hosts are enough to catch a repeated deploy or a second Ironic node:
the kill lands while none is provisioned yet and an image write has begun."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

from tests.e2e.rack import reap, start_rack, state
from tests.e2e.test_baremetal import PROFILE, _disk_holds, _image

HOSTS = [f"host-{i:03d}" for i in range(3)]


def test_sigkill_while_provisioning_converges_with_one_deploy_per_host(
        tmp_path: Path) -> None:
    data_dir = tmp_path / "rack"
    rack = start_rack(data_dir, len(HOSTS))
    try:
        rack.kubectl("apply", "-f", str(data_dir / "emulated-hosts.yaml"))
        rack.kubectl("apply", "-f", "-", input_text=PROFILE)
        rack.wait_hosts(HOSTS, lambda h: state(h) == "available", timeout=420,
                        what="available")
        url, digest, data = _image(rack)
        for name in HOSTS:
            rack.kubectl("patch", "baremetalhost", name, "--type=merge", "-p", json.dumps(
                {"spec": {"image": {"url": url, "checksum": digest, "checksumType": "sha256"},
                          "profile": "worker", "online": True}}))
        rack.wait_hosts(HOSTS, lambda h: state(h) in ("provisioning", "provisioned"),
                        timeout=120, what="provisioning")
        # Let some deploys get under way, then kill the control plane outright.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            states = [state(h) for h in rack.hosts().values()]
            if states.count("provisioned") < len(HOSTS) // 2 and any(
                    s["images_written"] for s in rack.agent_status().values()):
                break
            time.sleep(0.5)
        rack.server.proc.send_signal(signal.SIGKILL)
        rack.server.proc.wait(30)

        rack = start_rack(data_dir, len(HOSTS))
        hosts = rack.wait_hosts(HOSTS, lambda h: state(h) == "provisioned"
                                and h["status"].get("poweredOn") is True, timeout=600,
                                what="provisioned after the restart")
        written = rack.agent_status()
        assert {n: written[n]["images_written"] for n in HOSTS} == dict.fromkeys(HOSTS, 1)
        code, nodes = rack.ironic("/v1/nodes?fields=name,provision_state")
        assert code == 200
        names = sorted(n["name"] for n in nodes["nodes"])
        assert names == sorted(f"default~{h}" for h in HOSTS)
        assert all(n["provision_state"] == "active" for n in nodes["nodes"])
        for name in HOSTS:
            assert _disk_holds(rack, name, data), name
            assert hosts[name]["status"]["errorCount"] == 0, hosts[name]["status"]
    finally:
        rack.stop()
        reap(data_dir)

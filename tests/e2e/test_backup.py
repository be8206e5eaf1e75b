"""Backup and restore of a running site, end to end (docs/backup.md).

A rack of its own (``racksmith up`` with three fake-BMC hosts, the
examples' release and networks, one master and one worker): a backup is
taken while the controllers run and objects are written; a marker object and
a third machine (its host deployed) are made after it; the site is stopped
and restored; started again, the marker and the third machine are gone,
every object of the backup is back, the cluster is Ready again, no host was
deployed a second time (the virtual datacenter's "image written" lines, the
hardware's own count, do not grow) and the host deployed after the backup is
detached with a condition saying so — not deployed over. Meanwhile the
refusals: a restore onto the running site, a flipped byte, a wrong key —
each with nothing changed.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.demo import guide_blocks, run_block, wait_for
from tests.e2e.rack import Rack, reap, start_rack

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "cluster"
MANIFESTS = [EXAMPLES / "00-release.yaml", EXAMPLES / "10-subnets.yaml",
             EXAMPLES / "20-l2template.yaml", EXAMPLES / "30-cluster.yaml",
             Path(__file__).resolve().parent / "manifests" / "backup-machines.yaml"]
MACHINES = ["demo-master-1", "demo-worker-1"]
HOSTS = 3
LATE = """apiVersion: cluster.racksmith.io/v1alpha1
kind: Machine
metadata: {name: demo-worker-2, namespace: default}
spec:
  clusterName: demo
  roles: [node]
  hostSelector: {matchLabels: {metal.racksmith.io/emulated: "true"}}
"""
"""A machine made after the backup: its host is deployed after it."""

pytestmark = [pytest.mark.timeout(1200)]


def racksmith(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "racksmith.cli.main", *args],
                          capture_output=True, text=True, timeout=300)


def start(data_dir: Path) -> Rack:
    extra = ["--apply-emulated-hosts"]
    for path in MANIFESTS:
        extra += ["--apply", str(path)]
    return start_rack(data_dir, HOSTS, extra, hardware="fake")


def ready(rack: Rack) -> dict[str, Any] | None:
    items = {m["metadata"]["name"]: m for m in rack.get("machines")["items"]}
    if all((items.get(n, {}).get("status") or {}).get("phase") == "Ready" for n in MACHINES):
        return items
    return None


def deploys(data_dir: Path) -> int:
    """Images the virtual datacenter wrote onto host disks (the hardware's count)."""
    log = data_dir / "emulator" / "emulator.log"
    return log.read_text(errors="replace").count("image written") if log.exists() else 0


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_site_restored_from_a_backup_converges_without_deploying_again(
        tmp_path: Path) -> None:
    data = tmp_path / "site"
    key = tmp_path / "backup.key"
    key.write_bytes(b"0123456789abcdef0123456789abcdef!")
    rack = start(data)
    try:
        wait_for(rack, "both machines Ready", lambda: ready(rack), timeout=600)
        deployed = deploys(data)
        assert deployed == len(MACHINES), deployed
        # A backup while the controllers run and objects are written.
        stop = threading.Event()

        def write() -> None:
            i = 0
            while not stop.is_set():
                rack.kubectl("create", "configmap", f"churn-{i}", check=False)
                i += 1

        writer = threading.Thread(target=write)
        writer.start()
        try:
            backup = tmp_path / "site.tar.enc"
            made = racksmith("backup", "create", "--data-dir", str(data), "--output",
                             str(backup), "--key-file", str(key))
        finally:
            stop.set()
            writer.join()
        assert made.returncode == 0, made.stderr
        assert racksmith("backup", "verify", str(backup), "--key-file",
                         str(key)).returncode == 0
        in_backup = {c["metadata"]["name"] for c in rack.get("configmaps")["items"]}
        # Refused, nothing changed: a restore onto the running site, a flipped
        # byte, a wrong key.
        store_before = sorted(p.name for p in data.iterdir())
        res = racksmith("restore", str(backup), "--data-dir", str(data), "--key-file", str(key))
        assert res.returncode == 1 and "a Racksmith server runs on" in res.stderr, res.stderr
        assert sorted(p.name for p in data.iterdir()) == store_before
        flipped = tmp_path / "flipped.tar.enc"
        raw = bytearray(backup.read_bytes())
        raw[len(raw) // 2] ^= 1
        flipped.write_bytes(bytes(raw))
        res = racksmith("backup", "verify", str(flipped), "--key-file", str(key))
        assert res.returncode == 1 and "cannot decrypt" in res.stderr
        wrong = tmp_path / "wrong.key"
        wrong.write_bytes(b"w" * 32)
        res = racksmith("backup", "verify", str(backup), "--key-file", str(wrong))
        assert res.returncode == 1 and "cannot decrypt" in res.stderr
        # A marker and a machine made after the backup.
        rack.kubectl("create", "configmap", "made-after-the-backup")
        rack.kubectl("apply", "-f", "-", input_text=LATE)

        def late_ready() -> str | None:
            m = rack.get("machine", "demo-worker-2")
            if (m.get("status") or {}).get("phase") != "Ready":
                return None
            return str(m["status"]["hostRef"]["name"])

        late_host = wait_for(rack, "the late machine Ready", late_ready, timeout=600)
        deployed = deploys(data)
        assert deployed == len(MACHINES) + 1
    finally:
        rack.stop()
    # Restore into the stopped site's data dir, start it again.
    res = racksmith("restore", str(backup), "--data-dir", str(data), "--key-file", str(key))
    assert res.returncode == 0, res.stderr
    assert list(tmp_path.glob("site.pre-restore-*")), "the previous data is kept"
    rack = start(data)
    try:
        names = {c["metadata"]["name"] for c in rack.get("configmaps")["items"]}
        assert "made-after-the-backup" not in names
        assert "demo-worker-2" not in {m["metadata"]["name"]
                                       for m in rack.get("machines")["items"]}
        churn_in_backup = {n for n in in_backup if n.startswith("churn-")}
        restored_churn = {n for n in names if n.startswith("churn-")}
        # everything the backup held is back (the writer went on during the
        # backup, so the live listing before it may hold a few more)
        assert restored_churn and restored_churn <= churn_in_backup
        wait_for(rack, "both machines Ready after the restore", lambda: ready(rack),
                 timeout=600)
        hosts = rack.hosts()
        assert sum(1 for h in hosts.values()
                   if (h.get("status") or {}).get("provisioning", {}).get("state")
                   == "provisioned") == len(MACHINES)
        # the host deployed after the backup: detached, with the reason, not deployed over

        def reported() -> dict[str, Any] | None:
            host = rack.get("baremetalhost", late_host)
            conds = {c["type"]: c for c in (host.get("status") or {}).get("conditions") or []}
            cond = conds.get("RecordMatchesHardware")
            return host if cond and cond["status"] == "False" else None

        host = wait_for(rack, "the late host reported", reported, timeout=120)
        assert host["status"].get("operationalStatus") == "detached"
        assert (data / "restore-report.applied.json").exists()
        assert deploys(data) == deployed, "a host was deployed a second time"
        # the guide's example: a backup asked for with kubectl, taken by racksmith up
        for block in guide_blocks("backup.md"):
            run_block(rack, block)
        taken = rack.get("controlplanebackup", "before-rack-move")
        assert taken["status"]["phase"] == "Completed"
        assert Path(taken["status"]["file"]).parent == data / "backups"
    finally:
        rack.stop()
        reap(data)

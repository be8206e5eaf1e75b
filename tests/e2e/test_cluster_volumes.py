"""Local persistent volumes end to end, on the demo cluster's emulated nodes
(the session's ``demo_rack``: real Ironic, the emulated OS boot, the host
agents), driven with kubectl and ``racksmith volume`` as docs/volumes.md does.

Sparse ext4 (with mkfs options) and xfs volumes and a raw block volume
become Available with a real filesystem in the backing file and a correct
PV; a missing device fails clearly; a device holding a filesystem is refused
unless forced; a Volume whose PV is Bound stays Terminating until the claim
goes; a Volume deleted mid-creation completes; an agent killed with SIGKILL
mid-prepare converges after restart with no orphan file and one PV; bad
input is refused by the API or shown in the condition.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.demo import ROOT, guide_blocks, host_root, run_block, wait_for
from tests.e2e.rack import Rack

WORKER = "demo-worker-1"
MASTER = "demo-master-1"


@pytest.fixture
def rack(demo_rack: Rack, demo_ready: dict[str, dict[str, Any]]) -> Rack:
    """The demo cluster's own API: its Volumes, PVs, StorageClasses and claims."""
    return demo_rack.cluster()


def node_root(rack: Rack, node: str) -> Path:
    machine = rack.management().get("machine", node)
    return host_root(rack, machine["status"]["hostRef"]["name"])


def volume(rack: Rack, name: str) -> dict[str, Any]:
    result: dict[str, Any] = rack.get("volume", name)
    return result


def phase_of(rack: Rack, name: str) -> str | None:
    res = rack.kubectl("get", "volume", name, "-o", "json", check=False)
    if res.returncode != 0:
        return None
    return (json.loads(res.stdout).get("status") or {}).get("phase")


def wait_phase(rack: Rack, name: str, phase: str, timeout: float = 180) -> dict[str, Any]:
    wait_for(rack, f"volume {name} {phase}", lambda: phase_of(rack, name) == phase, timeout)
    return volume(rack, name)


def wait_gone(rack: Rack, kind: str, name: str, timeout: float = 180) -> None:
    wait_for(rack, f"{kind} {name} gone",
             lambda: rack.kubectl("get", kind, name, check=False).returncode != 0, timeout)


def apply(rack: Rack, text: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return rack.kubectl("apply", "-f", "-", input_text=text, check=check)


def volume_yaml(name: str, node: str, sc: str, backend: str, *, mode: str = "Filesystem",
                annotations: str = "") -> str:
    return f"""\
apiVersion: storage.racksmith.io/v1alpha1
kind: Volume
metadata:
  name: {name}
{annotations}spec:
  nodeName: {node}
  storageClassName: {sc}
  mode: {mode}
{backend}"""


def sparse_file(rack: Rack, node: str, vol: dict[str, Any]) -> Path:
    return node_root(rack, node) / "var/lib/racksmith/volumes" / f"{vol['metadata']['uid']}.img"


def blkid_type(path: Path) -> str:
    res = subprocess.run(["blkid", "-p", "-o", "value", "-s", "TYPE", str(path)],
                         capture_output=True, text=True, timeout=30)
    return res.stdout.strip()


def spare_disks(rack: Rack, node: str) -> list[str]:
    dev = node_root(rack, node) / "dev"
    return sorted(p.name for p in dev.iterdir()) if dev.is_dir() else []


def node_with_spare_disks(rack: Rack, count: int) -> str:
    for machine in rack.management().get("machines")["items"]:
        name = machine["metadata"]["name"]
        if (machine.get("status") or {}).get("phase") == "Ready" and \
                len(spare_disks(rack, name)) >= count:
            return str(name)
    pytest.skip(f"no node of the demo cluster has {count} spare disks")


def test_the_guide_creates_sparse_volumes_with_real_filesystems(rack: Rack) -> None:
    create = [b for b in guide_blocks("volumes.md") if "racksmith volume delete" not in b]
    for block in create:
        run_block(rack, block, timeout=300)
    vol = wait_phase(rack, "worker-1-data", "Available")
    path = sparse_file(rack, WORKER, vol)
    assert blkid_type(path) == "ext4"
    header = subprocess.run(["dumpe2fs", "-h", str(path)], capture_output=True, text=True,
                            timeout=30).stdout
    assert "Reserved block count:     0" in header, header[:2000]
    pv = rack.get("pv", "worker-1-data")
    assert pv["spec"]["capacity"]["storage"] in ("1Gi", str(1 << 30))
    assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert pv["spec"]["storageClassName"] == "local-ext4"
    assert pv["spec"]["local"]["fsType"] == "ext4"
    assert pv["spec"]["mountOptions"] == ["rw", "noatime"]
    assert "storage.racksmith.io/volume-protection" in pv["metadata"]["finalizers"]
    owner = pv["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"]) == (
        "Volume", "worker-1-data", vol["metadata"]["uid"])
    term = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]
    assert term["key"] == "kubernetes.io/hostname" and term["values"] == [WORKER]
    assert pv["metadata"]["labels"]["app.kubernetes.io/part-of"] == "demo"

    apply(rack, volume_yaml("master-1-xfs", MASTER, "local-xfs",
                            "  sparseLoopDevice:\n    size: 512Mi\n"))
    xfs = wait_phase(rack, "master-1-xfs", "Available")
    assert blkid_type(sparse_file(rack, MASTER, xfs)) == "xfs"
    assert volume(rack, "master-1-xfs")["status"]["size"]


def test_raw_block_volumes(rack: Rack) -> None:
    node = node_with_spare_disks(rack, 2)
    clean, busy = spare_disks(rack, node)[:2]
    apply(rack, volume_yaml("raw-clean", node, "local-ext4",
                            f"  rawBlockDevice:\n    devicePath: /dev/{clean}\n", mode="Block"))
    raw = wait_phase(rack, "raw-clean", "Available")
    assert raw["status"]["deviceName"] == clean
    assert rack.get("pv", "raw-clean")["spec"]["volumeMode"] == "Block"

    # A device that does not exist.
    apply(rack, volume_yaml("raw-missing", node, "local-ext4",
                            "  rawBlockDevice:\n    devicePath: /dev/no-such-disk\n",
                            mode="Block"))
    failed = wait_phase(rack, "raw-missing", "Failed")
    ready = next(c for c in failed["status"]["conditions"] if c["type"] == "Ready")
    assert ready["reason"] == "CreationError" and "DeviceNotFound" in ready["message"]

    # A device holding a filesystem: refused, then accepted when forced.
    image = (node_root(rack, node) / "dev" / busy).resolve()
    subprocess.run(["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=1,lazy_journal_init=1",
                    str(image), "64M"], check=True, capture_output=True, timeout=120)
    apply(rack, volume_yaml("raw-busy", node, "local-ext4",
                            f"  rawBlockDevice:\n    devicePath: /dev/{busy}\n", mode="Block"))
    refused = wait_phase(rack, "raw-busy", "Failed")
    ready = next(c for c in refused["status"]["conditions"] if c["type"] == "Ready")
    assert "DeviceInUse" in ready["message"], ready
    assert blkid_type(image) == "ext4"  # nothing was destroyed
    rack.kubectl("delete", "volume", "raw-busy")
    assert blkid_type(image) == "ext4"  # deleting a refused volume wipes nothing
    apply(rack, volume_yaml("raw-forced", node, "local-ext4",
                            f"  rawBlockDevice:\n    devicePath: /dev/{busy}\n", mode="Block",
                            annotations="  annotations:\n"
                                        "    storage.racksmith.io/force: \"true\"\n"))
    wait_phase(rack, "raw-forced", "Available")
    # Deleting a prepared raw volume wipes its device's signatures.
    rack.kubectl("delete", "volume", "raw-forced", "raw-clean", "raw-missing", timeout=300)
    assert blkid_type(image) == ""


def test_bound_volume_is_not_deletable_until_its_claim_goes(rack: Rack) -> None:
    vol = volume(rack, "worker-1-data")
    path = sparse_file(rack, WORKER, vol)
    rack.kubectl("create", "namespace", "apps", check=False)
    apply(rack, """\
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: data
  namespace: apps
spec:
  storageClassName: local-ext4
  volumeName: worker-1-data
  accessModes: [ReadWriteOnce]
  resources:
    requests:
      storage: 1Gi
""")
    wait_for(rack, "the PV Bound",
             lambda: rack.get("pv", "worker-1-data")["status"].get("phase") == "Bound", 60)
    # The CLI refuses, saying why.
    (delete_block,) = [b for b in guide_blocks("volumes.md") if "racksmith volume delete" in b]
    env = {"KUBECONFIG": str(rack.server.kubeconfig), "HOME": str(rack.home),
           "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    res = subprocess.run(["bash", "-c", delete_block], capture_output=True, text=True,
                         env=env, timeout=60, cwd=rack.home)
    assert res.returncode == 1, res
    assert "bound to claim apps/data" in res.stdout + res.stderr
    # kubectl delete leaves it Terminating; nothing is destroyed.
    rack.kubectl("delete", "volume", "worker-1-data", "--wait=false")
    # The controller settles on waiting for the claim (it waits for no timer).
    wait_for(rack, "the volume waiting for its claim", lambda: any(
        "is bound to claim apps/data" in (c.get("message") or "")
        for c in (rack.get("volume", "worker-1-data").get("status") or {}).get("conditions", [])),
        60)
    assert phase_of(rack, "worker-1-data") == "Terminating"
    assert path.exists()
    assert rack.get("pv", "worker-1-data")["status"]["phase"] == "Bound"
    # The claim goes: the volume completes and the file is gone.
    rack.kubectl("delete", "pvc", "data", "-n", "apps")
    wait_gone(rack, "volume", "worker-1-data")
    wait_gone(rack, "pv", "worker-1-data")
    assert not path.exists()


def test_deleted_mid_creation_completes(rack: Rack) -> None:
    apply(rack, volume_yaml("hasty", WORKER, "local-xfs", "  sparseLoopDevice:\n    size: 1Gi\n"))
    uid = volume(rack, "hasty")["metadata"]["uid"]
    rack.kubectl("delete", "volume", "hasty", "--wait=false")
    wait_gone(rack, "volume", "hasty")
    assert rack.kubectl("get", "pv", "hasty", check=False).returncode != 0
    folder = node_root(rack, WORKER) / "var/lib/racksmith/volumes"
    assert not [p for p in folder.iterdir() if p.name.startswith(uid)]


def test_agent_killed_mid_prepare_converges(rack: Rack) -> None:
    """The agent dies with a prepare job in flight and half a file written.
    Deterministic: the agent is frozen (SIGSTOP) before the Volume exists, so
    the job is handed out but cannot finish; what a crash mid-write leaves —
    the ``.tmp`` of the sparse file — is put in place; then SIGKILL."""
    root = node_root(rack, MASTER)
    pid = int((root / "run/racksmith-agent.pid").read_text().split()[0])
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
    # the same environment (the datacenter's addresses, how its kubelet reaches
    # the cluster), as systemd would start it again
    environ = dict(entry.split(b"=", 1) for entry in Path(f"/proc/{pid}/environ").read_bytes()
                   .split(b"\0") if b"=" in entry)
    os.kill(pid, signal.SIGSTOP)
    try:
        apply(rack, volume_yaml("crashy", MASTER, "local-ext4",
                                "  sparseLoopDevice:\n    size: 2Gi\n"))
        wait_for(rack, "the prepare job handed out",
                 lambda: (volume(rack, "crashy").get("status") or {}).get("job"), 60)
        half = sparse_file(rack, MASTER, volume(rack, "crashy"))
        half = half.with_name(half.name + ".tmp")
        half.parent.mkdir(parents=True, exist_ok=True)
        half.write_bytes(b"\0" * 4096)  # an interrupted create
    finally:
        os.kill(pid, signal.SIGKILL)
    # systemd restarts the agent on a real host; here the test does.
    log = (root / "var/log/racksmith-agent.log").open("ab")
    proc = subprocess.Popen([a.decode() for a in argv], stdout=log, stderr=log, cwd=ROOT,
                            start_new_session=True,
                            env={k.decode(): v.decode() for k, v in environ.items()})
    (root / "run/racksmith-agent.pid").write_text(f"{proc.pid}\n")
    vol = wait_phase(rack, "crashy", "Available")
    folder = root / "var/lib/racksmith/volumes"
    assert sorted(p.name for p in folder.glob("*.tmp")) == []
    assert blkid_type(sparse_file(rack, MASTER, vol)) == "ext4"
    pvs = [p for p in rack.get("pv")["items"]
           if p["metadata"].get("labels", {}).get("storage.racksmith.io/volume") == "crashy"]
    assert len(pvs) == 1


def test_bad_input(rack: Rack) -> None:
    both = volume_yaml("both", WORKER, "local-ext4",
                       "  sparseLoopDevice:\n    size: 1Gi\n"
                       "  rawBlockDevice:\n    devicePath: /dev/sdb\n")
    res = apply(rack, both, check=False)
    assert res.returncode != 0 and "spec" in res.stderr, res.stderr
    res = apply(rack, volume_yaml("badsize", WORKER, "local-ext4",
                                  "  sparseLoopDevice:\n    size: lots\n"), check=False)
    assert res.returncode != 0 and "size" in res.stderr, res.stderr
    for name, node, sc, expect in (("nonode", "no-such-node", "local-ext4", "no-such-node"),
                                   ("nosc", WORKER, "no-such-class", "no-such-class")):
        apply(rack, volume_yaml(name, node, sc, "  sparseLoopDevice:\n    size: 1Gi\n"))
        failed = wait_phase(rack, name, "Failed", timeout=60)
        ready = next(c for c in failed["status"]["conditions"] if c["type"] == "Ready")
        assert expect in ready["message"], ready
        rack.kubectl("delete", "volume", name, timeout=120)

"""Bare-metal hosts end to end: ``racksmith up --emulate-hosts 6`` with real
Ironic, the sushy-tools Redfish BMCs and the emulated ramdisk agent, driven
with kubectl exactly as a user would.

6 hosts go registering → inspecting → available with the declared hardware;
3 are provisioned with an image and a profile (image bytes on the emulated
disk, powered on, one image write each); 1 is deprovisioned; 1 is deleted
(gone from Ironic and the API) and 1 stays provisioned; a wrong BMC password
shows a registration error and recovers when the Secret is fixed. Bad input
gets clear errors and leaves no Ironic node; a profile that cannot fit and
an image that 404s use one host each. Last, on the hosts those tests left
available, the whole ``racksmith up`` is SIGKILLed while they provision:
after a restart each converges to provisioned, deployed exactly once.

The module is one scenario on one rack, in file order (the first test
applies the hosts). Every property needs one host; the rack is as small as
that allows (each Redfish host costs Ironic seconds of CPU: see
docs/testing.md).
"""

from __future__ import annotations

import base64
import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from racksmith.emulator.inventory import generate_hosts
from tests.e2e.rack import Rack, start_rack, state
from tests.harness.files import loose_modes

HOSTS = [f"host-{i:03d}" for i in range(6)]
WRONG_PASSWORD_HOST = "host-005"
METAL3 = Path(__file__).resolve().parent / "manifests" / "metal3"
"""Metal3's own manifests: its generator's output and BMO's examples (README there)."""
GENERATED_ADDRESS = "redfish+http://192.0.2.1:8000/redfish/v1/Systems/worker-0"

PROFILE = """\
apiVersion: metal.racksmith.io/v1alpha1
kind: BareMetalHostProfile
metadata:
  name: worker
  namespace: default
spec:
  devices:
  - device:
      minSize: 10Gi
    partitions:
    - name: root
  fileSystems:
  - fileSystem: ext4
    source: root
    mountPoint: /
  kernelParameters:
    cmdline: ["console=ttyS0"]
"""

HUNGRY_PROFILE = """\
apiVersion: metal.racksmith.io/v1alpha1
kind: BareMetalHostProfile
metadata:
  name: needs-eight-nvme
  namespace: default
spec:
  devices:
""" + "".join(f"""\
  - device:
      type: nvme
      minSize: 100Gi
    partitions:
    - name: p{i}
""" for i in range(8))


@pytest.fixture(scope="module")
def rack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rack]:
    r = start_rack(tmp_path_factory.mktemp("rack"), len(HOSTS))
    try:
        yield r
    finally:
        r.stop()


def _emulated(rack: Rack) -> dict[str, tuple[str, str, str, str]]:
    """Each emulated server's (BMC address, username, password, boot MAC), the
    credentials base64 as in a Secret, from the emulator's own manifest."""
    docs = [d for d in yaml.safe_load_all((rack.data_dir / "emulated-hosts.yaml").read_text())
            if d]
    secrets = {d["metadata"]["name"]: d["data"] for d in docs if d["kind"] == "Secret"}
    return {d["metadata"]["name"]: (
        d["spec"]["bmc"]["address"], secrets[d["spec"]["bmc"]["credentialsName"]]["username"],
        secrets[d["spec"]["bmc"]["credentialsName"]]["password"], d["spec"]["bootMACAddress"])
        for d in docs if d["kind"] == "BareMetalHost"}


def _pointed_at(text: str, server: tuple[str, str, str, str], *, address: str,
                username: str, password: str, mac: str | None = None) -> str:
    """A Metal3 manifest ``text`` with only its BMC address, credentials and boot
    MAC replaced by the emulated ``server``'s."""
    new_address, new_user, new_password, new_mac = server
    text = text.replace(address, new_address).replace(f"username: {username}",
                                                       f"username: {new_user}")
    text = text.replace(f"password: {password}", f"password: {new_password}")
    return text.replace(mac, new_mac) if mac else text


def _generated(rack: Rack) -> str:
    """Metal3's generator's output (make-bm-worker) for every emulated server,
    each named as its server; one with a wrong password."""
    golden = (METAL3 / "make-bm-worker.yaml").read_text()
    out = []
    for name, server in sorted(_emulated(rack).items()):
        if name == WRONG_PASSWORD_HOST:
            server = (*server[:2], base64.b64encode(b"not-the-password").decode(), server[3])
        out.append(_pointed_at(golden, server, address=GENERATED_ADDRESS,
                               username="YWRtaW4=", password="cGFzc3dvcmQ=",
                               mac="52:54:00:12:34:56").replace("worker-0", name))
    return "".join(out)


def _secret_name(rack: Rack, host: str) -> str:
    return str(rack.hosts()[host]["spec"]["bmc"]["credentialsName"])


def test_hosts_enrol_inspect_and_become_available(rack: Rack) -> None:
    """The hosts are what Metal3's generator writes, applied unchanged but for
    the BMC address, credentials and boot MAC."""
    out = rack.kubectl("apply", "-f", "-", input_text=_generated(rack))
    assert out.stdout.count("baremetalhost.metal3.io/") == len(HOSTS)
    good = [h for h in HOSTS if h != WRONG_PASSWORD_HOST]
    hosts = rack.wait_hosts(good, lambda h: state(h) == "available", timeout=420,
                            what="available")
    declared = {h.name: h for h in generate_hosts(len(HOSTS))}
    for name in good:
        hw = hosts[name]["status"]["hardware"]
        inv = declared[name].inventory
        assert hw["cpu"]["count"] == inv.cpu.count, name
        assert hw["ramMebibytes"] == inv.memory_mib, name
        assert sorted(d["sizeBytes"] for d in hw["storage"]) == sorted(
            d.size_bytes for d in inv.disks), name
        assert {n["mac"].lower() for n in hw["nics"]} == {
            n.mac.lower() for n in inv.nics}, name
        full = rack.get("baremetalhostinventory", name)
        assert full["metadata"]["ownerReferences"][0]["name"] == name
    table = rack.kubectl("get", "baremetalhosts").stdout.splitlines()
    assert table[0].split()[:5] == ["NAME", "STATE", "CONSUMER", "ONLINE", "ERROR"]


def test_the_data_dir_is_private_with_redfish_bmcs(rack: Rack) -> None:
    """sushy-tools, Ironic with Redfish and virtual media: nothing open to others."""
    assert loose_modes(rack.data_dir, ignore={"home"}) == []


def test_wrong_password_is_a_registration_error_until_the_secret_is_fixed(rack: Rack) -> None:
    hosts = rack.wait_hosts([WRONG_PASSWORD_HOST],
                            lambda h: h.get("status", {}).get("errorType")
                            == "registration error", timeout=180, what="in registration error")
    message = hosts[WRONG_PASSWORD_HOST]["status"]["errorMessage"]
    assert message and "not-the-password" not in message
    secret = _secret_name(rack, WRONG_PASSWORD_HOST)
    right = next(h for h in generate_hosts(len(HOSTS)) if h.name == WRONG_PASSWORD_HOST)
    rack.kubectl("patch", "secret", secret, "--type=merge", "-p", json.dumps(
        {"data": {"password": base64.b64encode(right.bmc_password.encode()).decode()}}))
    rack.wait_hosts([WRONG_PASSWORD_HOST], lambda h: state(h) == "available", timeout=300,
                    what="recovered")
    assert not rack.hosts()[WRONG_PASSWORD_HOST]["status"].get("errorType")


def _image(rack: Rack) -> tuple[str, str, bytes]:
    root = rack.data_dir / "emulator" / "http" / "images"
    data = (root / "sample-os.img").read_bytes()
    digest = (root / "sample-os.img.sha256sum").read_text().split()[0]
    return f"http://127.0.0.1:{rack.ports['http']}/images/sample-os.img", digest, data


def _provision(rack: Rack, name: str, url: str, digest: str, profile: str = "worker") -> None:
    rack.kubectl("patch", "baremetalhost", name, "--type=merge", "-p", json.dumps({
        "metadata": {"annotations": {"baremetalhost.metal.racksmith.io/profile": profile}},
        "spec": {"image": {"url": url, "checksum": digest, "checksumType": "sha256"},
                 "online": True}}))


def _disk_holds(rack: Rack, host: str, data: bytes) -> bool:
    disks = rack.data_dir / "emulator" / "hosts" / host / "disks"
    for path in disks.glob("*.img"):
        if path.name.endswith("-configdrive.img"):
            continue
        with path.open("rb") as f:
            if f.read(len(data)) == data:
                return True
    return False


def test_provision_deprovision_delete(rack: Rack) -> None:
    rack.kubectl("apply", "-f", "-", input_text=PROFILE)
    url, digest, data = _image(rack)
    chosen = HOSTS[:3]
    for name in chosen:
        _provision(rack, name, url, digest)
    hosts = rack.wait_hosts(chosen, lambda h: state(h) == "provisioned"
                            and h["status"].get("poweredOn") is True, timeout=480,
                            what="provisioned and on")
    for name in chosen:
        assert _disk_holds(rack, name, data), name
        assert hosts[name]["status"]["provisioning"]["image"]["url"] == url
    written = rack.agent_status()
    assert all(written[n]["images_written"] == 1 for n in chosen), written

    for name in chosen[:1]:
        rack.kubectl("patch", "baremetalhost", name, "--type=json", "-p",
                     '[{"op":"remove","path":"/spec/image"}]')
    rack.wait_hosts(chosen[:1], lambda h: state(h) == "available", timeout=420,
                    what="deprovisioned")
    assert state(rack.hosts()[chosen[1]]) == "provisioned"

    doomed = chosen[2]
    code, node = rack.ironic(f"/v1/nodes/default~{doomed}")
    assert code == 200 and node["provision_state"] == "active"
    rack.kubectl("delete", "baremetalhost", doomed, "--timeout=420s", timeout=450)
    assert rack.kubectl("get", "baremetalhost", doomed, check=False).returncode != 0
    assert rack.ironic(f"/v1/nodes/default~{doomed}")[0] == 404


def _bmh(name: str, address: str, secret: str, **spec: Any) -> str:
    body = {"apiVersion": "metal3.io/v1alpha1", "kind": "BareMetalHost",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"bmc": {"address": address, "credentialsName": secret},
                     "bootMACAddress": "02:ff:00:00:00:01", "online": False, **spec}}
    return json.dumps(body)


def test_bad_input_gets_clear_errors_and_leaves_no_ironic_node(rack: Rack) -> None:
    some_secret = _secret_name(rack, HOSTS[0])
    cases = {
        "bad-address": ("redfish-virtualmedia+http://[not-a-host/redfish/v1/Systems/x",
                        some_secret),
        "no-secret": ("redfish+http://127.0.0.1:9/redfish/v1/Systems/1", "does-not-exist"),
    }
    # A scheme Metal3 does not parse never gets in: 422 naming the field and
    # the supported schemes.
    refused = rack.kubectl("apply", "-f", "-", check=False, input_text=_bmh(
        "bad-scheme", "carrier-pigeon://127.0.0.1/Systems/1", some_secret))
    assert refused.returncode != 0
    assert 'spec.bmc.address: Invalid value: "carrier-pigeon://' in refused.stderr
    assert "redfish-virtualmedia" in refused.stderr
    assert rack.kubectl("get", "bmh", "bad-scheme", check=False).returncode != 0
    for name, (address, secret) in cases.items():
        rack.kubectl("apply", "-f", "-", input_text=_bmh(name, address, secret))
    hosts = rack.wait_hosts(list(cases), lambda h: h.get("status", {}).get("errorType")
                            == "registration error", timeout=120, what="in registration error")
    assert "bad host or port" in hosts["bad-address"]["status"]["errorMessage"]
    assert "does-not-exist" in hosts["no-secret"]["status"]["errorMessage"]
    for name in cases:
        assert rack.ironic(f"/v1/nodes/default~{name}")[0] == 404, name
        reasons = {e.get("reason") for e in rack.events_for(name)}
        assert reasons, f"no events for {name}"
        rack.kubectl("delete", "baremetalhost", name, "--timeout=120s")

    # A profile that cannot fit leaves the host available with a condition.
    rack.kubectl("apply", "-f", "-", input_text=HUNGRY_PROFILE)
    url, digest, _ = _image(rack)
    _provision(rack, HOSTS[3], url, digest, profile="needs-eight-nvme")
    hosts = rack.wait_hosts([HOSTS[3]], lambda h: any(
        c["type"] == "ProfileValid" and c["status"] == "False"
        for c in h.get("status", {}).get("conditions", [])), timeout=120,
        what="with ProfileValid=False")
    assert state(hosts[HOSTS[3]]) == "available"
    cond = next(c for c in hosts[HOSTS[3]]["status"]["conditions"] if c["type"] == "ProfileValid")
    assert "nvme" in cond["message"]

    # An image URL that 404s ends as a provisioning error.
    missing = url.replace("sample-os.img", "no-such-image.img")
    _provision(rack, HOSTS[4], missing, "0" * 64)
    hosts = rack.wait_hosts([HOSTS[4]], lambda h: h.get("status", {}).get("errorType")
                            == "provisioning error", timeout=420, what="in provisioning error")
    assert hosts[HOSTS[4]]["status"]["errorMessage"]
    # Left alone it would retry (deprovision, deploy again) until its image
    # changes; the tests after this one expect it out of the way.
    rack.kubectl("delete", "baremetalhost", HOSTS[4], "--timeout=420s", timeout=450)


CRASH_HOSTS = 3
"""Enough to catch a repeated deploy or a second Ironic node."""


def test_sigkill_while_provisioning_converges_with_one_deploy_per_host(rack: Rack) -> None:
    """The whole ``racksmith up`` process is SIGKILLed while hosts provision
    (none provisioned yet, an image write under way): after a restart every
    one converges to provisioned, and each was deployed exactly once — one
    Ironic node per host, one more image write per host, no new error. It
    uses the hosts the tests above left available (run alone, it applies the
    rack's hosts itself)."""
    if not rack.hosts():
        rack.kubectl("apply", "-f", str(rack.data_dir / "emulated-hosts.yaml"))
        rack.kubectl("apply", "-f", "-", input_text=PROFILE)
        rack.wait_hosts(HOSTS, lambda h: state(h) == "available", timeout=420,
                        what="available")
    rack.kubectl("apply", "-f", "-", input_text=PROFILE)
    chosen = sorted(n for n, h in rack.hosts().items() if state(h) == "available")[:CRASH_HOSTS]
    assert len(chosen) == CRASH_HOSTS, rack.hosts().keys()
    before = rack.hosts()
    written_before = {n: rack.agent_status()[n]["images_written"] for n in chosen}
    url, digest, data = _image(rack)
    for name in chosen:
        _provision(rack, name, url, digest)
    rack.wait_hosts(chosen, lambda h: state(h) in ("provisioning", "provisioned"),
                    timeout=120, what="provisioning")
    # Let some deploys get under way, then kill the control plane outright.
    mid_deploy = False
    deadline = time.monotonic() + 120
    while not mid_deploy and time.monotonic() < deadline:
        hosts, agents = rack.hosts(), rack.agent_status()
        mid_deploy = not any(state(hosts[n]) == "provisioned" for n in chosen) and any(
            agents[n]["images_written"] > written_before[n] for n in chosen)
        if not mid_deploy:
            time.sleep(0.2)
    rack.server.proc.send_signal(signal.SIGKILL)
    assert mid_deploy, "no moment with an image written and no host provisioned yet"
    rack.server.proc.wait(30)

    restarted = start_rack(rack.data_dir, len(HOSTS))
    rack.server = restarted.server
    hosts = rack.wait_hosts(chosen, lambda h: state(h) == "provisioned"
                            and h["status"].get("poweredOn") is True, timeout=600,
                            what="provisioned after the restart")
    written = rack.agent_status()
    assert {n: written[n]["images_written"] - written_before[n] for n in chosen} \
        == dict.fromkeys(chosen, 1)
    code, nodes = rack.ironic("/v1/nodes?fields=name,provision_state")
    assert code == 200
    names = [n["name"] for n in nodes["nodes"]]
    assert len(names) == len(set(names)), names
    for name in chosen:
        (node,) = [n for n in nodes["nodes"] if n["name"] == f"default~{name}"]
        assert node["provision_state"] == "active", node
        assert _disk_holds(rack, name, data), name
        assert hosts[name]["status"]["errorCount"] == \
            before[name]["status"].get("errorCount", 0), hosts[name]["status"]


def _annotate(rack: Rack, name: str, changes: dict[str, str | None]) -> None:
    rack.kubectl("patch", "bmh", name, "--type=merge", "-p",
                 json.dumps({"metadata": {"annotations": changes}}))


def _ironic_power(rack: Rack, name: str) -> str | None:
    code, node = rack.ironic(f"/v1/nodes/default~{name}?fields=power_state")
    assert code == 200, code
    return str(node["power_state"]) if node["power_state"] else None


def _firmware(rack: Rack, name: str, condition: str, status: str,
              timeout: float = 120) -> dict[str, Any]:
    """Until HostFirmwareSettings ``name`` has ``condition`` at ``status`` for
    its current generation (kubectl); the object."""
    deadline = time.monotonic() + timeout
    hfs: dict[str, Any] = {}
    while time.monotonic() < deadline:
        out = rack.kubectl("get", "hfs", name, "-o", "json", check=False)
        hfs = json.loads(out.stdout) if out.returncode == 0 else {}
        found = [c for c in hfs.get("status", {}).get("conditions", [])
                 if c["type"] == condition and c["status"] == status
                 and c.get("observedGeneration") == hfs["metadata"]["generation"]]
        if found:
            return hfs
        time.sleep(0.5)
    raise AssertionError(f"HostFirmwareSettings {name}: no {condition} {status}: {hfs}")


def test_a_metal3_site_moves_in_unchanged(rack: Rack) -> None:
    """On the servers the tests above left (one freed by the deletion, one
    provisioned): BMO's own examples, firmware settings applied in a keyed
    reboot, detach, the status annotation of an exported host, a paused host."""
    freed, provisioned = HOSTS[2], HOSTS[1]
    servers = _emulated(rack)
    # BMO's example host, pointed at the freed server: registered, inspected, available.
    example = _pointed_at((METAL3 / "examples" / "example-host.yaml").read_text(),
                          servers[freed], address="ipmi://192.168.122.1:6233",
                          username="YWRtaW4=", password="MWYyZDFlMmU2N2Rm")
    rack.kubectl("apply", "-f", "-", input_text=example)
    # Its bad-credentials sibling, unchanged: a registration error, no Ironic node.
    rack.kubectl("create", "namespace", "metal3-examples")
    bad = METAL3 / "examples" / "example-host-bad-credentials.yaml"
    rack.kubectl("apply", "-n", "metal3-examples", "-f", str(bad))
    # worker-0.yaml's BMC (libvirt, 192.168.122.1) and image are not reachable from
    # here: the API takes it as it is, nothing is created.
    rack.kubectl("create", "namespace", "openshift-machine-api")
    rack.kubectl("apply", "--dry-run=server", "-n", "openshift-machine-api", "-f",
                 str(METAL3 / "examples" / "worker-0.yaml"))
    bad_hosts = json.loads(rack.kubectl("get", "bmh", "-n", "metal3-examples", "-o",
                                        "json").stdout)["items"]
    assert [h["metadata"]["name"] for h in bad_hosts] == ["example-baremetalhost"]
    name = "example-baremetalhost"
    hosts = rack.wait_hosts([name], lambda h: state(h) == "available", timeout=420,
                            what="available")
    inspected = hosts[name]["status"]["operationHistory"]["inspect"]
    assert inspected["end"]

    # A paused host is left alone: told to power off, it stays on while the
    # controller works on the other host below.
    rack.wait_hosts([name], lambda h: h["status"].get("poweredOn") is True, timeout=120,
                    what="powered on (online: true)")
    _annotate(rack, name, {"baremetalhost.metal3.io/paused": "metal3.io/capm3"})
    rack.kubectl("patch", "bmh", name, "--type=merge", "-p", '{"spec":{"online":false}}')

    # Firmware settings as Metal3 keeps them, read from the BMC's BIOS and
    # its attribute registry (sushy-tools'): values the registry refuses are
    # Valid False; a valid change waits for the host's next reboot.
    hfs = _firmware(rack, provisioned, "ChangeDetected", "False")
    assert hfs["status"]["settings"]["ProcTurboMode"] == "Enabled"
    schema = rack.get("firmwareschema", hfs["status"]["schema"]["name"])
    assert schema["spec"]["schema"]["ProcTurboMode"]["allowable_values"] == \
        ["Enabled", "Disabled"]
    rack.kubectl("patch", "hfs", provisioned, "--type=merge", "-p", json.dumps(
        {"spec": {"settings": {"ProcTurboMode": "Turbo", "NoSuchSetting": "1"}}}))
    refused = _firmware(rack, provisioned, "Valid", "False")
    message = next(c["message"] for c in refused["status"]["conditions"] if c["type"] == "Valid")
    assert "unknown enumeration value - Turbo" in message
    assert "setting NoSuchSetting is not in the Firmware Schema" in message
    rack.kubectl("patch", "hfs", provisioned, "--type=merge", "-p", json.dumps(
        {"spec": {"settings": {"ProcTurboMode": "Disabled", "NoSuchSetting": None}}}))
    _firmware(rack, provisioned, "ChangeDetected", "True")
    written = rack.agent_status()[provisioned]["images_written"]

    # Metal3's keyed reboot: off until every key is gone. The firmware change
    # is made first, by Ironic servicing (out of band; the disk is kept).
    _annotate(rack, provisioned, {"reboot.metal3.io/a": '{"mode":"hard"}',
                                  "reboot.metal3.io/b": ""})
    rack.wait_hosts([provisioned], lambda h: h["status"].get("poweredOn") is False,
                    timeout=240, what="serviced, then off for the keyed reboot")
    code, setting = rack.ironic(f"/v1/nodes/default~{provisioned}/bios/ProcTurboMode")
    assert code == 200 and setting["ProcTurboMode"]["value"] == "Disabled", setting
    _firmware(rack, provisioned, "ChangeDetected", "False")
    reasons = [e["reason"] for e in rack.events_for(provisioned)]
    assert "ServicingStarted" in reasons and "ServicingComplete" in reasons, reasons
    assert rack.agent_status()[provisioned]["images_written"] == written
    # One key goes; the unkeyed reboot asked with it is consumed (so the
    # controller has seen the change), and the host is still off.
    _annotate(rack, provisioned, {"reboot.metal3.io/a": None, "reboot.metal3.io": ""})
    rack.wait_hosts([provisioned], lambda h: "reboot.metal3.io" not in
                    h["metadata"].get("annotations", {}), timeout=120,
                    what="with the unkeyed reboot consumed")
    host = rack.hosts()[provisioned]
    assert "reboot.metal3.io/b" in host["metadata"]["annotations"]
    assert host["status"]["poweredOn"] is False and _ironic_power(rack, provisioned) == \
        "power off"
    _annotate(rack, provisioned, {"reboot.metal3.io/b": None})
    rack.wait_hosts([provisioned], lambda h: h["status"].get("poweredOn") is True,
                    timeout=120, what="on again once the last key is gone")

    # Detached: out of Ironic, the server untouched; attached again: adopted,
    # not deployed again.
    written = rack.agent_status()[provisioned]["images_written"]
    _annotate(rack, provisioned, {"baremetalhost.metal3.io/detached": ""})
    rack.wait_hosts([provisioned], lambda h: h["status"].get("operationalStatus")
                    == "detached", timeout=120, what="detached")
    assert rack.ironic(f"/v1/nodes/default~{provisioned}")[0] == 404
    assert state(rack.hosts()[provisioned]) == "provisioned"
    _, data = _image(rack)[1:]
    assert _disk_holds(rack, provisioned, data)
    _annotate(rack, provisioned, {"baremetalhost.metal3.io/detached": None})
    rack.wait_hosts([provisioned], lambda h: h["status"].get("operationalStatus") == "OK"
                    and state(h) == "provisioned", timeout=180, what="attached again")
    deadline = time.monotonic() + 180
    node: dict[str, Any] | None = None
    while time.monotonic() < deadline:  # registered again, then adopted
        code, node = rack.ironic(f"/v1/nodes/default~{provisioned}")
        if code == 200 and node and node["provision_state"] == "active":
            break
        time.sleep(1.0)
    assert node and node["provision_state"] == "active", node
    assert rack.agent_status()[provisioned]["images_written"] == written

    # The paused host was left alone all along; unpaused, it powers off.
    host = rack.hosts()[name]
    assert host["metadata"]["annotations"]["baremetalhost.metal3.io/paused"] == \
        "metal3.io/capm3"
    assert host["status"]["poweredOn"] is True and _ironic_power(rack, name) == "power on"
    _annotate(rack, name, {"baremetalhost.metal3.io/paused": None})
    rack.wait_hosts([name], lambda h: h["status"].get("poweredOn") is False, timeout=120,
                    what="off once unpaused")

    # Moved: exported with its status, deleted, created again from the export —
    # registered and cleaned, not inspected again.
    exported = rack.racksmith("export", "-n", "default")
    (doc,) = [d for d in yaml.safe_load_all(exported) if d["metadata"]["name"] == name]
    assert "baremetalhost.metal3.io/status" in doc["metadata"]["annotations"]
    before = hosts[name]["status"]
    rack.kubectl("delete", "bmh", name, "--timeout=300s", timeout=330)
    assert rack.ironic(f"/v1/nodes/default~{name}")[0] == 404
    rack.kubectl("apply", "-f", "-", input_text=yaml.safe_dump(doc))
    moved = rack.wait_hosts([name], lambda h: state(h) == "available"
                            and "baremetalhost.metal3.io/status" not in
                            h["metadata"].get("annotations", {}), timeout=420,
                            what="available again")[name]
    assert moved["status"]["operationHistory"]["inspect"] == inspected
    assert moved["status"]["hardware"] == before["hardware"]
    reasons = [e["reason"] for e in rack.events_for(name)
               if e["involvedObject"].get("uid") == moved["metadata"]["uid"]]
    assert "StatusRestored" in reasons and "InspectionComplete" not in reasons, reasons

    bad_host: dict[str, Any] = {}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not bad_host.get("status", {}).get("errorType"):
        bad_host = json.loads(rack.kubectl("get", "bmh", "-n", "metal3-examples", name, "-o",
                                           "json").stdout)
        time.sleep(0.5)
    assert bad_host["status"]["errorType"] == "registration error", bad_host.get("status")
    assert "password" in bad_host["status"]["errorMessage"]
    assert rack.ironic(f"/v1/nodes/metal3-examples~{name}")[0] == 404
    rack.kubectl("delete", "namespace", "metal3-examples", "openshift-machine-api",
                 "--timeout=120s")

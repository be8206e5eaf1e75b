"""The web console end to end: Playwright drives Debian's headless Chromium
against the session's demo cluster (``racksmith up`` with emulated hosts,
real Ironic, host agents), finding everything by role and accessible name
(docs/design/console-contracts.md); kubectl sets the scene and checks.

A wrong token is refused; the right one logs in. A host deleted and
re-registered goes registering → inspecting → available on the open Hosts
page, live. A machine created through the form deploys to Ready on its page,
live. A volume created on the node's Volumes tab (in the cluster's own API,
through the management API's cluster proxy) becomes Available; once a
claim binds its PV, its Delete button is disabled with the reason; with the
claim gone it is deleted from the page. The node-side objects are set up
and checked in the cluster's own API (``rack.cluster()``). A step of a new update plan is
commenced from the Updates page and its progress shows. The Events page
lists events. Logged in as a viewer, what the role may not do is disabled
with the reason. Each page's screenshot goes to the artifacts folder
(``make console-screenshots`` refreshes docs/console/ for docs/console.md).

Runs last in tests/e2e (after test_cluster deleted demo-worker-2 and
test_update moved the cluster to racksmith-1.1.0), and alone on a fresh
session: without a free host it deletes a worker first.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from playwright.sync_api import Locator, Page, expect

from racksmith.apiserver.users import add_user, kubeconfig_path
from tests.e2e.console import Console, launch
from tests.e2e.demo import guide_blocks, run_block, wait_for
from tests.e2e.rack import Rack, state

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(2400)]

MACHINE = "console-worker"
VOLUME = "console-data"
CLAIM_NS = "console"
CLAIM = "console-data"
STORAGE_CLASS = "local-ext4"
GROUP_LABEL = "lcm.racksmith.io/update-group"
RACK_LABEL = "metal.racksmith.io/rack"
SECOND = 1000  # Playwright timeouts are in milliseconds


@pytest.fixture(scope="module")
def rack(demo_rack: Rack, demo_ready: dict[str, dict[str, Any]]) -> Rack:
    return demo_rack


@pytest.fixture(scope="module")
def console(rack: Rack) -> Iterator[Console]:
    c = launch(rack.server.url)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def ui(console: Console, rack: Rack) -> Iterator[Console]:
    """The console, logged in (each test works whatever the previous left);
    no uncaught JavaScript error may happen meanwhile."""
    if console.page.url == "about:blank" or not console.logged_in():
        console.open()
        console.login(rack.server.token)
    console.clear_notices()
    yield console
    errors = list(console.errors)
    console.errors.clear()
    assert errors == [], errors


@pytest.fixture(scope="module")
def spare_host(rack: Rack) -> str:
    """An available host no machine uses; frees one (deletes a worker) if none."""
    free = _free_hosts(rack)
    if not free:
        machines = {m["metadata"]["name"]: m for m in rack.get("machines")["items"]}
        victim = "demo-worker-2" if "demo-worker-2" in machines else sorted(
            n for n, m in machines.items() if m["spec"].get("roles") == ["node"])[-1]
        host = machines[victim]["status"]["hostRef"]["name"]
        rack.kubectl("delete", "machine", victim, "--wait=false")
        wait_for(rack, f"machine {victim} gone", lambda: rack.kubectl(
            "get", "machine", victim, check=False).returncode != 0, timeout=600)
        rack.wait_hosts([host], lambda h: state(h) == "available"
                        and not h["spec"].get("consumerRef"), timeout=600, what="available")
        free = _free_hosts(rack)
    assert free, "no free host"
    return free[0]


def _free_hosts(rack: Rack) -> list[str]:
    return sorted(name for name, h in rack.hosts().items()
                  if state(h) == "available" and not h["spec"].get("consumerRef"))


def _apply(rack: Rack, doc: dict[str, Any]) -> None:
    rack.kubectl("apply", "-f", "-", input_text=json.dumps(doc))


def _mark_page(page: Page) -> None:
    """Tag the document: the tag survives route changes but not a reload."""
    page.evaluate("() => { window.__e2eNoReload = true; }")


def _assert_not_reloaded(page: Page) -> None:
    assert page.evaluate("() => window.__e2eNoReload === true"), "the page was reloaded"


def _watch_text(cell: Locator, until: str, timeout: float) -> list[str]:
    """Poll the text of ``cell`` until it is ``until``; the distinct texts seen, in order."""
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = (cell.text_content(timeout=30 * SECOND) or "").strip() if cell.count() else ""
        if text and (not seen or seen[-1] != text):
            seen.append(text)
        if text == until:
            break
        time.sleep(0.25)
    expect(cell).to_have_text(until, timeout=5 * SECOND)
    return seen


def test_a_wrong_token_is_refused(console: Console) -> None:
    page = console.open()
    page.get_by_label("API token").fill("not-a-token")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("alert")).to_contain_text("refused", timeout=30 * SECOND)
    expect(page.get_by_role("navigation", name="Main")).to_be_hidden()
    expect(page.get_by_role("button", name="Log out")).to_be_hidden()
    expect(page.get_by_label("API token")).to_be_visible()
    assert page.url.endswith("#/login"), page.url
    console.screenshot("login-refused")


def test_log_in_shows_the_overview(console: Console, rack: Rack) -> None:
    console.open()
    console.login(rack.server.token)
    page = console.page
    nav = page.get_by_role("navigation", name="Main")
    for name in ("Overview", "Hosts", "Machines", "Updates", "Events"):
        expect(nav.get_by_role("link", name=name)).to_be_visible()
    expect(page.get_by_role("heading", level=1)).to_have_text("Overview")
    expect(page.get_by_role("table", name="Clusters").locator('[data-name="demo"]')).to_be_visible(
        timeout=30 * SECOND)
    expect(page.get_by_role("list", name="Hosts by state").get_by_role("listitem").first
           ).to_be_visible(timeout=30 * SECOND)
    expect(page.get_by_role("heading", name="Backups")).to_be_visible()
    expect(page.get_by_role("table", name="Backups").or_(
        page.get_by_text("No backup yet"))).to_be_visible(timeout=30 * SECOND)
    expect(page.get_by_role("button", name="Log out")).to_be_visible()
    console.screenshot("overview")


def test_the_navigation_opens_every_page(ui: Console) -> None:
    """Each link of the Main navigation, in turn and back: every page shows
    within seconds (the previous pages' watches must not starve the next)."""
    _mark_page(ui.page)
    for name in ("Hosts", "Machines", "Updates", "Events", "Overview", "Machines", "Hosts"):
        page = ui.nav(name)
        link = page.get_by_role("navigation", name="Main").get_by_role("link", name=name)
        expect(link).to_have_attribute("aria-current", "page")
        expect(page.locator("main")).not_to_contain_text("Loading…", timeout=15 * SECOND)
    _assert_not_reloaded(ui.page)


def test_a_host_reaches_available_live(ui: Console, rack: Rack, spare_host: str) -> None:
    page = ui.nav("Hosts")
    _mark_page(page)
    hosts = page.get_by_role("table", name="Hosts")
    row = hosts.locator(f'[data-name="{spare_host}"]')
    cell = row.locator('[data-col="state"]')
    expect(cell).to_have_text("available", timeout=60 * SECOND)

    # Delete the host and enrol it again from the same manifest (its BMC
    # Secret stays): it registers, is inspected and becomes available.
    manifest = rack.get("baremetalhost", spare_host)
    manifest.pop("status", None)
    for key in ("uid", "resourceVersion", "creationTimestamp", "managedFields", "generation",
                "finalizers", "deletionTimestamp"):
        manifest["metadata"].pop(key, None)
    rack.kubectl("delete", "baremetalhost", spare_host, timeout=300)
    expect(row).to_have_count(0, timeout=60 * SECOND)
    rack.kubectl("create", "-f", "-", input_text=json.dumps(manifest))
    expect(row).to_have_count(1, timeout=60 * SECOND)
    seen = _watch_text(cell, "available", timeout=600)
    assert [s for s in seen if s != "available"], f"no state before available: {seen}"
    _assert_not_reloaded(page)
    expect(row.locator('[data-col="error"]')).to_have_text("")
    ui.screenshot("hosts")

    # The host's page: its inventory and operation history.
    row.get_by_role("link", name=spare_host).click()
    expect(page.get_by_role("heading", level=1)).to_contain_text(spare_host)
    history = page.get_by_role("table", name="Operation history")
    expect(history).to_be_visible(timeout=30 * SECOND)
    for operation in ("register", "inspect"):  # done just now, on the Hosts page
        expect(history.locator(f'[data-name="{operation}"] [data-col="end"]')).not_to_have_text(
            re.compile(r"^\s*(—\s*)?$"), timeout=30 * SECOND)
    inventory = page.get_by_role("region", name="Inventory")
    expect(inventory.get_by_role("table", name="NICs").locator("[data-name]").first
           ).to_be_visible(timeout=30 * SECOND)
    ui.screenshot("host")


def test_a_machine_created_in_the_form_deploys_live(ui: Console, rack: Rack,
                                                    spare_host: str) -> None:
    host_rack = rack.hosts()[spare_host]["metadata"]["labels"][RACK_LABEL]
    worker = next(m for m in rack.get("machines")["items"]
                  if m["spec"].get("roles") == ["node"]
                  and GROUP_LABEL in m["metadata"].get("labels", {}))
    labels = worker["metadata"]["labels"]
    page = ui.nav("Machines")
    _mark_page(page)
    page.get_by_role("link", name="Create machine").click()
    expect(page.get_by_role("heading", level=1)).to_be_visible()
    page.get_by_label("Name", exact=True).fill(MACHINE)
    page.get_by_label("Cluster", exact=True).select_option("demo")
    for role in ("master", "etcd", "node", "infra"):
        box = page.get_by_label(role, exact=True)
        if role == "node":
            box.check()
        else:
            box.uncheck()
    # The hosts of the spare host's rack, with the live count of those available.
    in_rack = [n for n in _free_hosts(rack)
               if rack.hosts()[n]["metadata"]["labels"].get(RACK_LABEL) == host_rack]
    host_select = page.get_by_label("Host", exact=True)
    expect(host_select.locator(f'option[value="{host_rack}"]')).to_have_text(
        f"Hosts in rack {host_rack} ({len(in_rack)} available)", timeout=30 * SECOND)
    host_select.select_option(host_rack)
    page.get_by_label("Rack label", exact=True).fill(labels[RACK_LABEL])
    page.get_by_label("Update group", exact=True).select_option(labels[GROUP_LABEL])
    ui.screenshot("machine-new")
    page.get_by_role("button", name="Create", exact=True).click()
    form_error = page.locator("form").get_by_role("alert")
    heading = page.get_by_role("heading", level=1, name=MACHINE, exact=True)
    expect(heading.or_(form_error)).to_be_visible(timeout=30 * SECOND)
    assert not form_error.is_visible(), form_error.text_content()
    assert page.url.endswith(f"#/machines/default/{MACHINE}"), page.url
    created = rack.get("machine", MACHINE)
    assert created["spec"]["roles"] == ["node"]
    assert created["metadata"]["labels"][GROUP_LABEL] == labels[GROUP_LABEL]

    bar = page.get_by_role("progressbar", name="Deploy progress")
    expect(bar).to_be_visible(timeout=30 * SECOND)
    seen: set[str] = set()
    deadline = time.monotonic() + 900
    shot = 0.0  # the progress of the screenshot: mid-deployment if we can
    while time.monotonic() < deadline:
        now = bar.get_attribute("aria-valuenow", timeout=30 * SECOND) or ""
        seen.add(now)
        if now == "100":
            break
        if now and (not shot or shot < 40 <= float(now)):
            ui.screenshot("machine")
            shot = float(now)
        time.sleep(0.5)
    expect(bar).to_have_attribute("aria-valuenow", "100", timeout=5 * SECOND)
    expect(page.get_by_role("region", name="Status").locator('[data-col="phase"]')).to_have_text(
        "Ready")
    _assert_not_reloaded(page)
    assert len(seen - {"100", ""}) >= 2, f"deploy progress not followed live: {seen}"
    if not shot:
        ui.screenshot("machine")
    machine = rack.get("machine", MACHINE)
    assert machine["status"]["phase"] == "Ready"
    assert machine["status"]["hostRef"]["name"] in in_rack

    ui.nav("Machines")
    row = page.get_by_role("table", name="Machines").locator(f'[data-name="{MACHINE}"]')
    expect(row.locator('[data-col="phase"]')).to_have_text("Ready", timeout=30 * SECOND)
    ui.screenshot("machines")


def test_a_volume_is_created_and_its_delete_is_disabled_while_bound(ui: Console,
                                                                    rack: Rack) -> None:
    demo = rack.cluster()  # the Volume, its PV and the claim live in the cluster's own API
    if demo.kubectl("get", "storageclass", STORAGE_CLASS, check=False).returncode != 0:
        _apply(demo, {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                      "metadata": {"name": STORAGE_CLASS},
                      "provisioner": "kubernetes.io/no-provisioner",
                      "volumeBindingMode": "WaitForFirstConsumer", "reclaimPolicy": "Retain",
                      "parameters": {"fsType": "ext4"}})
    phases = {m["metadata"]["name"]: (m.get("status") or {}).get("phase")
              for m in rack.get("machines")["items"]}
    node = MACHINE if phases.get(MACHINE) == "Ready" else "demo-worker-1"
    page = ui.go(f"#/machines/default/{node}")
    _mark_page(page)
    page.get_by_role("navigation", name="Machine sections").get_by_role(
        "link", name="Volumes").click()
    page.get_by_label("Volume name").fill(VOLUME)
    page.get_by_label("Storage class").select_option(STORAGE_CLASS)
    page.get_by_label("Mode").select_option("Filesystem")
    page.get_by_label("Backend").select_option("sparseLoopDevice")
    page.get_by_label("Size").fill("1Gi")
    page.get_by_role("button", name="Create volume").click()
    row = page.get_by_role("table", name="Volumes").locator(f'[data-name="{VOLUME}"]')
    expect(row.locator('[data-col="phase"]')).to_have_text("Available", timeout=300 * SECOND)
    volume = demo.get("volume", VOLUME)
    assert volume["spec"]["nodeName"] == node
    assert volume["spec"]["sparseLoopDevice"]["size"] == "1Gi"
    delete = page.get_by_role("button", name=f"Delete {VOLUME}")
    expect(delete).to_be_enabled()

    # A claim binds its PV: Delete is disabled, with the reason.
    demo.kubectl("create", "namespace", CLAIM_NS, check=False)
    _apply(demo, {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                  "metadata": {"name": CLAIM, "namespace": CLAIM_NS},
                  "spec": {"storageClassName": STORAGE_CLASS, "volumeName": VOLUME,
                           "accessModes": ["ReadWriteOnce"],
                           "resources": {"requests": {"storage": "1Gi"}}}})
    wait_for(rack, "the PV Bound", lambda: (demo.get("pv", VOLUME).get("status") or {}).get(
        "phase") == "Bound", timeout=120)
    expect(delete).to_be_disabled(timeout=60 * SECOND)
    reason = f"bound to claim {CLAIM_NS}/{CLAIM}"
    expect(delete).to_have_attribute("title", re.compile(re.escape(reason)))
    expect(delete).to_have_accessible_description(re.compile(re.escape(reason)))
    expect(row).to_contain_text(reason)
    _assert_not_reloaded(page)
    ui.screenshot("volumes")

    # The claim goes: Delete works.
    demo.kubectl("delete", "pvc", CLAIM, "-n", CLAIM_NS, timeout=120)
    expect(delete).to_be_enabled(timeout=60 * SECOND)
    page.once("dialog", lambda dialog: dialog.accept())
    delete.click()
    # the console's DELETE reached the cluster (through the proxy) ...
    wait_for(rack, "the volume deleted in the cluster", lambda: _deleting(demo, VOLUME),
             timeout=60)
    # ... and the volume, destroyed by its node, is gone from the page
    expect(row).to_have_count(0, timeout=180 * SECOND)
    wait_for(rack, "the volume gone", lambda: demo.kubectl(
        "get", "volume", VOLUME, check=False).returncode != 0, timeout=60)
    # the management API never held it
    assert rack.kubectl("get", "volume", VOLUME, check=False).returncode != 0


def _deleting(cluster: Rack, name: str) -> bool:
    """Volume ``name`` is Terminating or gone in ``cluster``'s API."""
    res = cluster.kubectl("get", "volume", name, "-o", "json", check=False)
    return res.returncode != 0 or bool(json.loads(res.stdout)["metadata"].get(
        "deletionTimestamp"))


def test_an_update_step_is_commenced_and_progresses(ui: Console, rack: Rack) -> None:
    cluster = rack.get("cluster", "demo")
    ns = cluster["metadata"]["namespace"]
    current = rack.get("clusterrelease", cluster["spec"]["release"])
    release = _new_release(rack, current)
    rack.kubectl("patch", "cluster", "demo", "--type", "merge", "-p",
                 json.dumps({"spec": {"release": release["metadata"]["name"]}}))

    def plan() -> dict[str, Any] | None:
        for p in rack.get("clusterupdateplans", "-n", ns)["items"]:
            if p["spec"]["target"] == release["metadata"]["name"] and p["spec"]["steps"]:
                return dict(p)
        return None
    found = wait_for(rack, "the update plan", plan, timeout=120)
    name = found["metadata"]["name"]
    step = found["spec"]["steps"][0]
    assert not step["commence"]

    page = ui.nav("Updates")
    _mark_page(page)
    page.get_by_role("table", name="Update plans").get_by_role(
        "link", name=f"{ns}/{name}").click()
    item = page.get_by_role("list", name="Steps").locator(f'li[data-name="{step["id"]}"]')
    expect(item.locator('[data-col="phase"]')).to_have_text("NotStarted", timeout=30 * SECOND)
    page.get_by_role("button", name=f"Commence {step['name']}").click()
    expect(item.locator('[data-col="phase"]')).not_to_have_text("NotStarted",
                                                                timeout=300 * SECOND)
    committed = rack.get("clusterupdateplan", name, "-n", ns)["spec"]["steps"][0]
    assert committed["id"] == step["id"] and committed["commence"] is True

    bar = page.get_by_role("progressbar", name=f"Progress of step {step['name']}")
    busy = page.get_by_role("table", name="Machine progress").locator(
        '[data-col="state"]').filter(has_text=re.compile(
            "Requested|WaitingForLocks|Draining|Applying|Rebooting|WaitingForNode|"
            "Uncordoning|Done"))
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if float(bar.get_attribute("aria-valuenow") or 0) > 0 or busy.count():
            break
        time.sleep(0.5)
    assert float(bar.get_attribute("aria-valuenow") or 0) > 0 or busy.count(), \
        "no progress shown for the commenced step"
    _assert_not_reloaded(page)
    ui.screenshot("updates")


def _new_release(rack: Rack, current: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``current`` with the next patch version and one changed file
    item (no reboot needed), applied."""
    major, minor, patch = (int(x) for x in current["spec"]["version"].split(".")[:3])
    names = {r["metadata"]["name"] for r in rack.get("clusterreleases")["items"]}
    while True:
        patch += 1
        version = f"{major}.{minor}.{patch}"
        name = f"racksmith-console-{version}"
        if name not in names:
            break
    spec = json.loads(json.dumps(current["spec"]))
    spec["version"] = version
    spec["description"] = f"{spec.get('description', '')} Console e2e: sysctl file comment."
    item = next(i for i in spec["stateItems"] if i["type"] == "file")
    item["params"]["content"] += f"# {name}\n"
    assert not item.get("requiresReboot")
    release = {"apiVersion": current["apiVersion"], "kind": "ClusterRelease",
               "metadata": {"name": name}, "spec": spec}
    _apply(rack, release)
    return release


def test_the_events_page_lists_events(ui: Console) -> None:
    page = ui.nav("Events")
    events = page.get_by_role("table", name="Events")
    expect(events.locator("[data-name]").first).to_be_visible(timeout=60 * SECOND)
    ui.screenshot("events")


def test_a_viewer_sees_what_their_role_may_not_do_disabled(console: Console, rack: Rack,
                                                           tmp_path: Path) -> None:
    """Logged in with a ``view`` token, the Delete machine button and the Create
    volume form are disabled with the reason (SelfSubjectAccessReview; for the
    volume, of the cluster proxy's ``create`` on ``clusters/proxy``)."""
    name = "console-viewer"
    kubeconfig = kubeconfig_path(rack.data_dir, name)
    if not kubeconfig.exists():
        add_user(rack.data_dir, name, "view")
    token = yaml.safe_load(kubeconfig.read_text())["users"][0]["user"]["token"]
    # the server re-reads the token file once a second
    wait_for(rack, "the viewer's token accepted", lambda: subprocess.run(
        ["kubectl", "auth", "whoami"], capture_output=True,
        env={"KUBECONFIG": str(kubeconfig), "PATH": "/usr/bin:/bin",
             "HOME": str(tmp_path)}).returncode == 0, timeout=60)
    page = console.open()
    if console.logged_in():
        page.get_by_role("button", name="Log out").click()
    console.login(token)
    machines = [m["metadata"]["name"] for m in rack.get("machines")["items"]]
    node = MACHINE if MACHINE in machines else "demo-worker-1"
    page = console.go(f"#/machines/default/{node}")
    expect(page.get_by_role("button", name="Delete machine")).to_be_disabled(
        timeout=60 * SECOND)
    expect(page.locator("#machine-delete-why")).to_have_text(
        "Your role may not delete machines in default.")
    page.get_by_role("navigation", name="Machine sections").get_by_role(
        "link", name="Volumes").click()
    expect(page.get_by_role("button", name="Create volume")).to_be_disabled(
        timeout=60 * SECOND)
    expect(page.locator("#vol-create-why")).to_have_text(
        "Your role may not create volumes in cluster default/demo.")
    console.screenshot("viewer-machine-volumes")
    page.get_by_role("button", name="Log out").click()  # the next tests log in as admin
    errors = list(console.errors)
    console.errors.clear()
    assert errors == [], errors


def test_the_guide_examples_run(rack: Rack) -> None:
    """docs/console.md's bash blocks: the address, the token, a public page and
    a token-protected path."""
    blocks = guide_blocks("console.md")
    assert blocks
    for block in blocks:
        out = run_block(rack, block)
        assert f"console: {rack.server.url}/console/" in out or "console:" not in block

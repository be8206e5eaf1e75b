"""``kubernetes_asyncio`` against the in-process API server: CRUD of core and
custom objects, watches (with bookmarks, resumed from a resourceVersion)
while other tasks write, the patch content types this client picks, and the
finalizer dance kopf performs.

Every watch starts from the resourceVersion of a list (or of an event), so
the writer task may run before or after the stream connects. Each test is
bounded by ``asyncio.timeout`` and each watch by ``timeout_seconds``.

The tests share the module's API server, each in its own namespace (the one
that creates namespaces and Events of its own aside); what a test made is
deleted after it (``tests.harness``). The 410 test has a server of its own,
with a ten-event log.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from kubernetes_asyncio import client, config, watch
from kubernetes_asyncio.client.exceptions import ApiException

from racksmith.apiserver.server import ApiServer
from tests.harness.api import serving

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.usefixtures("no_server_errors")]

Obj = dict[str, Any]

STORAGE = ("storage.racksmith.io", "v1alpha1", "volumes")
LOCKS = ("lcm.racksmith.io", "v1alpha1", "nodeworkloadlocks")
BMH_GV = ("metal3.io", "v1alpha1")
BMH = "baremetalhosts"
TEST_SECONDS = 30  # bound on each test's client work
WATCH_SECONDS = 10  # server-side bound on each watch
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
FINALIZER = "kopf.zalando.org/KopfFinalizerMarker"


@pytest_asyncio.fixture(loop_scope="module")
async def api(api_server: ApiServer) -> AsyncIterator[client.ApiClient]:
    api_client = await config.new_client_from_config(
        config_file=str(api_server.kubeconfig_path), persist_config=False)
    try:
        yield api_client
    finally:
        await api_client.close()


@pytest.fixture
def core(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture
def custom(api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


def volume(name: str, node: str = "node-1", **labels: str) -> Obj:
    return {"apiVersion": "storage.racksmith.io/v1alpha1", "kind": "Volume",
            "metadata": {"name": name, "labels": labels},
            "spec": {"nodeName": node, "storageClassName": "local",
                     "sparseLoopDevice": {"size": "1Gi"}}}


def bmh(name: str, namespace: str, **labels: str) -> Obj:
    return {"apiVersion": "metal3.io/v1alpha1", "kind": "BareMetalHost",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"bmc": {"address": f"ipmi://127.0.0.1:623/{name}",
                             "credentialsName": f"{name}-bmc"}, "online": False}}


def meta(name: str, **labels: str) -> client.V1ObjectMeta:
    return client.V1ObjectMeta(name=name, labels=labels or None)


async def api_status(call: Awaitable[object]) -> int:
    with pytest.raises(ApiException) as exc:
        await call
    return int(exc.value.status)


async def collect(stream: watch.Watch, until: Callable[[Obj], bool]) -> list[Obj]:
    """Non-bookmark events of ``stream`` up to the first ``until`` accepts."""
    events: list[Obj] = []
    async with asyncio.timeout(TEST_SECONDS):
        async for event in stream:
            if event["type"] == "BOOKMARK":
                continue
            events.append(event)
            if until(event):
                stream.stop()
                break
    await stream.close()
    return events


def is_deleted(event: Obj) -> bool:
    return bool(event["type"] == "DELETED")


# --- Core objects ------------------------------------------------------------------------

async def test_core_crud(api: client.ApiClient, core: client.CoreV1Api) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        ns = await core.create_namespace(client.V1Namespace(metadata=meta("async-core")))
        assert isinstance(ns, client.V1Namespace)
        name = ns.metadata.name

        cm = await core.create_namespaced_config_map(name, client.V1ConfigMap(
            metadata=meta("cfg", app="x"), data={"a": "1"}))
        assert isinstance(cm, client.V1ConfigMap)
        # A dict body on a core kind: the client sends a strategic merge patch.
        patched = await core.patch_namespaced_config_map("cfg", name, {"data": {"b": "2"}})
        assert patched.data == {"a": "1", "b": "2"}
        # A list body: JSON patch.
        patched = await core.patch_namespaced_config_map(
            "cfg", name, [{"op": "remove", "path": "/data/a"}])
        assert patched.data == {"b": "2"}
        stale = client.V1ConfigMap(metadata=client.V1ObjectMeta(
            name="cfg", resource_version=cm.metadata.resource_version), data={})
        assert await api_status(core.replace_namespaced_config_map("cfg", name, stale)) == 409

        secret = await core.create_namespaced_secret(name, client.V1Secret(
            metadata=meta("s"), type="Opaque",
            data={"k": base64.b64encode(b"\xffsecret").decode()}))
        assert isinstance(secret, client.V1Secret)
        got = await core.read_namespaced_secret("s", name)
        assert base64.b64decode(got.data["k"]) == b"\xffsecret"

        node = await core.create_node(client.V1Node(
            metadata=meta("anode", role="worker"),
            status=client.V1NodeStatus(
                addresses=[client.V1NodeAddress(type="InternalIP", address="127.0.0.2")],
                conditions=[client.V1NodeCondition(type="Ready", status="True")],
                node_info=client.V1NodeSystemInfo(
                    architecture="arm64", boot_id="b", container_runtime_version="cri-o://1.30",
                    kernel_version="6.1", kube_proxy_version="v1.30.0",
                    kubelet_version="v1.30.0", machine_id="m", operating_system="linux",
                    os_image="Debian 12", system_uuid="u"))))
        assert isinstance(node, client.V1Node)
        node = await core.patch_node_status("anode", {"status": {"conditions": [
            {"type": "Ready", "status": "False", "reason": "KubeletNotReady"}]}})
        assert node.status.conditions[0].status == "False"
        assert node.status.node_info.architecture == "arm64"
        node = await core.read_node_status("anode")
        assert node.status.addresses[0].address == "127.0.0.2"

        for pod_name, node_name in (("p1", "anode"), ("p2", "other")):
            await core.create_namespaced_pod(name, client.V1Pod(
                metadata=meta(pod_name, app="db"),
                spec=client.V1PodSpec(node_name=node_name, containers=[
                    client.V1Container(name="c", image="img")])))
        pods = await core.list_pod_for_all_namespaces(field_selector="spec.nodeName=anode")
        assert [p.metadata.name for p in pods.items] == ["p1"]
        pods = await core.list_namespaced_pod(name, label_selector="app=db", limit=1)
        assert len(pods.items) == 1 and pods.metadata._continue
        rest = await core.list_namespaced_pod(name, label_selector="app=db", limit=1,
                                              _continue=pods.metadata._continue)
        assert {pods.items[0].metadata.name, rest.items[0].metadata.name} == {"p1", "p2"}

        # kopf posts its events as core v1 Events in the object's namespace.
        when = datetime(2025, 5, 5, tzinfo=UTC)
        ev = await core.create_namespaced_event("default", client.CoreV1Event(
            metadata=client.V1ObjectMeta(generate_name="kopf-event-"),
            involved_object=client.V1ObjectReference(
                api_version="metal3.io/v1alpha1", kind="BareMetalHost",
                name="h", namespace="default", uid="u-1"),
                reason="Logging", message="Handler succeeded.", type="Normal",
                source=client.V1EventSource(component="kopf"),
                first_timestamp=when, last_timestamp=when, event_time=when))
        assert ev.metadata.name.startswith("kopf-event-")
        events_v1 = client.EventsV1Api(api)
        as_new = await events_v1.read_namespaced_event(ev.metadata.name, "default")
        assert as_new.note == "Handler succeeded."
        assert as_new.regarding.kind == "BareMetalHost"

        lease = await client.CoordinationV1Api(api).create_namespaced_lease(
            name, client.V1Lease(metadata=meta("l"), spec=client.V1LeaseSpec(
                holder_identity="me", lease_duration_seconds=10, renew_time=when)))
        assert lease.spec.renew_time == when
        pdb = await client.PolicyV1Api(api).create_namespaced_pod_disruption_budget(
            name, client.V1PodDisruptionBudget(metadata=meta("pdb"),
                                               spec=client.V1PodDisruptionBudgetSpec(
                min_available=1, selector=client.V1LabelSelector(
                    match_labels={"app": "db"}))))
        assert pdb.spec.min_available == 1
        sc = await client.StorageV1Api(api).create_storage_class(client.V1StorageClass(
            metadata=meta("sc"), provisioner="storage.racksmith.io/local"))
        assert sc.provisioner == "storage.racksmith.io/local"

        assert await api_status(core.read_namespaced_pod("missing", name)) == 404
        await core.delete_namespaced_config_map("cfg", name)
        assert await api_status(core.read_namespaced_config_map("cfg", name)) == 404


# --- Custom objects ----------------------------------------------------------------------

async def test_custom_crud(custom: client.CustomObjectsApi, ns: str) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        created = await custom.create_cluster_custom_object(*STORAGE, volume("v1", a="b"))
        assert created["spec"]["mode"] == "Filesystem"
        got = await custom.get_cluster_custom_object(*STORAGE, "v1")
        assert got["metadata"]["uid"] == created["metadata"]["uid"]

        patched = await custom.patch_cluster_custom_object(
            *STORAGE, "v1", {"metadata": {"labels": {"a": "c"}}}, _content_type=MERGE)
        assert patched["metadata"]["labels"] == {"a": "c"}
        patched = await custom.patch_cluster_custom_object(
            *STORAGE, "v1", [{"op": "add", "path": "/metadata/labels/z", "value": "1"}])
        assert patched["metadata"]["labels"] == {"a": "c", "z": "1"}

        got["spec"]["storageClassName"] = "stale"
        assert await api_status(custom.replace_cluster_custom_object(
            *STORAGE, "v1", got)) == 409
        patched["spec"]["storageClassName"] = "fresh"
        replaced = await custom.replace_cluster_custom_object(*STORAGE, "v1", patched)
        assert replaced["spec"]["storageClassName"] == "fresh"

        await custom.create_namespaced_custom_object(*BMH_GV, ns, BMH, bmh("h1", ns, r="1"))
        await custom.create_namespaced_custom_object(*BMH_GV, ns, BMH, bmh("h2", ns, r="2"))
        listed = await custom.list_namespaced_custom_object(*BMH_GV, ns, BMH,
                                                            label_selector="r=2")
        assert [o["metadata"]["name"] for o in listed["items"]] == ["h2"]
        status = await custom.patch_namespaced_custom_object_status(
            *BMH_GV, ns, BMH, "h1", {"status": {"poweredOn": True}},
            _content_type=MERGE)
        assert status["status"]["poweredOn"] is True

        lock = await custom.create_cluster_custom_object(*LOCKS, {
            "apiVersion": "lcm.racksmith.io/v1alpha1", "kind": "NodeWorkloadLock",
            "metadata": {"name": "l1"}, "spec": {"controllerName": "c", "nodeName": "n"}})
        assert lock["spec"]["nodeDeletionRequestSupported"] is False  # default
        lock = await custom.patch_cluster_custom_object_status(
            *LOCKS, "l1", [{"op": "add", "path": "/status", "value": {"state": "inactive"}}])
        assert lock["status"]["state"] == "inactive"

        await custom.delete_namespaced_custom_object(*BMH_GV, ns, BMH, "h1")
        assert await api_status(custom.get_namespaced_custom_object(
            *BMH_GV, ns, BMH, "h1")) == 404
        await custom.delete_cluster_custom_object(*STORAGE, "v1")
        assert (await custom.list_cluster_custom_object(*STORAGE))["items"] == []


async def test_bad_patches_are_400(core: client.CoreV1Api,
                                   custom: client.CustomObjectsApi, ns: str) -> None:
    """Mistakes the clients make: each answers 400, never 500."""
    async with asyncio.timeout(TEST_SECONDS):
        await custom.create_cluster_custom_object(*STORAGE, volume("vp"))
        # A list body sent as a merge patch.
        assert await api_status(custom.patch_cluster_custom_object(
            *STORAGE, "vp", [{"op": "add", "path": "/metadata/labels", "value": {}}],
            _content_type=MERGE)) == 400
        # A dict body on a custom object: this client picks JSON patch for it.
        assert await api_status(custom.patch_cluster_custom_object(
            *STORAGE, "vp", {"metadata": {"labels": {"a": "b"}}})) == 400
        assert await api_status(custom.patch_cluster_custom_object_status(
            *STORAGE, "vp", {"status": {"phase": "Pending"}})) == 400
        # A JSON patch whose operations are not operations.
        assert await api_status(custom.patch_cluster_custom_object(
            *STORAGE, "vp", [{"op": "frobnicate", "path": "/spec"}])) in (400, 422)
        assert await api_status(custom.patch_cluster_custom_object(
            *STORAGE, "vp", ["not an op"])) in (400, 422)
        # A core kind: a list body as a (strategic) merge patch.
        await core.create_namespaced_config_map(ns, client.V1ConfigMap(
            metadata=meta("bp"), data={"a": "1"}))
        assert await api_status(core.patch_namespaced_config_map(
            "bp", ns, [{"op": "remove", "path": "/data/a"}],
            _content_type="application/strategic-merge-patch+json")) == 400
        assert await api_status(core.patch_namespaced_config_map(
            "bp", ns, [1, 2], _content_type=MERGE)) == 400
        # Nothing changed.
        vol = await custom.get_cluster_custom_object(*STORAGE, "vp")
        assert vol["metadata"].get("labels", {}) == {}
        assert (await core.read_namespaced_config_map("bp", ns)).data == {"a": "1"}


# --- Watches -----------------------------------------------------------------------------

async def test_watch_custom_with_bookmarks(custom: client.CustomObjectsApi) -> None:
    listed = await custom.list_cluster_custom_object(*STORAGE)
    rv = listed["metadata"]["resourceVersion"]

    async def writes() -> None:
        await custom.create_cluster_custom_object(*STORAGE, volume("w1", w="1"))
        await custom.create_cluster_custom_object(*STORAGE, volume("noise"))
        await custom.patch_cluster_custom_object(*STORAGE, "w1", {"spec": {"mode": "Block"}},
                                                 _content_type=MERGE)
        await custom.patch_cluster_custom_object_status(
            *STORAGE, "w1", {"status": {"phase": "Pending"}}, _content_type=MERGE)
        await custom.delete_cluster_custom_object(*STORAGE, "w1")

    writer = asyncio.create_task(writes())
    w = watch.Watch()
    events = await collect(w.stream(custom.list_cluster_custom_object, *STORAGE,
                                    resource_version=rv, label_selector="w=1",
                                    allow_watch_bookmarks=True,
                                    timeout_seconds=WATCH_SECONDS), is_deleted)
    async with asyncio.timeout(TEST_SECONDS):
        await writer
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "MODIFIED", "DELETED"]
    assert {e["object"]["metadata"]["name"] for e in events} == {"w1"}
    assert events[1]["object"]["spec"]["mode"] == "Block"
    assert events[2]["object"]["status"]["phase"] == "Pending"


async def test_watch_bookmark_shape(custom: client.CustomObjectsApi) -> None:
    """Bookmarks, if the server sends any, carry a resourceVersion (the client needs it)."""
    rv = (await custom.list_cluster_custom_object(*LOCKS))["metadata"]["resourceVersion"]
    w = watch.Watch()
    seen: list[Obj] = []
    async with asyncio.timeout(TEST_SECONDS):
        async for event in w.stream(custom.list_cluster_custom_object, *LOCKS,
                                    resource_version=rv, allow_watch_bookmarks=True,
                                    timeout_seconds=1):
            seen.append(event)
    await w.close()
    assert all(e["type"] == "BOOKMARK" for e in seen)
    for e in seen:
        assert e["raw_object"]["metadata"]["resourceVersion"]
        assert e["raw_object"]["kind"] == "NodeWorkloadLock"


async def test_watch_pods_typed(core: client.CoreV1Api, ns: str) -> None:
    rv = (await core.list_namespaced_pod(ns)).metadata.resource_version

    async def writes() -> None:
        for name, node in (("a", "n1"), ("b", "n2")):
            await core.create_namespaced_pod(ns, client.V1Pod(
                metadata=meta(name), spec=client.V1PodSpec(node_name=node, containers=[
                    client.V1Container(name="c", image="img")])))
        await core.patch_namespaced_pod("b", ns, {"metadata": {"labels": {"x": "y"}}})
        await core.patch_namespaced_pod_status("b", ns,
                                               {"status": {"phase": "Running"}})
        await core.delete_namespaced_pod("b", ns, grace_period_seconds=0)

    writer = asyncio.create_task(writes())
    w = watch.Watch()
    events = await collect(w.stream(core.list_namespaced_pod, ns, resource_version=rv,
                                    field_selector="spec.nodeName=n2",
                                    allow_watch_bookmarks=True,
                                    timeout_seconds=WATCH_SECONDS), is_deleted)
    async with asyncio.timeout(TEST_SECONDS):
        await writer
    assert all(isinstance(e["object"], client.V1Pod) for e in events)
    assert {e["object"].metadata.name for e in events} == {"b"}
    assert events[0]["type"] == "ADDED" and events[-1]["type"] == "DELETED"
    assert [e["type"] for e in events[1:-1]] == ["MODIFIED"] * (len(events) - 2)
    assert events[1]["object"].metadata.labels == {"x": "y"}
    assert any(e["object"].status and e["object"].status.phase == "Running" for e in events)


async def test_watch_resumes_from_resource_version(custom: client.CustomObjectsApi,
                                                   ns: str) -> None:
    """A watch restarted from an event's resourceVersion sees only what came after it."""
    async with asyncio.timeout(TEST_SECONDS):
        rv0 = (await custom.list_namespaced_custom_object(
            *BMH_GV, ns, BMH))["metadata"]["resourceVersion"]
        for i in range(4):
            await custom.create_namespaced_custom_object(*BMH_GV, ns, BMH, bmh(f"r{i}", ns))

    w = watch.Watch()
    first = await collect(w.stream(custom.list_namespaced_custom_object, *BMH_GV, ns,
                                   BMH, resource_version=rv0, allow_watch_bookmarks=True,
                                   timeout_seconds=WATCH_SECONDS),
                          lambda e: e["object"]["metadata"]["name"] == "r1")
    assert [e["object"]["metadata"]["name"] for e in first] == ["r0", "r1"]
    resume_rv = first[-1]["object"]["metadata"]["resourceVersion"]
    assert w.resource_version == resume_rv

    async with asyncio.timeout(TEST_SECONDS):
        await custom.delete_namespaced_custom_object(*BMH_GV, ns, BMH, "r0")
    w2 = watch.Watch()
    rest = await collect(w2.stream(custom.list_namespaced_custom_object, *BMH_GV, ns,
                                   BMH, resource_version=resume_rv, allow_watch_bookmarks=True,
                                   timeout_seconds=WATCH_SECONDS), is_deleted)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in rest] == [
        ("ADDED", "r2"), ("ADDED", "r3"), ("DELETED", "r0")]

    # Without a resourceVersion a watch starts with the current state (ADDED per object).
    w3 = watch.Watch()
    initial = await collect(w3.stream(custom.list_namespaced_custom_object, *BMH_GV, ns,
                                      BMH, timeout_seconds=WATCH_SECONDS),
                            lambda e: e["object"]["metadata"]["name"] == "r3")
    assert sorted(e["object"]["metadata"]["name"] for e in initial) == ["r1", "r2", "r3"]
    assert {e["type"] for e in initial} == {"ADDED"}


async def test_watch_from_too_old_resource_version(tmp_path: Path) -> None:
    """A resourceVersion compacted out of the event log: 410 Gone (an ERROR event or
    the status of the request), which the client raises as ApiException."""
    async with serving(tmp_path / "small-log", event_log_size=10) as server:
        api_client = await config.new_client_from_config(
            config_file=str(server.kubeconfig_path), persist_config=False)
        custom = client.CustomObjectsApi(api_client)
        try:
            async with asyncio.timeout(TEST_SECONDS):
                rv0 = (await custom.list_cluster_custom_object(
                    *LOCKS))["metadata"]["resourceVersion"]
                for i in range(25):
                    await custom.create_cluster_custom_object(*STORAGE, volume(f"old-{i}"))
            w = watch.Watch()
            with pytest.raises(ApiException) as exc:
                await collect(w.stream(custom.list_cluster_custom_object, *LOCKS,
                                       resource_version=rv0, timeout_seconds=WATCH_SECONDS),
                              is_deleted)
            assert exc.value.status == 410
            await w.close()
            # A fresh list gives a resourceVersion to watch from again.
            rv1 = (await custom.list_cluster_custom_object(*LOCKS))["metadata"][
                "resourceVersion"]
            w = watch.Watch()
            events = await collect(w.stream(custom.list_cluster_custom_object, *LOCKS,
                                            resource_version=rv1, timeout_seconds=1),
                                   is_deleted)
            assert events == []
        finally:
            await api_client.close()


# --- Watch replay: the state at the resourceVersion, not the current one -----------------

async def _replay(custom: client.CustomObjectsApi, ns: str, rv: str,
                  **kwargs: str) -> list[tuple[str, str]]:
    w = watch.Watch()
    seen: list[tuple[str, str]] = []
    async with asyncio.timeout(TEST_SECONDS):
        async for event in w.stream(custom.list_namespaced_custom_object, *BMH_GV, ns,
                                    BMH, resource_version=rv, timeout_seconds=1, **kwargs):
            if event["type"] != "BOOKMARK":
                seen.append((event["type"], event["object"]["metadata"]["name"]))
    await w.close()
    return seen


async def test_watch_replay_of_deleted_object_is_modified(
        custom: client.CustomObjectsApi, ns: str) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        obj = await custom.create_namespaced_custom_object(*BMH_GV, ns, BMH, bmh("x", ns))
        rv = obj["metadata"]["resourceVersion"]
        await custom.patch_namespaced_custom_object(
            *BMH_GV, ns, BMH, "x", {"metadata": {"annotations": {"a": "1"}}},
            _content_type=MERGE)
        await custom.delete_namespaced_custom_object(*BMH_GV, ns, BMH, "x")
    assert await _replay(custom, ns, rv) == [("MODIFIED", "x"), ("DELETED", "x")]


async def test_watch_replay_with_selector_uses_state_at_rv(
        custom: client.CustomObjectsApi, ns: str) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        x = await custom.create_namespaced_custom_object(*BMH_GV, ns, BMH,
                                                         bmh("x", ns, sel="1"))
        await custom.patch_namespaced_custom_object(
            *BMH_GV, ns, BMH, "x", {"metadata": {"labels": {"sel": "2"}}},
            _content_type=MERGE)
        y = await custom.create_namespaced_custom_object(*BMH_GV, ns, BMH,
                                                         bmh("y", ns, sel="2"))
        await custom.patch_namespaced_custom_object(
            *BMH_GV, ns, BMH, "y", {"metadata": {"labels": {"sel": "1"}}},
            _content_type=MERGE)
    # x leaves the selection, y enters it.
    assert await _replay(custom, ns, x["metadata"]["resourceVersion"], label_selector="sel=1") \
        == [("DELETED", "x"), ("ADDED", "y")]
    assert await _replay(custom, ns, y["metadata"]["resourceVersion"], label_selector="sel=1") \
        == [("ADDED", "y")]


# --- Finalizers, the way kopf does them ---------------------------------------------------

async def test_kopf_style_finalizer(custom: client.CustomObjectsApi, ns: str) -> None:
    events: list[Obj] = []
    arrived = asyncio.Condition()

    async def watcher(rv: str) -> None:
        w = watch.Watch()
        async for event in w.stream(custom.list_namespaced_custom_object, *BMH_GV, ns,
                                    BMH, resource_version=rv, allow_watch_bookmarks=True,
                                    timeout_seconds=WATCH_SECONDS):
            if event["type"] == "BOOKMARK":
                continue
            async with arrived:
                events.append(event)
                arrived.notify_all()
            if event["type"] == "DELETED":
                break
        await w.close()

    async def wait_for(count: int) -> None:
        async with arrived:
            await arrived.wait_for(lambda: len(events) >= count)

    async with asyncio.timeout(TEST_SECONDS):
        obj = await custom.create_namespaced_custom_object(*BMH_GV, ns, BMH, bmh("fin", ns))
        rv = obj["metadata"]["resourceVersion"]
        task = asyncio.create_task(watcher(rv))

        # Add the finalizer with a JSON patch guarded by a test of resourceVersion.
        with_fin = await custom.patch_namespaced_custom_object(*BMH_GV, ns, BMH, "fin", [
            {"op": "test", "path": "/metadata/resourceVersion", "value": rv},
            {"op": "add", "path": "/metadata/finalizers", "value": [FINALIZER]}])
        assert with_fin["metadata"]["finalizers"] == [FINALIZER]
        await wait_for(1)  # the watch is connected and the object exists
        # The same guarded patch again: the resourceVersion moved on, so the test fails.
        stale = await api_status(custom.patch_namespaced_custom_object(
            *BMH_GV, ns, BMH, "fin", [
                {"op": "test", "path": "/metadata/resourceVersion", "value": rv},
                {"op": "add", "path": "/metadata/finalizers/-", "value": "other"}]))
        assert stale == 422  # as kube-apiserver: a failed JSON patch is Unprocessable

        # DELETE with a finalizer: the object stays, marked for deletion.
        answer = await custom.delete_namespaced_custom_object(*BMH_GV, ns, BMH, "fin")
        assert answer["metadata"]["deletionTimestamp"]
        await wait_for(2)
        got = await custom.get_namespaced_custom_object(*BMH_GV, ns, BMH, "fin")
        assert got["metadata"]["deletionTimestamp"] == answer["metadata"]["deletionTimestamp"]
        assert got["metadata"]["finalizers"] == [FINALIZER]
        # A second DELETE changes nothing; no new finalizer may be added now.
        again = await custom.delete_namespaced_custom_object(*BMH_GV, ns, BMH, "fin")
        assert again["metadata"]["deletionTimestamp"] == got["metadata"]["deletionTimestamp"]
        assert await api_status(custom.patch_namespaced_custom_object(
            *BMH_GV, ns, BMH, "fin",
            {"metadata": {"finalizers": [FINALIZER, "late"]}}, _content_type=MERGE)) == 422
        # kopf records progress in annotations meanwhile (merge patch).
        noted = await custom.patch_namespaced_custom_object(
            *BMH_GV, ns, BMH, "fin",
            {"metadata": {"annotations": {"kopf.zalando.org/last-handled": "{}"}}},
            _content_type=MERGE)
        assert noted["metadata"]["deletionTimestamp"]

        # The handler is done: remove the finalizer, guarded again.
        rv = noted["metadata"]["resourceVersion"]
        await custom.patch_namespaced_custom_object(*BMH_GV, ns, BMH, "fin", [
            {"op": "test", "path": "/metadata/resourceVersion", "value": rv},
            {"op": "remove", "path": "/metadata/finalizers/0"}])
        assert await api_status(custom.get_namespaced_custom_object(
            *BMH_GV, ns, BMH, "fin")) == 404
        await task

    kinds = [e["type"] for e in events]
    assert kinds[0] == "MODIFIED" and kinds[-1] == "DELETED"
    assert set(kinds[1:-1]) == {"MODIFIED"}
    assert events[0]["object"]["metadata"]["finalizers"] == [FINALIZER]
    assert "deletionTimestamp" not in events[0]["object"]["metadata"]
    marked = [e for e in events if e["object"]["metadata"].get("deletionTimestamp")]
    assert marked[0] is events[1]
    assert marked[0]["object"]["metadata"]["finalizers"] == [FINALIZER]
    # As in kube-apiserver, DELETED carries the last stored state (the update that
    # emptied the finalizers turns into the deletion and is not stored itself).
    assert events[-1]["object"]["metadata"]["deletionTimestamp"]


async def test_finalizer_release_seen_live(custom: client.CustomObjectsApi) -> None:
    """The same dance, with the watch running while an operator task reacts to it."""
    async with asyncio.timeout(TEST_SECONDS):
        vol = volume("fin-live", live="1")
        vol["metadata"]["finalizers"] = [FINALIZER]
        await custom.create_cluster_custom_object(*STORAGE, vol)
        rv = (await custom.list_cluster_custom_object(
            *STORAGE, label_selector="live=1"))["metadata"]["resourceVersion"]

    w = watch.Watch()
    seen: list[str] = []
    async with asyncio.timeout(TEST_SECONDS):
        deleter = asyncio.create_task(custom.delete_cluster_custom_object(*STORAGE, "fin-live"))
        async for event in w.stream(custom.list_cluster_custom_object, *STORAGE,
                                    resource_version=rv, label_selector="live=1",
                                    allow_watch_bookmarks=True, timeout_seconds=WATCH_SECONDS):
            if event["type"] == "BOOKMARK":
                continue
            seen.append(event["type"])
            md = event["object"]["metadata"]
            if event["type"] == "MODIFIED" and md.get("deletionTimestamp") \
                    and md.get("finalizers"):
                await custom.patch_cluster_custom_object(*STORAGE, "fin-live", [
                    {"op": "test", "path": "/metadata/resourceVersion",
                     "value": md["resourceVersion"]},
                    {"op": "remove", "path": "/metadata/finalizers"}])
            if event["type"] == "DELETED":
                w.stop()
                break
        await w.close()
        await deleter
    assert seen == ["MODIFIED", "DELETED"]

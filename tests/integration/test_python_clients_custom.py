"""The official ``kubernetes`` client (sync) against a real ``racksmith
apiserver`` process: ``CustomObjectsApi`` CRUD of Racksmith kinds (cluster
scoped and namespaced, with a status subresource) and ``kubernetes.watch``
streams of custom and core objects written by another thread.

Every watch starts from the resourceVersion of a list, so the writer thread
may run before or after the stream connects: the events are the same.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

Obj = dict[str, Any]

STORAGE = ("storage.racksmith.io", "v1alpha1", "volumes")
LOCKS = ("lcm.racksmith.io", "v1alpha1", "nodeworkloadlocks")
BMH = ("metal3.io", "v1alpha1", "baremetalhosts")
WATCH_SECONDS = 10  # server-side bound of each watch
pytestmark = pytest.mark.usefixtures("server_process_clean")

REQUEST_TIMEOUT = 30  # client-side bound of each request


@pytest.fixture(scope="module")
def custom(official_api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(official_api)


@pytest.fixture(scope="module")
def core(official_api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(official_api)


def volume(name: str, node: str = "node-1", **labels: str) -> Obj:
    return {"apiVersion": "storage.racksmith.io/v1alpha1", "kind": "Volume",
            "metadata": {"name": name, "labels": labels},
            "spec": {"nodeName": node, "storageClassName": "local",
                     "sparseLoopDevice": {"size": "1Gi"}}}


def lock(name: str, node: str, controller: str = "ceph") -> Obj:
    return {"apiVersion": "lcm.racksmith.io/v1alpha1", "kind": "NodeWorkloadLock",
            "metadata": {"name": name},
            "spec": {"controllerName": controller, "nodeName": node}}


def bmh(name: str, namespace: str, **labels: str) -> Obj:
    return {"apiVersion": "metal3.io/v1alpha1", "kind": "BareMetalHost",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"bmc": {"address": f"redfish://127.0.0.1:8000/{name}",
                             "credentialsName": f"{name}-bmc"},
                     "bootMACAddress": "52:54:00:00:00:01", "online": True}}


def make_namespace(core: client.CoreV1Api, name: str) -> str:
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    return name


def api_status(call: Callable[[], object]) -> int:
    with pytest.raises(ApiException) as exc:
        call()
    return int(exc.value.status)


def run_thread(target: Callable[[], None]) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def wrapped() -> None:
        try:
            target()
        except BaseException as exc:  # reported by the test
            errors.append(exc)

    thread = threading.Thread(target=wrapped, daemon=True)
    thread.start()
    return thread, errors


def collect(stream: Iterator[Obj], w: watch.Watch, until: Callable[[Obj], bool]) -> list[Obj]:
    """Events of ``stream`` up to the first one ``until`` accepts (or the timeout)."""
    events: list[Obj] = []
    for event in stream:
        events.append(event)
        if until(event):
            w.stop()
            break
    return events


# --- CRUD: cluster-scoped Volume ----------------------------------------------------------

def test_volume_crud(custom: client.CustomObjectsApi) -> None:
    created = custom.create_cluster_custom_object(*STORAGE, volume("vol-a", team="x"))
    assert created["metadata"]["uid"]
    assert created["metadata"]["resourceVersion"]
    assert created["spec"]["mode"] == "Filesystem"  # schema default
    assert "namespace" not in created["metadata"]

    got = custom.get_cluster_custom_object(*STORAGE, "vol-a")
    assert got["spec"]["sparseLoopDevice"] == {"size": "1Gi"}
    assert got["kind"] == "Volume"
    assert got["apiVersion"] == "storage.racksmith.io/v1alpha1"
    generation = got["metadata"]["generation"]

    custom.create_cluster_custom_object(*STORAGE, volume("vol-b", node="node-2", team="y"))
    listed = custom.list_cluster_custom_object(*STORAGE, label_selector="team=x")
    assert [v["metadata"]["name"] for v in listed["items"]] == ["vol-a"]
    assert listed["kind"] == "VolumeList"
    on_node2 = custom.list_cluster_custom_object(*STORAGE, field_selector="spec.nodeName=node-2")
    assert [v["metadata"]["name"] for v in on_node2["items"]] == ["vol-b"]

    # Merge patch (the client's content type for a dict body on custom objects).
    patched = custom.patch_cluster_custom_object(*STORAGE, "vol-a", {
        "metadata": {"labels": {"team": None, "tier": "gold"}},
        "spec": {"template": {"metadata": {"labels": {"a": "b"}}}}})
    assert patched["metadata"]["labels"] == {"tier": "gold"}
    assert patched["spec"]["template"] == {"metadata": {"labels": {"a": "b"}}}
    assert patched["metadata"]["generation"] == generation + 1

    # Replace with the current resourceVersion, then again with the stale one.
    stale_rv = patched["metadata"]["resourceVersion"]
    patched["spec"]["storageClassName"] = "local-2"
    replaced = custom.replace_cluster_custom_object(*STORAGE, "vol-a", patched)
    assert replaced["spec"]["storageClassName"] == "local-2"
    assert replaced["metadata"]["resourceVersion"] != stale_rv
    patched["spec"]["storageClassName"] = "local-3"
    with pytest.raises(ApiException) as exc:
        custom.replace_cluster_custom_object(*STORAGE, "vol-a", patched)
    assert exc.value.status == 409
    assert '"reason":"Conflict"' in exc.value.body.replace(" ", "")

    custom.delete_cluster_custom_object(*STORAGE, "vol-a")
    custom.delete_cluster_custom_object(*STORAGE, "vol-b")
    assert api_status(lambda: custom.get_cluster_custom_object(*STORAGE, "vol-a")) == 404
    assert api_status(lambda: custom.delete_cluster_custom_object(*STORAGE, "vol-a")) == 404
    assert custom.list_cluster_custom_object(*STORAGE)["items"] == []


def test_schema_validation_errors(custom: client.CustomObjectsApi) -> None:
    missing = volume("vol-bad")
    del missing["spec"]["nodeName"]
    with pytest.raises(ApiException) as exc:
        custom.create_cluster_custom_object(*STORAGE, missing)
    assert exc.value.status == 422
    assert "nodeName" in exc.value.body

    two_backends = volume("vol-two")
    two_backends["spec"]["rawBlockDevice"] = {"devicePath": "/dev/sdb"}
    assert api_status(lambda: custom.create_cluster_custom_object(*STORAGE, two_backends)) \
        == 422

    bad_enum = volume("vol-enum")
    bad_enum["spec"]["mode"] = "Tape"
    assert api_status(lambda: custom.create_cluster_custom_object(*STORAGE, bad_enum)) == 422
    assert custom.list_cluster_custom_object(*STORAGE)["items"] == []


def test_unknown_custom_resource_is_404(custom: client.CustomObjectsApi) -> None:
    status = api_status(lambda: custom.list_cluster_custom_object(
        "storage.racksmith.io", "v1alpha1", "nosuchthings"))
    assert status == 404


# --- Status subresource: NodeWorkloadLock --------------------------------------------------

def test_lock_status_subresource(custom: client.CustomObjectsApi) -> None:
    body = lock("ceph-node-1", "node-1")
    body["status"] = {"state": "failed"}  # status is not set through the main resource
    created = custom.create_cluster_custom_object(*LOCKS, body)
    assert created.get("status", {}).get("state") != "failed"
    generation = created["metadata"]["generation"]

    after = custom.patch_cluster_custom_object_status(*LOCKS, "ceph-node-1", {"status": {
        "state": "inactive", "release": "r2",
        "inactivationProgress": {"description": "draining", "percentage": 50}}})
    assert after["status"]["state"] == "inactive"
    assert after["status"]["inactivationProgress"]["percentage"] == 50
    assert after["metadata"]["generation"] == generation  # status does not bump it

    got = custom.get_cluster_custom_object_status(*LOCKS, "ceph-node-1")
    assert got["status"]["release"] == "r2"
    assert got["spec"]["nodeName"] == "node-1"

    # The status endpoint ignores spec; the main endpoint ignores status.
    after = custom.patch_cluster_custom_object_status(*LOCKS, "ceph-node-1", {
        "spec": {"nodeName": "node-9"}, "status": {"state": "failed", "errorMessage": "x"}})
    assert after["spec"]["nodeName"] == "node-1"
    assert after["status"]["state"] == "failed"
    after = custom.patch_cluster_custom_object(*LOCKS, "ceph-node-1", {
        "spec": {"nodeDeletionRequestSupported": True}, "status": {"state": "active"}})
    assert after["status"]["state"] == "failed"
    assert after["spec"]["nodeDeletionRequestSupported"] is True
    assert after["metadata"]["generation"] == generation + 1

    # replace_..._status with a stale resourceVersion conflicts.
    stale = dict(got)
    stale["status"] = {"state": "active"}
    assert api_status(lambda: custom.replace_cluster_custom_object_status(
        *LOCKS, "ceph-node-1", stale)) == 409
    current = custom.get_cluster_custom_object(*LOCKS, "ceph-node-1")
    current["status"] = {"state": "active"}
    replaced = custom.replace_cluster_custom_object_status(*LOCKS, "ceph-node-1", current)
    assert replaced["status"] == {"state": "active"}

    # Status is validated against the schema too.
    assert api_status(lambda: custom.patch_cluster_custom_object_status(
        *LOCKS, "ceph-node-1", {"status": {"state": "bogus"}})) == 422

    custom.create_cluster_custom_object(*LOCKS, lock("ceph-node-2", "node-2"))
    by_node = custom.list_cluster_custom_object(*LOCKS, field_selector="spec.nodeName=node-2")
    assert [o["metadata"]["name"] for o in by_node["items"]] == ["ceph-node-2"]
    custom.delete_collection_cluster_custom_object(*LOCKS)
    assert custom.list_cluster_custom_object(*LOCKS)["items"] == []


# --- Namespaced: BareMetalHost -----------------------------------------------------------

def test_baremetalhost_namespaced_crud(core: client.CoreV1Api,
                                       custom: client.CustomObjectsApi) -> None:
    ns1 = make_namespace(core, "metal-a")
    ns2 = make_namespace(core, "metal-b")
    created = custom.create_namespaced_custom_object(*BMH[:2], ns1, BMH[2],
                                                     bmh("host-1", ns1, rack="r1"))
    assert created["metadata"]["namespace"] == ns1
    assert created["spec"]["bootMode"] == "UEFI"  # schema default
    custom.create_namespaced_custom_object(*BMH[:2], ns1, BMH[2], bmh("host-2", ns1, rack="r2"))
    custom.create_namespaced_custom_object(*BMH[:2], ns2, BMH[2], bmh("host-1", ns2, rack="r1"))

    got = custom.get_namespaced_custom_object(*BMH[:2], ns1, BMH[2], "host-1")
    assert got["spec"]["bmc"]["credentialsName"] == "host-1-bmc"
    assert api_status(lambda: custom.get_namespaced_custom_object(
        *BMH[:2], "default", BMH[2], "host-1")) == 404

    in_ns1 = custom.list_namespaced_custom_object(*BMH[:2], ns1, BMH[2])
    assert sorted(o["metadata"]["name"] for o in in_ns1["items"]) == ["host-1", "host-2"]
    everywhere = custom.list_cluster_custom_object(*BMH, label_selector="rack=r1")
    assert sorted((o["metadata"]["namespace"], o["metadata"]["name"])
                  for o in everywhere["items"]) == [(ns1, "host-1"), (ns2, "host-1")]
    sel = custom.list_namespaced_custom_object(*BMH[:2], ns1, BMH[2],
                                               label_selector="rack in (r2,r3)")
    assert [o["metadata"]["name"] for o in sel["items"]] == ["host-2"]

    # An explicit JSON patch (the sync client sends merge patch unless told).
    patched = custom.patch_namespaced_custom_object(
        *BMH[:2], ns1, BMH[2], "host-1",
        [{"op": "test", "path": "/spec/online", "value": True},
         {"op": "replace", "path": "/spec/online", "value": False},
         {"op": "add", "path": "/metadata/annotations", "value": {"note": "off"}}],
        _content_type="application/json-patch+json")
    assert patched["spec"]["online"] is False
    assert patched["metadata"]["annotations"] == {"note": "off"}
    failed_test = [{"op": "test", "path": "/spec/online", "value": True},
                   {"op": "replace", "path": "/spec/online", "value": True}]
    status = api_status(lambda: custom.patch_namespaced_custom_object(
        *BMH[:2], ns1, BMH[2], "host-1", failed_test,
        _content_type="application/json-patch+json"))
    assert status == 422  # as kube-apiserver: a failed JSON patch is Unprocessable

    # A list body sent as a merge patch is the client's mistake: 400, not 500.
    status = api_status(lambda: custom.patch_namespaced_custom_object(
        *BMH[:2], ns1, BMH[2], "host-1", [{"op": "remove", "path": "/spec/online"}]))
    assert status == 400
    # Strategic merge patch is not defined for custom resources: 415.
    status = api_status(lambda: custom.patch_namespaced_custom_object(
        *BMH[:2], ns1, BMH[2], "host-1", {"spec": {"online": True}},
        _content_type="application/strategic-merge-patch+json"))
    assert status == 415

    custom.patch_namespaced_custom_object_status(*BMH[:2], ns1, BMH[2], "host-1", {
        "status": {"poweredOn": True}})
    assert custom.get_namespaced_custom_object_status(
        *BMH[:2], ns1, BMH[2], "host-1")["status"]["poweredOn"] is True

    custom.delete_namespaced_custom_object(*BMH[:2], ns1, BMH[2], "host-1")
    left = custom.list_cluster_custom_object(*BMH)
    assert sorted((o["metadata"]["namespace"], o["metadata"]["name"])
                  for o in left["items"]) == [(ns1, "host-2"), (ns2, "host-1")]


def test_custom_list_paging(core: client.CoreV1Api, custom: client.CustomObjectsApi) -> None:
    ns = make_namespace(core, "metal-paging")
    for i in range(5):
        custom.create_namespaced_custom_object(*BMH[:2], ns, BMH[2], bmh(f"h{i}", ns))
    seen: list[str] = []
    token: str | None = None
    for _ in range(10):
        page = custom.list_namespaced_custom_object(*BMH[:2], ns, BMH[2], limit=2,
                                                    _continue=token)
        assert len(page["items"]) <= 2
        seen += [o["metadata"]["name"] for o in page["items"]]
        token = page["metadata"].get("continue")
        if not token:
            break
    assert sorted(seen) == [f"h{i}" for i in range(5)]
    assert len(seen) == 5


# --- Watches -----------------------------------------------------------------------------

def test_watch_custom_objects(custom: client.CustomObjectsApi) -> None:
    listed = custom.list_cluster_custom_object(*STORAGE)
    rv = listed["metadata"]["resourceVersion"]

    def writes() -> None:
        custom.create_cluster_custom_object(*STORAGE, volume("vol-w", watched="yes"))
        custom.create_cluster_custom_object(*STORAGE, volume("vol-other"))
        custom.patch_cluster_custom_object(*STORAGE, "vol-w", {"spec": {"mode": "Block"}})
        custom.patch_cluster_custom_object_status(*STORAGE, "vol-w", {"status": {
            "phase": "Available", "size": "1Gi"}})
        custom.delete_cluster_custom_object(*STORAGE, "vol-w")

    thread, errors = run_thread(writes)
    w = watch.Watch()
    stream = w.stream(custom.list_cluster_custom_object, *STORAGE, resource_version=rv,
                      label_selector="watched=yes", timeout_seconds=WATCH_SECONDS,
                      _request_timeout=REQUEST_TIMEOUT)
    events = collect(stream, w, lambda e: e["type"] == "DELETED")
    thread.join(REQUEST_TIMEOUT)
    assert not errors
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "MODIFIED", "DELETED"]
    assert all(e["object"]["metadata"]["name"] == "vol-w" for e in events)
    assert events[1]["object"]["spec"]["mode"] == "Block"
    assert events[2]["object"]["status"]["phase"] == "Available"
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(rvs) and len(set(rvs[:3])) == 3
    assert w.resource_version == events[-1]["object"]["metadata"]["resourceVersion"]
    custom.delete_cluster_custom_object(*STORAGE, "vol-other")


def test_watch_namespaced_custom_objects_with_field_selector(
        core: client.CoreV1Api, custom: client.CustomObjectsApi) -> None:
    ns = make_namespace(core, "metal-watch")
    rv = custom.list_namespaced_custom_object(*BMH[:2], ns, BMH[2])["metadata"]["resourceVersion"]

    def writes() -> None:
        custom.create_namespaced_custom_object(*BMH[:2], ns, BMH[2], bmh("a", ns))
        custom.create_namespaced_custom_object(*BMH[:2], ns, BMH[2], bmh("b", ns))
        custom.patch_namespaced_custom_object(*BMH[:2], ns, BMH[2], "b",
                                              {"metadata": {"labels": {"seen": "1"}}})
        custom.delete_namespaced_custom_object(*BMH[:2], ns, BMH[2], "a")
        custom.delete_namespaced_custom_object(*BMH[:2], ns, BMH[2], "b")

    thread, errors = run_thread(writes)
    w = watch.Watch()
    stream = w.stream(custom.list_namespaced_custom_object, *BMH[:2], ns, BMH[2],
                      resource_version=rv, field_selector="metadata.name=b",
                      timeout_seconds=WATCH_SECONDS, _request_timeout=REQUEST_TIMEOUT)
    events = collect(stream, w, lambda e: e["type"] == "DELETED")
    thread.join(REQUEST_TIMEOUT)
    assert not errors
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "b"), ("MODIFIED", "b"), ("DELETED", "b")]
    assert events[1]["object"]["metadata"]["labels"] == {"seen": "1"}


def test_watch_core_objects_typed(core: client.CoreV1Api) -> None:
    ns = make_namespace(core, "watch-core")
    rv = core.list_namespaced_config_map(ns).metadata.resource_version

    def writes() -> None:
        core.create_namespaced_config_map(ns, client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name="cfg", labels={"w": "1"}), data={"k": "v1"}))
        core.patch_namespaced_config_map("cfg", ns, {"data": {"k": "v2"}})
        core.delete_namespaced_config_map("cfg", ns)

    thread, errors = run_thread(writes)
    w = watch.Watch()
    stream = w.stream(core.list_namespaced_config_map, ns, resource_version=rv,
                      label_selector="w=1", timeout_seconds=WATCH_SECONDS,
                      _request_timeout=REQUEST_TIMEOUT)
    events = collect(stream, w, lambda e: e["type"] == "DELETED")
    thread.join(REQUEST_TIMEOUT)
    assert not errors
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED"]
    assert all(isinstance(e["object"], client.V1ConfigMap) for e in events)
    assert [e["object"].data["k"] for e in events] == ["v1", "v2", "v2"]


def test_watch_pods_on_a_node(core: client.CoreV1Api) -> None:
    """What a node agent does: watch the pods bound to its node, across namespaces."""
    ns = make_namespace(core, "watch-pods")
    rv = core.list_pod_for_all_namespaces(
        field_selector="spec.nodeName=node-w").metadata.resource_version

    def pod(name: str, node: str) -> client.V1Pod:
        return client.V1Pod(metadata=client.V1ObjectMeta(name=name),
                            spec=client.V1PodSpec(node_name=node, containers=[
                                client.V1Container(name="c", image="img")]))

    def writes() -> None:
        core.create_namespaced_pod(ns, pod("elsewhere", "node-x"))
        core.create_namespaced_pod(ns, pod("mine", "node-w"))
        core.patch_namespaced_pod_status("mine", ns, {"status": {"phase": "Running"}})
        core.delete_namespaced_pod("mine", ns, grace_period_seconds=0)

    thread, errors = run_thread(writes)
    w = watch.Watch()
    stream = w.stream(core.list_pod_for_all_namespaces, field_selector="spec.nodeName=node-w",
                      resource_version=rv, timeout_seconds=WATCH_SECONDS,
                      _request_timeout=REQUEST_TIMEOUT)
    events = collect(stream, w, lambda e: e["type"] == "DELETED")
    thread.join(REQUEST_TIMEOUT)
    assert not errors
    assert all(isinstance(e["object"], client.V1Pod) for e in events)
    assert [e["object"].metadata.name for e in events] == ["mine"] * len(events)
    assert events[0]["type"] == "ADDED" and events[-1]["type"] == "DELETED"
    assert any(e["object"].status is not None and e["object"].status.phase == "Running"
               for e in events)


def test_watch_ends_at_timeout(custom: client.CustomObjectsApi) -> None:
    """A quiet watch with timeoutSeconds ends by itself (the stream closes)."""
    rv = custom.list_cluster_custom_object(*LOCKS)["metadata"]["resourceVersion"]
    w = watch.Watch()
    events = list(w.stream(custom.list_cluster_custom_object, *LOCKS, resource_version=rv,
                           timeout_seconds=1, _request_timeout=REQUEST_TIMEOUT))
    assert [e for e in events if e["type"] != "BOOKMARK"] == []

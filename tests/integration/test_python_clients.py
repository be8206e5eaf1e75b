"""The official ``kubernetes`` client (sync, typed models) against a real
``racksmith apiserver`` process: CRUD of the built-in (core subset) kinds.

Typed reads prove the server's objects deserialize: the client's models
reject objects that miss required fields. Custom objects and watches are in
``test_python_clients_custom.py``; ``kubernetes_asyncio`` is in
``test_python_clients_async.py``.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

pytestmark = pytest.mark.usefixtures("server_process_clean")

TIMEOUT = 20  # client-side bound on each request, seconds


@pytest.fixture(scope="module")
def core(official_api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(official_api)


def meta(name: str, namespace: str | None = None, **labels: str) -> client.V1ObjectMeta:
    return client.V1ObjectMeta(name=name, namespace=namespace, labels=labels or None)


def make_namespace(core: client.CoreV1Api, name: str) -> str:
    core.create_namespace(client.V1Namespace(metadata=meta(name)), _request_timeout=TIMEOUT)
    return name


def status_of(exc: pytest.ExceptionInfo[ApiException]) -> int:
    return int(exc.value.status)


def node_body(name: str) -> client.V1Node:
    return client.V1Node(
        metadata=meta(name, **{"kubernetes.io/hostname": name, "rack": "r1"}),
        spec=client.V1NodeSpec(taints=[client.V1Taint(key="dedicated", value="infra",
                                                      effect="NoSchedule")]),
        status=client.V1NodeStatus(
            addresses=[client.V1NodeAddress(type="InternalIP", address="127.0.0.11"),
                       client.V1NodeAddress(type="Hostname", address=name)],
            capacity={"cpu": "8", "memory": "32Gi", "pods": "110"},
            allocatable={"cpu": "7", "memory": "30Gi", "pods": "110"},
            conditions=[client.V1NodeCondition(
                type="Ready", status="True", reason="KubeletReady",
                message="kubelet is posting ready status",
                last_heartbeat_time=datetime(2025, 1, 1, tzinfo=UTC),
                last_transition_time=datetime(2025, 1, 1, tzinfo=UTC))],
            node_info=client.V1NodeSystemInfo(
                architecture="amd64", boot_id="boot-1",
                container_runtime_version="containerd://1.7.0",
                kernel_version="6.1.0-18-amd64", kube_proxy_version="v1.30.0",
                kubelet_version="v1.30.0", machine_id="machine-1",
                operating_system="linux", os_image="Debian GNU/Linux 12 (bookworm)",
                system_uuid="4c4c4544-0000-0000-0000-000000000001")))


def pod_body(name: str, namespace: str, node: str | None, **labels: str) -> client.V1Pod:
    return client.V1Pod(
        metadata=meta(name, namespace, **labels),
        spec=client.V1PodSpec(node_name=node, containers=[
            client.V1Container(name="main", image="registry.local/app:1",
                               command=["sleep", "infinity"],
                               ports=[client.V1ContainerPort(container_port=8080)])]))


# --- Version -----------------------------------------------------------------------------

def test_version_api(official_api: client.ApiClient) -> None:
    info = client.VersionApi(official_api).get_code()
    assert isinstance(info, client.VersionInfo)
    assert info.major == "1" and info.minor


# --- Namespace ---------------------------------------------------------------------------

def test_namespace_crud(core: client.CoreV1Api) -> None:
    created = core.create_namespace(client.V1Namespace(metadata=meta("ns-crud", team="a")))
    assert isinstance(created, client.V1Namespace)
    assert created.metadata.uid and created.metadata.resource_version
    assert created.metadata.creation_timestamp is not None

    got = core.read_namespace("ns-crud")
    assert got.metadata.labels == {"team": "a"}
    assert got.status is not None and got.status.phase == "Active"

    names = {n.metadata.name for n in core.list_namespace(label_selector="team=a").items}
    assert names == {"ns-crud"}
    assert "default" in {n.metadata.name for n in core.list_namespace().items}

    patched = core.patch_namespace("ns-crud", {"metadata": {"labels": {"team": "b"}}})
    assert patched.metadata.labels == {"team": "b"}

    core.delete_namespace("ns-crud")
    # Namespaces finalize before they vanish: either gone or Terminating.
    try:
        left = core.read_namespace("ns-crud")
    except ApiException as exc:
        assert exc.status == 404
    else:
        assert left.status.phase == "Terminating"
        assert left.metadata.deletion_timestamp is not None


def test_read_missing_is_404(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as exc:
        core.read_namespace("no-such-namespace")
    assert status_of(exc) == 404
    with pytest.raises(ApiException) as exc:
        core.read_namespaced_config_map("nope", "default")
    assert status_of(exc) == 404
    assert '"reason":"NotFound"' in exc.value.body.replace(" ", "")
    with pytest.raises(ApiException) as exc:
        core.delete_namespaced_config_map("nope", "default")
    assert status_of(exc) == 404


def test_create_twice_is_409(core: client.CoreV1Api) -> None:
    ns = make_namespace(core, "ns-dup")
    core.create_namespaced_config_map(ns, client.V1ConfigMap(metadata=meta("cm", ns)))
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_config_map(ns, client.V1ConfigMap(metadata=meta("cm", ns)))
    assert status_of(exc) == 409
    assert "AlreadyExists" in exc.value.body


# --- ConfigMap and Secret -----------------------------------------------------------------

def test_configmap_crud_and_stale_replace(core: client.CoreV1Api) -> None:
    ns = make_namespace(core, "ns-cm")
    cm = core.create_namespaced_config_map(ns, client.V1ConfigMap(
        metadata=meta("settings", ns, app="web"), data={"a": "1", "b": "2"}))
    assert isinstance(cm, client.V1ConfigMap)
    assert cm.data == {"a": "1", "b": "2"}
    stale_rv = cm.metadata.resource_version

    cm.data["c"] = "3"
    replaced = core.replace_namespaced_config_map("settings", ns, cm)
    assert replaced.data == {"a": "1", "b": "2", "c": "3"}
    assert replaced.metadata.resource_version != stale_rv
    assert replaced.metadata.uid == cm.metadata.uid

    # A replace carrying the old resourceVersion conflicts.
    stale = client.V1ConfigMap(metadata=client.V1ObjectMeta(
        name="settings", namespace=ns, resource_version=stale_rv), data={"x": "y"})
    with pytest.raises(ApiException) as exc:
        core.replace_namespaced_config_map("settings", ns, stale)
    assert status_of(exc) == 409
    assert "Conflict" in exc.value.body
    assert core.read_namespaced_config_map("settings", ns).data["c"] == "3"

    # Strategic merge patch (the sync client's choice for a dict body on core kinds).
    patched = core.patch_namespaced_config_map("settings", ns, {"data": {"a": None, "d": "4"}})
    assert patched.data == {"b": "2", "c": "3", "d": "4"}
    # An explicit JSON patch.
    patched = core.patch_namespaced_config_map(
        "settings", ns, [{"op": "replace", "path": "/data/b", "value": "20"}])
    assert patched.data["b"] == "20"

    listed = core.list_namespaced_config_map(ns, label_selector="app=web")
    assert [c.metadata.name for c in listed.items] == ["settings"]
    assert listed.metadata.resource_version

    core.delete_namespaced_config_map("settings", ns)
    with pytest.raises(ApiException) as exc:
        core.read_namespaced_config_map("settings", ns)
    assert status_of(exc) == 404


def test_secret_data_is_base64(core: client.CoreV1Api) -> None:
    ns = make_namespace(core, "ns-secret")
    raw = b"\x00\x01binary\xffpassword"
    created = core.create_namespaced_secret(ns, client.V1Secret(
        metadata=meta("bmc", ns), type="Opaque",
        data={"password": base64.b64encode(raw).decode(),
              "username": base64.b64encode(b"admin").decode()}))
    assert isinstance(created, client.V1Secret)
    got = core.read_namespaced_secret("bmc", ns)
    assert got.type == "Opaque"
    assert base64.b64decode(got.data["password"]) == raw
    assert base64.b64decode(got.data["username"]) == b"admin"

    got.data["token"] = base64.b64encode(b"t0k3n").decode()
    core.replace_namespaced_secret("bmc", ns, got)
    again = core.read_namespaced_secret("bmc", ns)
    assert base64.b64decode(again.data["token"]) == b"t0k3n"
    assert len(core.list_namespaced_secret(ns, field_selector="type=Opaque").items) == 1

    with pytest.raises(ApiException) as exc:
        core.create_namespaced_secret(ns, client.V1Secret(
            metadata=meta("bad", ns), data={"password": "not base64!!"}))
    assert status_of(exc) in (400, 422)
    core.delete_namespaced_secret("bmc", ns)
    assert core.list_namespaced_secret(ns).items == []


def test_secret_string_data_folds_into_data(core: client.CoreV1Api) -> None:
    ns = make_namespace(core, "ns-secret-sd")
    core.create_namespaced_secret(ns, client.V1Secret(
        metadata=meta("creds", ns), data={"a": base64.b64encode(b"1").decode()},
        string_data={"username": "admin", "a": "2"}))
    got = core.read_namespaced_secret("creds", ns)
    assert got.type == "Opaque"
    assert not got.string_data
    assert {k: base64.b64decode(v) for k, v in got.data.items()} == {
        "a": b"2", "username": b"admin"}


def test_delete_answers_status(core: client.CoreV1Api) -> None:
    ns = make_namespace(core, "ns-delete-status")
    core.create_namespaced_config_map(ns, client.V1ConfigMap(metadata=meta("gone", ns)))
    # kubernetes 37 declares this answer as a plain object (dict)
    answer = core.delete_namespaced_config_map("gone", ns)
    assert isinstance(answer, dict)
    assert answer["kind"] == "Status" and answer["status"] == "Success"
    assert answer["details"]["name"] == "gone"


# --- Node --------------------------------------------------------------------------------

def test_node_crud_and_status(core: client.CoreV1Api) -> None:
    created = core.create_node(node_body("node-a"))
    assert isinstance(created, client.V1Node)
    # status given at create is kept for nodes (as a kubelet registers itself).
    info = created.status.node_info
    assert info is not None and info.kubelet_version == "v1.30.0"

    got = core.read_node("node-a")
    assert got.status.node_info.system_uuid == "4c4c4544-0000-0000-0000-000000000001"
    assert {a.type: a.address for a in got.status.addresses} == {
        "InternalIP": "127.0.0.11", "Hostname": "node-a"}
    assert got.status.conditions[0].type == "Ready"
    assert got.status.conditions[0].last_heartbeat_time == datetime(2025, 1, 1, tzinfo=UTC)
    assert got.spec.taints[0].effect == "NoSchedule"

    # replace_node_status changes status only.
    got.status.conditions[0].status = "False"
    got.status.conditions[0].reason = "KubeletNotReady"
    got.metadata.labels["ignored"] = "yes"
    after = core.replace_node_status("node-a", got)
    assert after.status.conditions[0].status == "False"
    assert "ignored" not in after.metadata.labels

    # patch_node_status (strategic merge: conditions merge by type).
    patched = core.patch_node_status("node-a", {"status": {"conditions": [
        {"type": "Ready", "status": "True", "reason": "KubeletReady"},
        {"type": "DiskPressure", "status": "False", "reason": "KubeletHasNoDiskPressure"}]}})
    conds = {c.type: c for c in patched.status.conditions}
    assert conds["Ready"].status == "True"
    assert conds["DiskPressure"].status == "False"
    assert patched.status.node_info.machine_id == "machine-1"

    # The main resource ignores status changes.
    patched = core.patch_node("node-a", {"spec": {"unschedulable": True},
                                         "status": {"capacity": {"cpu": "1"}}})
    assert patched.spec.unschedulable is True
    assert patched.status.capacity["cpu"] == "8"

    listed = core.list_node(label_selector="rack=r1")
    assert [n.metadata.name for n in listed.items] == ["node-a"]
    assert core.list_node(field_selector="spec.unschedulable=true").items[0].metadata.name \
        == "node-a"

    core.delete_node("node-a")
    with pytest.raises(ApiException) as exc:
        core.read_node("node-a")
    assert status_of(exc) == 404


# --- Pod ---------------------------------------------------------------------------------

def test_pod_crud_and_selectors(core: client.CoreV1Api) -> None:
    ns = make_namespace(core, "ns-pods")
    core.create_node(node_body("node-p1"))
    core.create_node(node_body("node-p2"))
    core.create_namespaced_pod(ns, pod_body("web-1", ns, "node-p1", app="web", tier="fe"))
    core.create_namespaced_pod(ns, pod_body("web-2", ns, "node-p2", app="web", tier="fe"))
    core.create_namespaced_pod(ns, pod_body("db-1", ns, "node-p1", app="db"))
    core.create_namespaced_pod(ns, pod_body("pending", ns, None, app="web"))

    pod = core.read_namespaced_pod("web-1", ns)
    assert isinstance(pod, client.V1Pod)
    assert pod.spec.node_name == "node-p1"
    assert pod.spec.containers[0].ports[0].container_port == 8080

    on_p1 = core.list_namespaced_pod(ns, field_selector="spec.nodeName=node-p1")
    assert sorted(p.metadata.name for p in on_p1.items) == ["db-1", "web-1"]
    everywhere = core.list_pod_for_all_namespaces(field_selector="spec.nodeName=node-p1")
    assert sorted(p.metadata.name for p in everywhere.items) == ["db-1", "web-1"]
    unscheduled = core.list_namespaced_pod(ns, field_selector="spec.nodeName=")
    assert [p.metadata.name for p in unscheduled.items] == ["pending"]

    web = core.list_namespaced_pod(ns, label_selector="app=web,tier=fe")
    assert sorted(p.metadata.name for p in web.items) == ["web-1", "web-2"]
    not_web = core.list_namespaced_pod(ns, label_selector="app!=web")
    assert [p.metadata.name for p in not_web.items] == ["db-1"]
    in_set = core.list_namespaced_pod(ns, label_selector="app in (db,cache),!tier")
    assert [p.metadata.name for p in in_set.items] == ["db-1"]
    both = core.list_namespaced_pod(ns, label_selector="app=web",
                                    field_selector="spec.nodeName=node-p2")
    assert [p.metadata.name for p in both.items] == ["web-2"]

    # Pod status via its subresource.
    pod.status = client.V1PodStatus(phase="Running", pod_ip="10.0.0.5", conditions=[
        client.V1PodCondition(type="Ready", status="True")])
    after = core.replace_namespaced_pod_status("web-1", ns, pod)
    assert after.status.phase == "Running"
    running = core.list_namespaced_pod(ns, field_selector="status.phase=Running")
    assert [p.metadata.name for p in running.items] == ["web-1"]

    core.delete_namespaced_pod("web-1", ns, grace_period_seconds=0)
    with pytest.raises(ApiException) as exc:
        core.read_namespaced_pod("web-1", ns)
    assert status_of(exc) == 404
    left = sorted(p.metadata.name for p in core.list_namespaced_pod(ns).items)
    assert left == ["db-1", "pending", "web-2"]

    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod(ns, client.V1Pod(metadata=meta("no-containers", ns),
                                                    spec=client.V1PodSpec(containers=[])))
    assert status_of(exc) == 422


# --- Storage: PV, PVC, StorageClass -------------------------------------------------------

def test_persistent_volumes_and_storage_class(official_api: client.ApiClient,
                                              core: client.CoreV1Api) -> None:
    storage = client.StorageV1Api(official_api)
    sc = storage.create_storage_class(client.V1StorageClass(
        metadata=meta("local-fast"), provisioner="storage.racksmith.io/local",
        reclaim_policy="Delete", volume_binding_mode="WaitForFirstConsumer",
        parameters={"fsType": "ext4"}, allow_volume_expansion=False))
    assert isinstance(sc, client.V1StorageClass)
    assert storage.read_storage_class("local-fast").volume_binding_mode == \
        "WaitForFirstConsumer"
    assert "local-fast" in {s.metadata.name for s in storage.list_storage_class().items}

    pv = core.create_persistent_volume(client.V1PersistentVolume(
        metadata=meta("pv-1", **{"storage.racksmith.io/node": "n1"}),
        spec=client.V1PersistentVolumeSpec(
            capacity={"storage": "10Gi"}, access_modes=["ReadWriteOnce"],
            storage_class_name="local-fast", persistent_volume_reclaim_policy="Delete",
            volume_mode="Filesystem", local=client.V1LocalVolumeSource(path="/mnt/v1"),
            node_affinity=client.V1VolumeNodeAffinity(required=client.V1NodeSelector(
                node_selector_terms=[client.V1NodeSelectorTerm(match_expressions=[
                    client.V1NodeSelectorRequirement(key="kubernetes.io/hostname",
                                                     operator="In", values=["n1"])])])))))
    assert isinstance(pv, client.V1PersistentVolume)
    assert pv.spec.capacity == {"storage": "10Gi"}

    ns = make_namespace(core, "ns-pvc")
    pvc = core.create_namespaced_persistent_volume_claim(ns, client.V1PersistentVolumeClaim(
        metadata=meta("data", ns),
        spec=client.V1PersistentVolumeClaimSpec(
            access_modes=["ReadWriteOnce"], storage_class_name="local-fast",
            resources=client.V1VolumeResourceRequirements(requests={"storage": "5Gi"}))))
    assert isinstance(pvc, client.V1PersistentVolumeClaim)

    # Bind them, the way a controller does: spec then status subresources.
    pv = core.patch_persistent_volume("pv-1", {"spec": {"claimRef": {
        "kind": "PersistentVolumeClaim", "namespace": ns, "name": "data",
        "uid": pvc.metadata.uid}}})
    assert pv.spec.claim_ref.name == "data"
    pv = core.patch_persistent_volume_status("pv-1", {"status": {"phase": "Bound"}})
    assert pv.status.phase == "Bound"
    pvc = core.patch_namespaced_persistent_volume_claim("data", ns,
                                                        {"spec": {"volumeName": "pv-1"}})
    pvc.status = client.V1PersistentVolumeClaimStatus(
        phase="Bound", access_modes=["ReadWriteOnce"], capacity={"storage": "10Gi"})
    pvc = core.replace_namespaced_persistent_volume_claim_status("data", ns, pvc)
    assert pvc.status.phase == "Bound"
    assert core.read_namespaced_persistent_volume_claim("data", ns).spec.volume_name == "pv-1"
    assert core.read_persistent_volume("pv-1").status.phase == "Bound"
    pvs = core.list_persistent_volume(label_selector="storage.racksmith.io/node=n1")
    assert [p.metadata.name for p in pvs.items] == ["pv-1"]
    claims = core.list_persistent_volume_claim_for_all_namespaces()
    assert ("data", ns) in {(c.metadata.name, c.metadata.namespace) for c in claims.items}

    core.delete_namespaced_persistent_volume_claim("data", ns)
    core.delete_persistent_volume("pv-1")
    storage.delete_storage_class("local-fast")
    with pytest.raises(ApiException) as exc:
        storage.read_storage_class("local-fast")
    assert status_of(exc) == 404


# --- Events (core/v1 and events.k8s.io/v1: one storage, two views) ------------------------

def test_core_and_events_v1_events(official_api: client.ApiClient, core: client.CoreV1Api) -> None:
    ns = make_namespace(core, "ns-events")
    events = client.EventsV1Api(official_api)
    when = datetime(2025, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)

    core_ev = core.create_namespaced_event(ns, client.CoreV1Event(
        metadata=meta("pod-a.1", ns),
        involved_object=client.V1ObjectReference(kind="Pod", namespace=ns, name="pod-a",
                                                 uid="uid-a", api_version="v1"),
        reason="Scheduled", message="assigned to node-1", type="Normal", count=1,
        first_timestamp=when, last_timestamp=when, event_time=when,
        reporting_component="scheduler", reporting_instance="scheduler-0",
        source=client.V1EventSource(component="scheduler")))
    assert isinstance(core_ev, client.CoreV1Event)

    new_ev = events.create_namespaced_event(ns, client.EventsV1Event(
        metadata=meta("node-1.2", ns), event_time=when, action="Reboot",
        reason="Rebooted", note="node rebooted", type="Warning",
        reporting_controller="racksmith.io/lcm", reporting_instance="lcm-0",
        regarding=client.V1ObjectReference(kind="Node", name="node-1", api_version="v1")))
    assert isinstance(new_ev, client.EventsV1Event)
    assert new_ev.note == "node rebooted"
    assert new_ev.regarding.name == "node-1"

    # The events.k8s.io Event is a core Event with mapped field names, and back.
    as_core = core.read_namespaced_event("node-1.2", ns)
    assert as_core.message == "node rebooted"
    assert as_core.involved_object.kind == "Node"
    assert as_core.reporting_component == "racksmith.io/lcm"
    assert as_core.api_version == "v1"
    as_new = events.read_namespaced_event("pod-a.1", ns)
    assert as_new.note == "assigned to node-1"
    assert as_new.regarding.name == "pod-a"
    assert as_new.reporting_controller == "scheduler"
    assert as_new.deprecated_count == 1
    assert as_new.api_version == "events.k8s.io/v1"
    assert as_new.event_time == when

    # kubectl describe's field selectors.
    sel = f"involvedObject.name=pod-a,involvedObject.namespace={ns},involvedObject.kind=Pod"
    assert [e.metadata.name for e in core.list_namespaced_event(ns, field_selector=sel).items] \
        == ["pod-a.1"]
    assert [e.metadata.name for e in core.list_event_for_all_namespaces(
        field_selector="involvedObject.kind=Node").items] == ["node-1.2"]
    warnings = events.list_namespaced_event(ns, field_selector="type=Warning")
    assert [e.metadata.name for e in warnings.items] == ["node-1.2"]
    assert len(events.list_event_for_all_namespaces(
        field_selector="regarding.name=pod-a").items) == 1

    patched = events.patch_namespaced_event("node-1.2", ns, {"note": "rebooted twice"})
    assert patched.note == "rebooted twice"
    assert core.read_namespaced_event("node-1.2", ns).message == "rebooted twice"
    core.patch_namespaced_event("pod-a.1", ns, {"count": 2})
    assert events.read_namespaced_event("pod-a.1", ns).deprecated_count == 2

    events.delete_namespaced_event("pod-a.1", ns)
    core.delete_namespaced_event("node-1.2", ns)
    assert core.list_namespaced_event(ns).items == []


# --- Policy and coordination --------------------------------------------------------------

def test_pod_disruption_budget(official_api: client.ApiClient, core: client.CoreV1Api) -> None:
    ns = make_namespace(core, "ns-pdb")
    policy = client.PolicyV1Api(official_api)
    pdb = policy.create_namespaced_pod_disruption_budget(ns, client.V1PodDisruptionBudget(
        metadata=meta("web", ns),
        spec=client.V1PodDisruptionBudgetSpec(
            max_unavailable="25%",
            selector=client.V1LabelSelector(match_labels={"app": "web"}))))
    assert isinstance(pdb, client.V1PodDisruptionBudget)
    got = policy.read_namespaced_pod_disruption_budget("web", ns)
    assert got.spec.max_unavailable == "25%"
    assert got.spec.selector.match_labels == {"app": "web"}

    got.spec.max_unavailable = None
    got.spec.min_available = 1
    replaced = policy.replace_namespaced_pod_disruption_budget("web", ns, got)
    assert replaced.spec.min_available == 1

    status = policy.patch_namespaced_pod_disruption_budget_status("web", ns, {"status": {
        "currentHealthy": 2, "desiredHealthy": 1, "disruptionsAllowed": 1,
        "expectedPods": 2, "observedGeneration": replaced.metadata.generation}})
    assert status.status.disruptions_allowed == 1
    assert policy.read_namespaced_pod_disruption_budget_status(
        "web", ns).status.expected_pods == 2
    listed = policy.list_pod_disruption_budget_for_all_namespaces()
    assert ("web", ns) in {(p.metadata.name, p.metadata.namespace) for p in listed.items}
    policy.delete_namespaced_pod_disruption_budget("web", ns)
    assert policy.list_namespaced_pod_disruption_budget(ns).items == []


def test_lease(official_api: client.ApiClient, core: client.CoreV1Api) -> None:
    ns = make_namespace(core, "ns-lease")
    coord = client.CoordinationV1Api(official_api)
    t0 = datetime(2025, 1, 1, 0, 0, 0, 500000, tzinfo=UTC)
    lease = coord.create_namespaced_lease(ns, client.V1Lease(
        metadata=meta("leader", ns),
        spec=client.V1LeaseSpec(holder_identity="a", lease_duration_seconds=15,
                                acquire_time=t0, renew_time=t0, lease_transitions=0)))
    assert isinstance(lease, client.V1Lease)
    got = coord.read_namespaced_lease("leader", ns)
    assert got.spec.renew_time == t0
    assert got.spec.holder_identity == "a"

    # Two contenders: the second replace, with a stale resourceVersion, loses.
    first = coord.read_namespaced_lease("leader", ns)
    second = coord.read_namespaced_lease("leader", ns)
    first.spec.holder_identity = "b"
    first.spec.lease_transitions = 1
    coord.replace_namespaced_lease("leader", ns, first)
    second.spec.holder_identity = "c"
    with pytest.raises(ApiException) as exc:
        coord.replace_namespaced_lease("leader", ns, second)
    assert status_of(exc) == 409
    assert coord.read_namespaced_lease("leader", ns).spec.holder_identity == "b"

    coord.delete_namespaced_lease("leader", ns)
    with pytest.raises(ApiException) as exc:
        coord.read_namespaced_lease("leader", ns)
    assert status_of(exc) == 404


# --- Lists: paging -----------------------------------------------------------------------

def test_list_limit_and_continue(core: client.CoreV1Api) -> None:
    ns = make_namespace(core, "ns-paging")
    for i in range(7):
        core.create_namespaced_config_map(ns, client.V1ConfigMap(
            metadata=meta(f"cm-{i}", ns, page="yes" if i % 2 == 0 else "no")))
    seen: list[str] = []
    token: str | None = None
    pages = 0
    while True:
        page = core.list_namespaced_config_map(ns, limit=3, _continue=token)
        pages += 1
        assert len(page.items) <= 3
        seen += [c.metadata.name for c in page.items]
        token = page.metadata._continue
        if not token:
            assert page.metadata.remaining_item_count in (None, 0)
            break
        assert page.metadata.remaining_item_count == 7 - len(seen)
        assert pages < 10
    assert sorted(seen) == [f"cm-{i}" for i in range(7)]
    assert len(set(seen)) == 7
    assert pages == 3

    # Paging with a label selector pages over the matching objects only.
    first = core.list_namespaced_config_map(ns, limit=2, label_selector="page=yes")
    assert len(first.items) == 2 and first.metadata._continue
    rest = core.list_namespaced_config_map(ns, limit=2, label_selector="page=yes",
                                           _continue=first.metadata._continue)
    names = [c.metadata.name for c in first.items + rest.items]
    assert sorted(names) == ["cm-0", "cm-2", "cm-4", "cm-6"]
    assert not rest.metadata._continue
    # A selector the store cannot prefilter (!=) pages the same way, and a
    # selected page reports no remainingItemCount (as Kubernetes).
    names, token, pages = [], None, 0
    while pages < 10:
        page = core.list_namespaced_config_map(ns, limit=3, label_selector="page!=no",
                                               _continue=token)
        pages += 1
        assert len(page.items) <= 3 and page.metadata.remaining_item_count is None
        names += [c.metadata.name for c in page.items]
        token = page.metadata._continue
        if not token:
            break
    assert names == ["cm-0", "cm-2", "cm-4", "cm-6"] and pages == 2

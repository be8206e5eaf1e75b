"""API semantics beyond what kubectl exercises: garbage collection and
propagation policies, namespaces, generation and no-op writes, dry runs,
deletecollection, paging, status isolation, eviction with PDBs, watch
details, CRD deletion, server-side apply following a CRD's list types.

The tests share the module's API server, each in its own namespace (``{ns}``
in a path); what a test made is deleted after it (``tests.harness``)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest

from racksmith.apiserver.server import ApiServer
from tests.harness.http import RawClient, raw_client, ssl_context
from tests.harness.wait import eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")

CM = "/api/v1/namespaces/{ns}/configmaps"
PODS = "/api/v1/namespaces/{ns}/pods"
PDBS = "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets"
VOLUMES = "/apis/storage.racksmith.io/v1alpha1/volumes"


def cm(name: str, owner: dict[str, Any] | None = None, labels: dict[str, str] | None = None,
       block: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "ConfigMap",
                                    "name": owner["metadata"]["name"],
                                    "uid": owner["metadata"]["uid"],
                                    "blockOwnerDeletion": block}]
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}}


async def wait_gone(c: RawClient, path: str) -> None:
    async def gone() -> bool:
        return (await c.get(path))[0] == 404
    await eventually(gone, f"{c.path(path)} gone")


async def test_background_gc_deletes_dependents(api_server: ApiServer, ns: str) -> None:
    async with raw_client(api_server, ns) as c:
        _, owner = await c.post(CM, cm("owner"))
        assert (await c.post(CM, cm("dep1", owner)))[0] == 201
        assert (await c.post(CM, cm("dep2", owner)))[0] == 201
        assert (await c.delete(f"{CM}/owner"))[0] == 200
        await wait_gone(c, f"{CM}/dep1")
        await wait_gone(c, f"{CM}/dep2")


async def test_orphan_policy_keeps_dependents_without_the_reference(
        api_server: ApiServer, ns: str) -> None:
    async with raw_client(api_server, ns) as c:
        _, owner = await c.post(CM, cm("owner"))
        await c.post(CM, cm("kept", owner))
        code, _ = await c.delete(f"{CM}/owner", {"propagationPolicy": "Orphan"})
        assert code == 200
        await wait_gone(c, f"{CM}/owner")
        code, kept = await c.get(f"{CM}/kept")
        assert code == 200
        assert not kept["metadata"].get("ownerReferences")


async def test_foreground_waits_for_blocking_dependents(api_server: ApiServer, ns: str) -> None:
    async with raw_client(api_server, ns) as c:
        _, owner = await c.post(CM, cm("owner"))
        _, dep = await c.post(CM, cm("blocker", owner, block=True))
        # the dependent holds a finalizer: the owner must wait for it
        await c.patch(f"{CM}/blocker", {"metadata": {"finalizers": ["test/hold"]}})
        code, body = await c.delete(f"{CM}/owner", {"propagationPolicy": "Foreground"})
        assert code == 200
        assert "foregroundDeletion" in body["metadata"]["finalizers"]
        async def marked() -> dict[str, Any] | None:
            _, dep = await c.get(f"{CM}/blocker")
            return dep if dep["metadata"].get("deletionTimestamp") else None
        dep = await eventually(marked, "the blocking dependent marked for deletion")
        assert dep["metadata"].get("deletionTimestamp")
        code, still = await c.get(f"{CM}/owner")
        assert code == 200 and still["metadata"]["deletionTimestamp"]
        await c.patch(f"{CM}/blocker", {"metadata": {"finalizers": None}})
        await wait_gone(c, f"{CM}/blocker")
        await wait_gone(c, f"{CM}/owner")


async def test_namespace_deletion_removes_its_contents(api_server: ApiServer, ns: str) -> None:
    async with raw_client(api_server, ns) as c:
        ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "doomed"}}
        assert (await c.post("/api/v1/namespaces", ns))[0] == 201
        path = "/api/v1/namespaces/doomed/configmaps"
        assert (await c.post(path, cm("inside")))[0] == 201
        code, body = await c.delete("/api/v1/namespaces/doomed")
        assert code == 200 and body["status"]["phase"] == "Terminating"
        code, body = await c.post(path, cm("late"))
        assert code == 403, body
        await wait_gone(c, "/api/v1/namespaces/doomed")
        assert (await c.get(f"{path}/inside"))[0] == 404
        assert (await c.post(path, cm("after")))[0] == 404  # the gone namespace, from memory
        # creating in a missing namespace is a 404
        assert (await c.post("/api/v1/namespaces/nowhere/configmaps", cm("x")))[0] == 404


async def test_generation_noop_and_dry_run(api_server: ApiServer, ns: str) -> None:
    async with raw_client(api_server, ns) as c:
        vol = {"apiVersion": "storage.racksmith.io/v1alpha1", "kind": "Volume",
               "metadata": {"name": "v1"},
               "spec": {"nodeName": "n1", "storageClassName": "sc",
                        "sparseLoopDevice": {"size": "1Gi"}}}
        code, created = await c.post(VOLUMES, vol)
        assert code == 201, created
        assert created["metadata"]["generation"] == 1
        rv = created["metadata"]["resourceVersion"]
        code, same = await c.put(f"{VOLUMES}/v1", created)
        assert code == 200 and same["metadata"]["resourceVersion"] == rv
        code, labelled = await c.patch(f"{VOLUMES}/v1", {"metadata": {"labels": {"a": "b"}}})
        assert labelled["metadata"]["generation"] == 1
        assert int(labelled["metadata"]["resourceVersion"]) > int(rv)
        code, changed = await c.patch(f"{VOLUMES}/v1", {"spec": {"nodeName": "n2"}})
        assert changed["metadata"]["generation"] == 2
        code, dry, _ = await c.request("POST", VOLUMES + "?dryRun=All",
                                       {**vol, "metadata": {"name": "ghost"}})
        assert code == 201 and dry["metadata"]["name"] == "ghost"
        assert (await c.get(f"{VOLUMES}/ghost"))[0] == 404
        code, _, _ = await c.request("DELETE", f"{VOLUMES}/v1?dryRun=All")
        assert code == 200
        assert (await c.get(f"{VOLUMES}/v1"))[0] == 200


async def test_status_subresource_is_isolated(api_server: ApiServer, ns: str) -> None:
    async with raw_client(api_server, ns) as c:
        lock = {"apiVersion": "lcm.racksmith.io/v1alpha1", "kind": "NodeWorkloadLock",
                "metadata": {"name": "l1"},
                "spec": {"controllerName": "ctl", "nodeName": "n1"},
                "status": {"state": "inactive"}}
        path = "/apis/lcm.racksmith.io/v1alpha1/nodeworkloadlocks"
        code, created = await c.post(path, lock)
        assert code == 201, created
        assert created.get("status", {}).get("state") != "inactive"  # status dropped on create
        code, body = await c.patch(f"{path}/l1", {"status": {"state": "inactive"}})
        assert body.get("status", {}).get("state") != "inactive"  # main resource ignores it
        code, body = await c.patch(f"{path}/l1/status", {"status": {"state": "inactive"},
                                                         "spec": {"nodeName": "n9"}})
        assert code == 200, body
        assert body["status"]["state"] == "inactive"
        assert body["spec"]["nodeName"] == "n1"  # status ignores spec


async def test_deletecollection_and_paging(api_server: ApiServer, ns: str) -> None:
    async with raw_client(api_server, ns) as c:
        for i in range(7):
            await c.post(CM, cm(f"page-{i}", labels={"batch": "x" if i % 2 else "y"}))
        names: list[str] = []
        token = ""
        pages = 0
        while True:
            code, page = await c.get(f"{CM}?limit=3&labelSelector=batch&continue={token}")
            assert code == 200
            names += [i["metadata"]["name"] for i in page["items"]]
            pages += 1
            token = page["metadata"].get("continue", "")
            if not token:
                break
        assert sorted(names) == [f"page-{i}" for i in range(7)] and pages == 3
        code, deleted = await c.delete(f"{CM}?labelSelector=batch%3Dx")
        assert code == 200
        assert sorted(i["metadata"]["name"] for i in deleted["items"]) == [
            "page-1", "page-3", "page-5"]
        code, left = await c.get(f"{CM}?labelSelector=batch")
        assert len(left["items"]) == 4


def pod(name: str, ready: bool) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": "db"}},
            "spec": {"nodeName": "node-1", "containers": [{"name": "db", "image": "db:1"}]},
            "status": {"phase": "Running", "conditions": [
                {"type": "Ready", "status": "True" if ready else "False"}]}}


async def test_eviction_honours_pod_disruption_budgets(api_server: ApiServer, ns: str) -> None:
    async with raw_client(api_server, ns) as c:
        for i in range(3):
            assert (await c.post(PODS, pod(f"db-{i}", ready=True)))[0] == 201
        pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
               "metadata": {"name": "db"},
               "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "db"}}}}
        assert (await c.post(PDBS, pdb))[0] == 201
        eviction = {"apiVersion": "policy/v1", "kind": "Eviction",
                    "metadata": {"name": "db-0", "namespace": ns}}
        code, body = await c.post(f"{PODS}/db-0/eviction", eviction)
        assert code == 201, body
        assert (await c.get(f"{PODS}/db-0"))[0] == 404
        code, body = await c.post(f"{PODS}/db-1/eviction",
                                  {**eviction, "metadata": {"name": "db-1"}})
        assert code == 429, body
        assert body["reason"] == "TooManyRequests"
        assert body["message"] == ("Cannot evict pod as it would violate the pod's "
                                   "disruption budget.")
        # As kube's checkAndDecrement: no retryAfterSeconds (so no Retry-After
        # header for client-go to retry on silently) and a cause with no field.
        assert "retryAfterSeconds" not in body["details"], body
        assert body["details"]["causes"] == [{
            "reason": "DisruptionBudget",
            "message": "The disruption budget db needs 2 healthy pods and has 2 currently"}]
        assert (await c.get(f"{PODS}/db-1"))[0] == 200
        code, got = await c.get(f"{PDBS}/db")
        assert got["status"]["disruptionsAllowed"] == 0
        assert got["status"]["currentHealthy"] == 2


async def test_concurrent_evictions_spend_the_budget_once(api_server: ApiServer,
                                                          ns: str) -> None:
    """Six evictions at once against a budget that allows one: exactly one
    pod goes (they must not all read "one allowed" and all delete)."""
    async with raw_client(api_server, ns) as c:
        for i in range(6):
            assert (await c.post(PODS, pod(f"db-{i}", ready=True)))[0] == 201
        pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
               "metadata": {"name": "db"},
               "spec": {"minAvailable": 5, "selector": {"matchLabels": {"app": "db"}}}}
        assert (await c.post(PDBS, pdb))[0] == 201
        answers = await asyncio.gather(*(
            c.post(f"{PODS}/db-{i}/eviction", {"apiVersion": "policy/v1", "kind": "Eviction",
                                               "metadata": {"name": f"db-{i}"}})
            for i in range(6)))
        codes = sorted(code for code, _ in answers)
        assert codes == [201, 429, 429, 429, 429, 429], answers
        _, left = await c.get(PODS)
        assert len(left["items"]) == 5


async def _watch_lines(server: ApiServer, path: str, count: int,
                       timeout: float = 20) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    async with aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=ssl_context(server))) as s, \
            s.get(server.url + path,
                  headers={"Authorization": f"Bearer {server.token}"}) as resp:
        assert resp.status == 200

        async def read() -> None:
            async for line in resp.content:
                if line.strip():
                    out.append(json.loads(line))
                    if len(out) >= count:
                        return
        await asyncio.wait_for(read(), timeout)
    return out


async def test_watchers_of_one_resource_share_each_rendered_event(api_server: ApiServer,
                                                                   ns: str) -> None:
    """Three watchers, ten events: each event is rendered once and sent to all
    three (the other two take the bytes the first one rendered)."""
    async with raw_client(api_server, ns) as c:
        _, first = await c.post(CM, cm("fan-0"))
        rv = first["metadata"]["resourceVersion"]
        path = c.path(f"{CM}?watch=1&resourceVersion={rv}")
        rendered, reused = api_server.watch_renders()
        # They watch from ``rv``: whether a watcher connects before the writes
        # or after (and replays them from the log), it sees the same ten events.
        tasks = [asyncio.create_task(_watch_lines(api_server, path, 10)) for _ in range(3)]
        for i in range(1, 6):
            await c.post(CM, cm(f"fan-{i}"))
        for i in range(1, 6):
            await c.patch(f"{CM}/fan-{i}", {"metadata": {"labels": {"n": str(i)}}})
        streams = await asyncio.gather(*tasks)
        assert streams[0] == streams[1] == streams[2]
        assert [e["type"] for e in streams[0]] == ["ADDED"] * 5 + ["MODIFIED"] * 5
        now_rendered, now_reused = api_server.watch_renders()
        assert now_rendered - rendered == 10
        assert now_reused - reused == 20


async def test_watch_selector_transitions_and_timeout(api_server: ApiServer, ns: str) -> None:
    async with raw_client(api_server, ns) as c:
        _, first = await c.post(CM, cm("watched", labels={"team": "a"}))
        rv = first["metadata"]["resourceVersion"]
        task = asyncio.create_task(_watch_lines(
            api_server, c.path(f"{CM}?watch=1&labelSelector=team%3Da&resourceVersion={rv}"), 2))
        await asyncio.sleep(0.3)
        await c.patch(f"{CM}/watched", {"metadata": {"labels": {"team": "b"}}})
        await c.patch(f"{CM}/watched", {"metadata": {"labels": {"team": "a"}}})
        events = await task
        assert [e["type"] for e in events] == ["DELETED", "ADDED"]
        # timeoutSeconds ends the stream; sendInitialEvents ends with a bookmark
        async with aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=ssl_context(api_server))) as s:
            url = (f"{api_server.url}{c.path(CM)}?watch=true&timeoutSeconds=1"
                   "&sendInitialEvents=true"
                   "&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true")
            async with s.get(url, headers={"Authorization": f"Bearer {api_server.token}"}
                             ) as resp:
                body = await asyncio.wait_for(resp.read(), 20)
        events = [json.loads(line) for line in body.splitlines() if line.strip()]
        assert events[-1]["type"] == "BOOKMARK"
        assert events[-1]["object"]["metadata"]["annotations"][
            "k8s.io/initial-events-end"] == "true"
        assert any(e["type"] == "ADDED" for e in events)


async def test_crd_deletion_removes_its_objects_and_stops_serving(
        api_server: ApiServer, ns: str) -> None:
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.org"},
        "spec": {"group": "example.org", "scope": "Cluster",
                 "names": {"kind": "Gadget", "plural": "gadgets"},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": {
                                   "type": "object",
                                   "x-kubernetes-preserve-unknown-fields": True}}}]}}
    async with raw_client(api_server, ns) as c:
        crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
        assert (await c.post(crds, crd))[0] == 201
        path = "/apis/example.org/v1/gadgets"
        code, body = await c.post(path, {"apiVersion": "example.org/v1", "kind": "Gadget",
                                         "metadata": {"name": "g1"}, "spec": {"x": 1}})
        assert code == 201, body
        async def established() -> bool:
            _, got = await c.get(f"{crds}/gadgets.example.org")
            return any(cond["type"] == "Established" and cond["status"] == "True"
                       for cond in got.get("status", {}).get("conditions", []))
        await eventually(established, "the CRD Established")
        assert (await c.delete(f"{crds}/gadgets.example.org"))[0] == 200
        await wait_gone(c, f"{crds}/gadgets.example.org")
        assert (await c.get(path))[0] == 404
        # re-created: the old objects are gone
        assert (await c.post(crds, crd))[0] == 201
        code, listed = await c.get(path)
        assert code == 200 and listed["items"] == []


async def test_concurrent_merge_patches_without_resource_version_all_apply(
        api_server: ApiServer, ns: str) -> None:
    async with raw_client(api_server, ns) as c:
        await c.post(CM, cm("busy"))
        results = await asyncio.gather(*[
            c.patch(f"{CM}/busy", {"metadata": {"labels": {f"k{i}": "v"}}}) for i in range(20)])
        assert all(code == 200 for code, _ in results), [b for code, b in results if code != 200]
        _, got = await c.get(f"{CM}/busy")
        assert set(got["metadata"]["labels"]) == {f"k{i}" for i in range(20)}
        # a patch pinned to a stale resourceVersion is still refused
        code, _ = await c.patch(f"{CM}/busy", {"metadata": {"resourceVersion": "1",
                                                              "labels": {"late": "x"}}})
        assert code == 409


MACHINES = "/apis/cluster.racksmith.io/v1alpha1/namespaces/{ns}/machines"
APPLY = "application/apply-patch+yaml"


def machine(ns: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "cluster.racksmith.io/v1alpha1", "kind": "Machine",
            "metadata": {"name": "m1", "namespace": ns},
            "spec": {"clusterName": "c1", **spec}}


async def test_server_side_apply_merges_a_set_list_of_two_managers(
        api_server: ApiServer, ns: str) -> None:
    """Machine.spec.roles is ``x-kubernetes-list-type: set``: two managers'
    roles merge into one set, each owning its members (as on a real cluster)."""
    async with raw_client(api_server, ns) as c:
        code, body = await c.patch(f"{MACHINES}/m1?fieldManager=a",
                                   machine(ns, roles=["master", "etcd"]), APPLY)
        assert code == 201, body
        code, body = await c.patch(f"{MACHINES}/m1?fieldManager=b",
                                   machine(ns, roles=["etcd", "infra"]), APPLY)
        assert code == 200, body
        assert body["spec"]["roles"] == ["master", "etcd", "infra"]
        fields = {e["manager"]: e["fieldsV1"]["f:spec"] for e in body["metadata"]["managedFields"]
                  if e["operation"] == "Apply"}
        assert fields == {
            "a": {"f:clusterName": {}, "f:roles": {'v:"master"': {}, 'v:"etcd"': {}}},
            "b": {"f:clusterName": {}, "f:roles": {'v:"etcd"': {}, 'v:"infra"': {}}},
        }
        # a drops its roles: the one b shares stays
        code, body = await c.patch(f"{MACHINES}/m1?fieldManager=a", machine(ns), APPLY)
        assert code == 200, body
        assert body["spec"]["roles"] == ["etcd", "infra"]
        # a scalar both apply still conflicts
        code, body = await c.patch(f"{MACHINES}/m1?fieldManager=b",
                                   machine(ns, clusterName="c2", roles=["etcd", "infra"]),
                                   APPLY)
        assert code == 409, body
        assert [cause["field"] for cause in body["details"]["causes"]] == [".spec.clusterName"]
        code, got = await c.get(f"{MACHINES}/m1")
        assert got["spec"] == {"clusterName": "c1", "roles": ["etcd", "infra"]}


async def test_server_side_apply_rejects_a_config_not_fitting_its_list_type(
        api_server: ApiServer, ns: str) -> None:
    async with raw_client(api_server, ns) as c:
        code, body = await c.patch(f"{MACHINES}/m1?fieldManager=a",
                                   machine(ns, roles=["etcd", "etcd"]), APPLY)
        assert code == 400, body
        assert body["message"] == (
            f"failed to create typed patch object ({ns}/m1; cluster.racksmith.io/v1alpha1, "
            'Kind=Machine): .spec.roles: duplicate entries for key [="etcd"]')
        assert (await c.get(f"{MACHINES}/m1"))[0] == 404

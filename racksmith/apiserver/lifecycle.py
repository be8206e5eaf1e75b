"""Server-side lifecycles: garbage collection, namespaces and CRDs.

Owns what kube-controller-manager and the apiextensions server do for a real
cluster, embedded and level-based:

- **Garbage collection** by ``ownerReferences``: when an owner is gone its
  dependents are deleted (Background), or first (Foreground: the owner keeps
  the ``foregroundDeletion`` finalizer until its blocking dependents are
  gone), or released (Orphan: references removed, then the ``orphan``
  finalizer dropped). Dependents with another live owner only lose the
  reference.
- **Namespaces**: a deleted namespace is ``Terminating`` until every object
  in it is gone; then its ``kubernetes`` finalizer is removed.
- **CRDs**: a written CRD is served at once (registry updated inside the
  request) and gets ``Established``/``NamesAccepted`` status; a deleted CRD
  first deletes all its custom resources (finalizer
  ``customresourcecleanup.apiextensions.k8s.io``) and then stops being
  served.

Every write goes through :class:`ResourceService`, so the rules of the API
apply. The work is driven by write hooks and a full rescan at start (and
periodically), so a crash at any point converges after restart.

**One replica acts.** Every replica keeps the owner index and serves the
CRDs (both follow every write, its own and, through the store's watch, the
other replicas'), but when several replicas share one store only the holder
of a Lease (``kube-system/racksmith-apiserver-lifecycle``, through
:mod:`racksmith.election`, as kube-controller-manager elects its leader)
does the work: the others queue nothing. A replica that becomes the holder
rescans everything first (level-based: what happened while nobody held the
Lease is found); one that loses it drops its queue. With no elector (one
server on its own SQLite store) the server always acts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from typing import Any

from racksmith.apiserver import crds as crdlib
from racksmith.apiserver.errors import ApiError
from racksmith.apiserver.registry import Registry, ResourceInfo, infos_from_crd
from racksmith.apiserver.service import ListOptions, ResourceService, WriteOptions
from racksmith.apiserver.store.base import Key, Scope, StoreUnavailableError
from racksmith.election import LeaderElector

Obj = dict[str, Any]
log = logging.getLogger("racksmith.apiserver.lifecycle")

CRD_CLEANUP = "customresourcecleanup.apiextensions.k8s.io"
MANAGER = WriteOptions(field_manager="racksmith-apiserver")
RESYNC_SECONDS = 60.0
STORE_RETRY_SECONDS = 5.0
"""How long work waits before it is tried again while the store is unavailable."""


class OwnerIndex:
    """uid → key of every object, and owner uid → dependent keys."""

    def __init__(self) -> None:
        self.by_uid: dict[str, Key] = {}
        self.dependents: dict[str, set[Key]] = defaultdict(set)
        self._owners_of: dict[Key, set[str]] = {}

    def observe(self, key: Key, obj: Obj | None) -> None:
        for owner in self._owners_of.pop(key, set()):
            deps = self.dependents.get(owner)
            if deps is not None:
                deps.discard(key)
                if not deps:
                    del self.dependents[owner]
        if obj is None:
            return
        meta = obj.get("metadata", {})
        if meta.get("uid"):
            self.by_uid[str(meta["uid"])] = key
        owners = {str(r.get("uid")) for r in meta.get("ownerReferences") or []
                  if isinstance(r, dict) and r.get("uid")}
        if owners:
            self._owners_of[key] = owners
            for owner in owners:
                self.dependents[owner].add(key)

    def forget_uid(self, uid: str) -> None:
        self.by_uid.pop(uid, None)


class Lifecycle:
    """The embedded GC, namespace and CRD controllers."""

    def __init__(self, service: ResourceService, registry: Registry, *,
                 elector: LeaderElector | None = None) -> None:
        self.service = service
        self.registry = registry
        self.index = OwnerIndex()
        self.elector = elector
        """Who else may act (None: nobody, this server always acts)."""
        self.acting = elector is None
        """This server does the work (queues it) now."""
        self._queue: asyncio.Queue[tuple[str, Key, str]] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._resync: asyncio.Task[None] | None = None
        self._lead: asyncio.Task[None] | None = None
        service.hooks.append(self.on_write)

    def _put(self, kind: str, key: Key, uid: str) -> None:
        if self.acting:
            self._queue.put_nowait((kind, key, uid))

    # ---- startup --------------------------------------------------------------

    async def load(self) -> None:
        """Serve every stored CRD and index every object (before serving;
        again after the store lost history: the index starts afresh)."""
        self.index = OwnerIndex()
        crd_info = self.registry.get("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        assert crd_info is not None
        page = await self.service.list(crd_info, None, ListOptions())
        for crd in page.items:
            self._serve_crd(crd)
        await self.rescan()

    async def rescan(self) -> None:
        for storage_key, info in self.registry.storage_keys().items():
            res = await self.service.store.list(Scope(storage_key))
            for obj in res.items:
                key = Key(storage_key, obj["metadata"].get("namespace", "") if info.namespaced
                          else "", obj["metadata"]["name"])
                self.index.observe(key, obj)
                self._enqueue_for(info, key, obj)
        # dependents whose owners no longer exist
        for owner_uid in list(self.index.dependents):
            if owner_uid not in self.index.by_uid:
                self._put("orphaned", Key("", "", ""), owner_uid)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="apiserver-lifecycle")
        self._resync = asyncio.create_task(self._periodic(), name="apiserver-resync")
        if self.elector is not None:
            self._lead = asyncio.create_task(self._campaign(self.elector),
                                             name="apiserver-lifecycle-election")

    async def stop(self) -> None:
        for task in (self._lead, self._task, self._resync):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self.elector is not None:
            await self.elector.release()

    async def _campaign(self, elector: LeaderElector) -> None:
        """Act while this replica holds the Lease; rescan on taking it (while
        the Lease is renewed: a large store's rescan outlasts a renewal)."""
        while True:
            await elector.acquire()
            self.acting = True
            log.info("this replica runs the server-side lifecycles")
            rescan = asyncio.create_task(self._rescan_once(), name="apiserver-lifecycle-rescan")
            try:
                await elector.hold()
            finally:
                rescan.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await rescan
            self.acting = False
            self._drop_queued()
            log.warning("another replica runs the server-side lifecycles now")

    async def _rescan_once(self) -> None:
        try:
            await self.rescan()
        except StoreUnavailableError as exc:  # the periodic rescan tries again
            log.warning("lifecycle rescan waits for the store: %s", exc)
        except Exception:
            log.exception("lifecycle rescan failed")

    def _drop_queued(self) -> None:
        while True:
            try:
                self._queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            self._queue.task_done()

    async def _periodic(self) -> None:
        """The safety net of the write hooks; a replica that does not act has
        nothing to find (it rescans when it takes the Lease)."""
        while True:
            await asyncio.sleep(RESYNC_SECONDS)
            if self.acting:
                await self._rescan_once()

    async def wait_idle(self) -> None:
        """For tests: wait until queued work is done."""
        await self._queue.join()

    # ---- hooks ----------------------------------------------------------------

    async def on_write(self, info: ResourceInfo, key: Key, old: Obj | None,
                       new: Obj | None) -> None:
        self.index.observe(key, new)
        if info.group == "apiextensions.k8s.io" and info.plural == "customresourcedefinitions":
            if new is not None:
                self._serve_crd(new)
            else:
                self.registry.remove_crd(key.name)
        if new is None and old is not None:
            uid = str(old.get("metadata", {}).get("uid", ""))
            self.index.forget_uid(uid)
            self._put("orphaned", key, uid)
            self._owners_changed(old)
            return
        if new is not None:
            self._enqueue_for(info, key, new)
            if new.get("metadata", {}).get("deletionTimestamp"):
                self._owners_changed(new)

    def _owners_changed(self, obj: Obj) -> None:
        for ref in obj.get("metadata", {}).get("ownerReferences") or []:
            uid = str(ref.get("uid", ""))
            owner_key = self.index.by_uid.get(uid)
            if owner_key is not None:
                self._put("object", owner_key, "")

    def _enqueue_for(self, info: ResourceInfo, key: Key, obj: Obj) -> None:
        meta = obj.get("metadata", {})
        is_crd = info.group == "apiextensions.k8s.io"
        if is_crd and (CRD_CLEANUP not in (meta.get("finalizers") or [])
                       or meta.get("deletionTimestamp")
                       or not _established(obj)):
            self._put("object", key, "")
        elif meta.get("deletionTimestamp"):
            self._put("object", key, "")

    def _serve_crd(self, crd: Obj) -> None:
        name = crd["metadata"]["name"]
        try:
            infos = infos_from_crd(crd)
        except (KeyError, TypeError):
            log.warning("CRD %s cannot be served", name)
            return
        self.registry.set_crd(name, infos)

    # ---- worker ---------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            kind, key, uid = await self._queue.get()
            try:
                if kind == "orphaned":
                    await self._collect_dependents(uid)
                else:
                    await self._reconcile(key)
            except ApiError as exc:
                if exc.code not in (404, 409):
                    log.warning("lifecycle %s %s: %s", kind, key, exc)
                    await self._retry_later(kind, key, uid)
            except StoreUnavailableError as exc:
                # etcd without quorum: one line per item, no traceback; the
                # item waits longer (the outage is the store's, not ours)
                log.warning("lifecycle %s %s waits for the store: %s", kind, key, exc)
                await self._retry_later(kind, key, uid, delay=STORE_RETRY_SECONDS)
            except Exception:
                log.exception("lifecycle %s %s failed", kind, key)
                await self._retry_later(kind, key, uid)
            finally:
                self._queue.task_done()

    async def _retry_later(self, kind: str, key: Key, uid: str, delay: float = 1.0) -> None:
        async def later() -> None:
            await asyncio.sleep(delay)
            self._put(kind, key, uid)
        task = asyncio.create_task(later())
        task.add_done_callback(lambda _t: None)

    def _info_for(self, key: Key) -> ResourceInfo | None:
        return self.registry.storage_keys().get(key.resource)

    async def _reconcile(self, key: Key) -> None:
        info = self._info_for(key)
        if info is None:
            return
        try:
            obj = await self.service.get(info, key.namespace, key.name)
        except ApiError as exc:
            if exc.code == 404:
                return
            raise
        meta = obj["metadata"]
        finalizers = list(meta.get("finalizers") or [])
        if info.group == "apiextensions.k8s.io" and info.plural == "customresourcedefinitions":
            await self._reconcile_crd(info, obj)
            return
        if not meta.get("deletionTimestamp"):
            return
        if info.group == "" and info.plural == "namespaces":
            await self._finalize_namespace(info, obj)
            return
        uid = str(meta.get("uid"))
        if "orphan" in finalizers:
            await self._orphan_dependents(uid)
            await self._drop_finalizer(info, obj, "orphan")
        elif "foregroundDeletion" in finalizers:
            remaining = await self._delete_dependents(uid, foreground=True)
            if not remaining:
                await self._drop_finalizer(info, obj, "foregroundDeletion")

    async def _drop_finalizer(self, info: ResourceInfo, obj: Obj, finalizer: str) -> None:
        fins = [f for f in obj["metadata"].get("finalizers") or [] if f != finalizer]
        patch = {"metadata": {"finalizers": fins or None,
                              "resourceVersion": obj["metadata"]["resourceVersion"]}}
        await self.service.patch(info, obj["metadata"].get("namespace", ""),
                                 obj["metadata"]["name"], "application/merge-patch+json",
                                 patch, MANAGER)

    async def _dependents(self, owner_uid: str) -> list[tuple[ResourceInfo, Obj]]:
        out = []
        for dep_key in sorted(self.index.dependents.get(owner_uid, set())):
            info = self._info_for(dep_key)
            if info is None:
                continue
            try:
                out.append((info, await self.service.get(info, dep_key.namespace,
                                                         dep_key.name)))
            except ApiError as exc:
                if exc.code != 404:
                    raise
        return out

    async def _orphan_dependents(self, owner_uid: str) -> None:
        for info, dep in await self._dependents(owner_uid):
            refs = [r for r in dep["metadata"].get("ownerReferences") or []
                    if r.get("uid") != owner_uid]
            patch = {"metadata": {"ownerReferences": refs or None,
                                  "resourceVersion": dep["metadata"]["resourceVersion"]}}
            await self.service.patch(info, dep["metadata"].get("namespace", ""),
                                     dep["metadata"]["name"], "application/merge-patch+json",
                                     patch, MANAGER)

    async def _delete_dependents(self, owner_uid: str, *, foreground: bool) -> int:
        """Delete (or release) the dependents of a gone/going owner; returns how
        many blocking dependents are still present."""
        remaining = 0
        for info, dep in await self._dependents(owner_uid):
            meta = dep["metadata"]
            refs = meta.get("ownerReferences") or []
            others = [r for r in refs if r.get("uid") != owner_uid
                      and str(r.get("uid")) in self.index.by_uid]
            if others:
                keep = [r for r in refs if r.get("uid") != owner_uid]
                await self.service.patch(
                    info, meta.get("namespace", ""), meta["name"],
                    "application/merge-patch+json",
                    {"metadata": {"ownerReferences": keep,
                                  "resourceVersion": meta["resourceVersion"]}}, MANAGER)
                continue
            blocking = any(r.get("uid") == owner_uid and r.get("blockOwnerDeletion")
                           for r in refs)
            if foreground and blocking:
                remaining += 1
            if not meta.get("deletionTimestamp"):
                policy = "Foreground" if foreground else "Background"
                await self.service.delete(info, meta.get("namespace", ""), meta["name"],
                                          {"propagationPolicy": policy})
        return remaining

    async def _collect_dependents(self, owner_uid: str) -> None:
        if owner_uid in self.index.by_uid:
            return
        await self._delete_dependents(owner_uid, foreground=False)

    async def _finalize_namespace(self, info: ResourceInfo, ns: Obj) -> None:
        name = ns["metadata"]["name"]
        left = 0
        for storage_key, res_info in self.registry.storage_keys().items():
            if not res_info.namespaced:
                continue
            res = await self.service.store.list(Scope(storage_key, name))
            for obj in res.items:
                left += 1
                if not obj["metadata"].get("deletionTimestamp"):
                    try:
                        await self.service.delete(res_info, name, obj["metadata"]["name"],
                                                  {"propagationPolicy": "Background"})
                    except ApiError as exc:
                        if exc.code != 404:
                            raise
        if left:
            await self._retry_later("object", Key("core/namespaces", "", name), "")
            return
        spec_fins = [f for f in ns.get("spec", {}).get("finalizers") or []
                     if f != "kubernetes"]
        body = dict(ns)
        body["spec"] = {**ns.get("spec", {}), "finalizers": spec_fins}
        if not spec_fins:
            body["spec"].pop("finalizers")
        await self.service.update(info, "", name, body, MANAGER)

    async def _reconcile_crd(self, info: ResourceInfo, crd: Obj) -> None:
        meta = crd["metadata"]
        name = meta["name"]
        fins = list(meta.get("finalizers") or [])
        if meta.get("deletionTimestamp"):
            if CRD_CLEANUP in fins:
                served = self.registry._crd_owned.get(name, [])
                left = 0
                for group, version, plural in served[:1]:
                    res_info = self.registry.get(group, version, plural)
                    if res_info is None:
                        continue
                    res = await self.service.store.list(Scope(res_info.storage_key))
                    for obj in res.items:
                        left += 1
                        if not obj["metadata"].get("deletionTimestamp"):
                            try:
                                await self.service.delete(
                                    res_info, obj["metadata"].get("namespace", ""),
                                    obj["metadata"]["name"])
                            except ApiError as exc:
                                if exc.code != 404:
                                    raise
                if left:
                    await self._retry_later("object", Key(info.storage_key, "", name), "")
                    return
                # Stop serving before the CRD goes: a client that sees the CRD
                # gone must never find its resources still served (its
                # removal hook runs after the store's delete, with awaits
                # between on etcd). Nothing of the kind is left to serve.
                self.registry.remove_crd(name)
                await self._drop_finalizer(info, crd, CRD_CLEANUP)
            return
        if CRD_CLEANUP not in fins:
            await self.service.patch(info, "", name, "application/merge-patch+json", {
                "metadata": {"finalizers": [*fins, CRD_CLEANUP],
                             "resourceVersion": meta["resourceVersion"]}}, MANAGER)
            crd = await self.service.get(info, "", name)
        conflict = self._name_conflict(crd)
        status = crdlib.established_status(crd, accepted=not conflict, message=conflict)
        if _conditions_equal(crd.get("status", {}), status):
            return
        crd["status"] = status
        await self.service.update(info, "", name, crd, MANAGER, subresource="status")

    def _name_conflict(self, crd: Obj) -> str:
        spec = crd.get("spec", {})
        plural = spec.get("names", {}).get("plural")
        for other in self.registry.all():
            if other.group == spec.get("group") and other.plural == plural and other.builtin:
                return f'"{plural}" is already in use'
        return ""


def _established(crd: Obj) -> bool:
    return any(c.get("type") == "Established" and c.get("status") == "True"
               for c in crd.get("status", {}).get("conditions", []) or [])


def _conditions_equal(old: Obj, new: Obj) -> bool:
    def strip(s: Obj) -> Obj:
        c = dict(s)
        c["conditions"] = [{k: v for k, v in cond.items() if k != "lastTransitionTime"}
                           for cond in s.get("conditions", []) or []]
        return c
    return strip(old) == strip(new)

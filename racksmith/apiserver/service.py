"""Resource operations: the semantics of every verb, independent of HTTP.

Owns: get, list (label/field selectors, limit/continue), create, update,
patch (merge, JSON, strategic, apply), delete (finalizers,
deletionTimestamp, propagation policies), deletecollection and dry runs;
schema pruning/defaulting/validation; conflict detection; no-op detection
(an unchanged write does not bump the resourceVersion). The HTTP layer
parses requests and calls this; the garbage collector calls it too.

Nothing is written unless every check passed: validation happens on a copy
before the single store call that commits the change.
"""

from __future__ import annotations

import asyncio
import base64
import builtins
import copy
import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from racksmith.apiserver import corevalidation, errors, patching
from racksmith.apiserver import crds as crdlib
from racksmith.apiserver import schema as schemalib
from racksmith.apiserver.conversion import field_value, from_storage, storage_resource, to_storage
from racksmith.apiserver.errors import ApiError, Cause
from racksmith.apiserver.objects import (
    MAX_DEPTH,
    builtin_defaults,
    check_depth,
    new_finalizers_while_deleting,
    now_rfc3339,
    prepare_create,
    prepare_update,
    validate_metadata,
)
from racksmith.apiserver.options import check_metadata_types
from racksmith.apiserver.registry import ResourceInfo
from racksmith.apiserver.selectors import FieldSelector, LabelSelector, SelectorError
from racksmith.apiserver.store.base import (
    AlreadyExistsError,
    ConflictError,
    Expired,
    Key,
    NotFoundError,
    Scope,
    Store,
)
from racksmith.jsoncopy import json_copy

Obj = dict[str, Any]

PATCH_MERGE = "application/merge-patch+json"
PATCH_JSON = "application/json-patch+json"
PATCH_STRATEGIC = "application/strategic-merge-patch+json"
PATCH_APPLY = "application/apply-patch+yaml"
PATCH_APPLY_CBOR = "application/apply-patch+cbor"
PATCH_TYPES = (PATCH_MERGE, PATCH_JSON, PATCH_STRATEGIC, PATCH_APPLY)

MAX_PATCH_RETRIES = 16
_SELECT_CHUNK = 500
"""Objects read from the store at a time by a list whose selector may drop some."""


def _object_type(info: ResourceInfo) -> patching.TypeNode:
    """The list and map types apply and managed fields follow for ``info``'s objects."""
    return patching.TypeNode.root(info.schema, builtin=info.builtin)


@dataclass
class WriteOptions:
    """Query parameters shared by the write verbs."""

    dry_run: bool = False
    field_validation: str = "Warn"  # Strict | Warn | Ignore
    field_manager: str = ""
    force: bool = False
    user: Any = None
    """Who writes (the authenticated user; None: the server itself), for the
    admission checks (RBAC escalation prevention)."""
    large: bool = False
    """The request body was large: the pure steps of the write (schema pass,
    validation, managed fields) run in a worker thread, so that the event
    loop keeps serving everybody else."""


@dataclass
class WriteResult:
    obj: Obj
    created: bool = False
    warnings: list[str] = field(default_factory=list)
    deleted: bool = False
    """The object is gone from the store (not merely marked for deletion)."""


@dataclass
class ListOptions:
    label_selector: str = ""
    field_selector: str = ""
    limit: int = 0
    continue_token: str = ""


@dataclass
class ListPage:
    items: list[Obj]
    rv: int
    continue_token: str = ""
    remaining: int | None = None


WriteHook = Callable[[ResourceInfo, Key, Obj | None, Obj | None], Awaitable[None]]
"""Called after every committed write: (info, key, old, new); new None = deleted."""

AdmissionCheck = Callable[[ResourceInfo, str, Obj, Obj | None, Any], None]
"""Called before every create and update is stored: (info, namespace, new,
old or None, the writing user or None); raises an ApiError to refuse."""


def _name(obj: Obj) -> str:
    return str(obj.get("metadata", {}).get("name") or "")


class ResourceService:
    """The verbs over a Store, for any registered resource."""

    def __init__(self, store: Store, hooks: list[WriteHook] | None = None) -> None:
        self.store = store
        self.hooks: list[WriteHook] = list(hooks or [])
        self.admission: list[AdmissionCheck] = []
        self._namespaces: dict[str, bool] | None = None
        """name → terminating, once ``load_namespaces`` ran (None: read the store)."""
        self.namespace_check = True
        self._locks: dict[Key, asyncio.Lock] = {}

    # ---- keys and reads -------------------------------------------------------

    def key(self, info: ResourceInfo, namespace: str, name: str) -> Key:
        return Key(storage_resource(info), namespace if info.namespaced else "", name)

    def scope(self, info: ResourceInfo, namespace: str | None) -> Scope:
        return Scope(storage_resource(info), namespace if info.namespaced else None)

    def present(self, info: ResourceInfo, obj: Obj) -> Obj:
        return from_storage(info, obj)

    async def get(self, info: ResourceInfo, namespace: str, name: str) -> Obj:
        try:
            obj = await self.store.get(self.key(info, namespace, name))
        except NotFoundError:
            raise errors.not_found(info.plural, name, group=info.group) from None
        return self.present(info, obj)

    async def _get_raw(self, info: ResourceInfo, key: Key) -> Obj | None:
        try:
            return await self.store.get(key)
        except NotFoundError:
            return None

    def parse_selectors(self, info: ResourceInfo, opts: ListOptions
                        ) -> tuple[LabelSelector | None, FieldSelector | None]:
        label = fieldsel = None
        try:
            if opts.label_selector:
                label = LabelSelector.parse(opts.label_selector)
            if opts.field_selector:
                fieldsel = FieldSelector.parse(opts.field_selector)
        except SelectorError as exc:
            raise errors.bad_request(f"unable to parse requirement: {exc}") from None
        if fieldsel is not None:
            allowed = info.all_selectable()
            for fld in sorted(fieldsel.fields()):
                if fld not in allowed:
                    raise errors.bad_request(
                        f'field label not supported: {fld}')
        return label, fieldsel

    def matcher(self, info: ResourceInfo, label: LabelSelector | None,
                fieldsel: FieldSelector | None) -> Callable[[Obj], bool]:
        def matches(obj: Obj) -> bool:
            if label is not None and not label.matches(
                    obj.get("metadata", {}).get("labels") or {}):
                return False
            if fieldsel is not None:
                view = self.present(info, copy.copy(obj))
                return fieldsel.matches(lambda path: field_value(view, path))
            return True
        return matches

    async def list(self, info: ResourceInfo, namespace: str | None,
                   opts: ListOptions) -> ListPage:
        label, fieldsel = self.parse_selectors(info, opts)
        matches = self.matcher(info, label, fieldsel)
        after: Key | None = None
        token_rv = 0
        if opts.continue_token:
            after, token_rv = self._decode_continue(info, opts.continue_token)
        scope = self.scope(info, namespace)
        # Fast path: an exact name from the field selector.
        if fieldsel is not None and label is None and not opts.continue_token:
            exact = [v for f, op, v in fieldsel.requirements
                     if f == "metadata.name" and op == "="]
            if exact:
                rv = self.store.current_rv()
                try:
                    obj = await self.store.get(Key(scope.resource, namespace or "", exact[0]))
                except NotFoundError:
                    obj = None
                if obj is None and info.namespaced and namespace is None:
                    page = await self._list_filtered(scope, None, 0, matches)
                    return ListPage([self.present(info, o) for o in page[0]], page[1])
                items = [obj] if obj is not None and matches(obj) else []
                return ListPage([self.present(info, o) for o in items], rv)
        needles = label.needles() if label is not None else ()
        try:
            items, rv, last, remaining = await self._list_filtered(
                scope, after, opts.limit, matches, token_rv or None, needles,
                selective=label is not None or fieldsel is not None)
        except Expired:
            raise errors.gone(
                "The provided continue parameter is too old to display a consistent list "
                "result. You can start a new list without the continue parameter.") from None
        token = ""
        if last is not None:
            token = self._encode_continue(last, token_rv or rv)
        # remainingItemCount only for a list without selectors, as Kubernetes
        selected = label is not None or fieldsel is not None
        return ListPage([self.present(info, o) for o in items], token_rv or rv, token,
                        remaining if token and not selected else None)

    async def _list_filtered(self, scope: Scope, after: Key | None, limit: int,
                             matches: Callable[[Obj], bool], at_rv: int | None = None,
                             needles: tuple[bytes, ...] = (), *, selective: bool = False
                             ) -> tuple[builtins.list[Obj], int, Key | None, int]:
        """Up to ``limit`` objects of ``scope`` after ``after`` that ``matches``
        (``needles``: the selector's prefilter for the store), the list's rv,
        the key to continue after (None: done) and the objects remaining
        (``selective``: a selector may drop objects, so chunks are read at
        least ``_SELECT_CHUNK`` at a time and cut after the last one kept)."""
        out: builtins.list[Obj] = []
        rv = 0
        while True:
            want = (limit - len(out)) if limit else None
            chunk = max(want, _SELECT_CHUNK) if want and selective else want
            res = await self.store.list(scope, after=after, limit=chunk, rv=at_rv,
                                        contains=needles)
            if not rv:
                rv = res.rv
                # every further chunk at the first one's revision (where kept)
                at_rv = at_rv or rv
            kept = [o for o in res.items if matches(o)]
            if want and len(kept) > want:  # a bigger chunk than asked: cut it
                out.extend(kept[:want])
                md = out[-1].get("metadata") or {}
                return out, rv, Key(scope.resource, str(md.get("namespace") or ""),
                                    str(md.get("name") or "")), 0
            out.extend(kept)
            if res.next_name is None:
                return out, rv, None, 0
            after = res.next_name
            if limit and len(out) >= limit:
                return out, rv, after, res.remaining

    def _encode_continue(self, last: Key, rv: int) -> str:
        raw = orjson.dumps({"v": "racksmith/1", "rv": rv, "ns": last.namespace,
                            "name": last.name})
        return base64.urlsafe_b64encode(raw).decode()

    def _decode_continue(self, info: ResourceInfo, token: str) -> tuple[Key, int]:
        try:
            data = orjson.loads(base64.urlsafe_b64decode(token.encode()))
            return Key(storage_resource(info), str(data["ns"]), str(data["name"])), int(
                data["rv"])
        except (ValueError, KeyError, TypeError, orjson.JSONDecodeError):
            raise errors.bad_request("continue key is not valid: illegal base64 data or "
                                     "unknown format") from None

    # ---- shared write checks --------------------------------------------------

    def check_identity(self, info: ResourceInfo, obj: Any, namespace: str,
                       name: str | None) -> Obj:
        """``obj`` as a body for ``info``: an object whose apiVersion, kind,
        metadata types and namespace agree with the request (400 otherwise)."""
        if not isinstance(obj, dict):
            raise errors.bad_request(
                f"the body of the request was not a JSON object ({type(obj).__name__})")
        api_version = obj.get("apiVersion")
        kind = obj.get("kind")
        if api_version and api_version != info.api_version:
            raise errors.bad_request(
                f"the API version in the data ({api_version}) does not match the expected "
                f"API version ({info.api_version})")
        if kind and kind != info.kind:
            raise errors.bad_request(
                f"the kind in the data ({kind}) does not match the expected kind ({info.kind})")
        meta = obj.get("metadata")
        if meta is None:
            meta = obj["metadata"] = {}
        if not isinstance(meta, dict):
            raise errors.bad_request("metadata must be an object")
        check_metadata_types(info.kind, meta)
        corevalidation.check_decoding(info, obj)
        body_ns = meta.get("namespace")
        if info.namespaced and body_ns and namespace and body_ns != namespace:
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on "
                "the request")
        if name is not None and meta.get("name") and meta.get("name") != name:
            raise errors.bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on "
                f"the URL ({name})")
        if name is not None and not meta.get("name"):
            meta["name"] = name
        return obj

    def _schema_pass(self, info: ResourceInfo, obj: Obj, opts: WriteOptions,
                     warnings: builtins.list[str]) -> None:
        """Prune (honouring fieldValidation), default and validate ``obj``."""
        if info.schema is None:
            return
        unknown = schemalib.prune(info.schema, obj)
        if unknown:
            if opts.field_validation == "Strict":
                detail = ", ".join(f'unknown field "{p}"' for p in unknown)
                raise ApiError(400, "BadRequest",
                               f'{info.kind} in version "{info.version}" cannot be handled '
                               f"as a {info.kind}: strict decoding error: {detail}")
            if opts.field_validation != "Ignore":
                warnings.extend(f'unknown field "{p}"' for p in unknown)
        schemalib.apply_defaults(info.schema, obj)
        causes = schemalib.validate(info.schema, obj)
        if causes:
            raise errors.invalid(info.kind, _name(obj), causes, group=info.group)

    def _validate(self, info: ResourceInfo, obj: Obj, namespace: str,
                  old: Obj | None = None) -> None:
        causes: list[Cause] = validate_metadata(info, obj, namespace=namespace)
        causes.extend(corevalidation.validate(info, obj, old))
        if info.group == "apiextensions.k8s.io" and info.plural == "customresourcedefinitions":
            causes.extend(crdlib.validate_crd(obj))
        if causes:
            raise errors.invalid(info.kind, _name(obj), causes, group=info.group)

    def _admit(self, info: ResourceInfo, namespace: str, obj: Obj, old: Obj | None,
               opts: WriteOptions) -> None:
        for check in self.admission:
            check(info, namespace, obj, old, opts.user)

    async def _check_namespace(self, info: ResourceInfo, namespace: str) -> None:
        if not info.namespaced or not self.namespace_check:
            return
        if not namespace:
            raise errors.bad_request("the namespace of the object is required")
        if self._namespaces is not None:
            terminating = self._namespaces.get(namespace)
            if terminating is None:
                raise errors.not_found("namespaces", namespace)
        else:
            try:
                ns = await self.store.get(Key("core/namespaces", "", namespace))
            except NotFoundError:
                raise errors.not_found("namespaces", namespace) from None
            terminating = bool(ns.get("metadata", {}).get("deletionTimestamp"))
        if terminating:
            raise errors.forbidden(
                f'unable to create new content in namespace {namespace} because it is being '
                "terminated", kind=info.plural, group=info.group)

    async def load_namespaces(self) -> None:
        """Serve the namespace check of every create from memory from now on
        (what exists, what is terminating), kept current by this service's own
        writes — kube-apiserver's NamespaceLifecycle admission does the same
        from an informer. Only for a store this service alone writes."""
        found: dict[str, bool] = {}
        after: Key | None = None
        while True:
            page = await self.store.list(Scope("core/namespaces"), after=after, limit=500)
            for obj in page.items:
                meta = obj.get("metadata", {})
                found[str(meta.get("name"))] = bool(meta.get("deletionTimestamp"))
            if not page.items or page.next_name is None:
                break
            after = page.next_name
        self._namespaces = found

    async def observe(self, info: ResourceInfo, key: Key, old: Obj | None,
                      new: Obj | None) -> None:
        """A write made elsewhere (another replica on the same etcd): the
        write hooks run as if it had been made here."""
        await self._run_hooks(info, key, old, new)

    async def _run_hooks(self, info: ResourceInfo, key: Key, old: Obj | None,
                         new: Obj | None) -> None:
        if self._namespaces is not None and key.resource == "core/namespaces":
            if new is None:
                self._namespaces.pop(key.name, None)
            else:
                self._namespaces[key.name] = bool(new.get("metadata", {}).get(
                    "deletionTimestamp"))
        for hook in self.hooks:
            await hook(info, key, old, new)

    # ---- create ---------------------------------------------------------------

    async def create(self, info: ResourceInfo, namespace: str, body: Any,
                     opts: WriteOptions) -> WriteResult:
        obj = self.check_identity(info, json_copy(body), namespace, None)
        if obj["metadata"].get("resourceVersion"):
            raise errors.bad_request("resourceVersion should not be set on objects to be "
                                     "created")
        namespace = namespace or str(obj["metadata"].get("namespace") or "")
        if info.namespaced and not namespace:
            namespace = "default"
        warnings: builtins.list[str] = []

        def prepare() -> None:
            prepare_create(info, obj, namespace=namespace)
            self._schema_pass(info, obj, opts, warnings)
            builtin_defaults(info, obj)
            self._validate(info, obj, namespace)
            self._admit(info, namespace, obj, None, opts)
            if info.plural == "namespaces" and info.group == "":
                obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
                obj["status"] = {"phase": "Active"}
            patching.record_update(None, obj, manager=opts.field_manager or "unknown",
                                   api_version=info.api_version, now=now_rfc3339(),
                                   typ=_object_type(info))

        await _pure(prepare, opts)
        await self._check_namespace(info, namespace)
        key = self.key(info, namespace, _name(obj))
        if opts.dry_run:
            if await self._get_raw(info, key) is not None:
                raise errors.already_exists(info.plural, key.name, group=info.group)
            return WriteResult(obj, created=True, warnings=warnings)
        try:
            stored = await self.store.create(key, to_storage(info, obj))
        except AlreadyExistsError:
            raise errors.already_exists(info.plural, key.name, group=info.group) from None
        await self._run_hooks(info, key, None, json_copy(stored))
        return WriteResult(self.present(info, stored), created=True, warnings=warnings)

    # ---- update ---------------------------------------------------------------

    async def update(self, info: ResourceInfo, namespace: str, name: str, body: Any,
                     opts: WriteOptions, *, subresource: str = "") -> WriteResult:
        obj = self.check_identity(info, json_copy(body), namespace, name)
        key = self.key(info, namespace, name)
        old = await self._get_raw(info, key)
        if old is None:
            raise errors.not_found(info.plural, name, group=info.group)
        old = self.present(info, old)
        want_rv = obj["metadata"].get("resourceVersion")
        if want_rv and str(want_rv) != old["metadata"].get("resourceVersion"):
            raise errors.conflict(info.plural, name, "the object has been modified; please "
                                  "apply your changes to the latest version and try again",
                                  group=info.group)
        return await self._commit_update(info, key, old, obj, opts, subresource=subresource)

    async def _commit_update(self, info: ResourceInfo, key: Key, old: Obj, new: Obj,
                             opts: WriteOptions, *, subresource: str = "",
                             skip_managed: bool = False) -> WriteResult:
        warnings: builtins.list[str] = []

        def prepare() -> None:
            check_depth(new, 2 * MAX_DEPTH)
            new["metadata"]["resourceVersion"] = old["metadata"].get("resourceVersion")
            prepare_update(info, old, new, subresource=subresource)
            self._schema_pass(info, new, opts, warnings)
            builtin_defaults(info, new)
            self._validate(info, new, key.namespace, old)
            self._admit(info, key.namespace, new, old, opts)
            added = new_finalizers_while_deleting(old, new)
            if added:
                raise errors.invalid(info.kind, key.name, [Cause(
                    "metadata.finalizers", f'Forbidden: no new finalizers can be added if the '
                    f'object is being deleted, found new finalizers {added}',
                    "FieldValueForbidden")], group=info.group)
            if not skip_managed:
                patching.record_update(old, new, manager=opts.field_manager or "unknown",
                                       api_version=info.api_version, now=now_rfc3339(),
                                       subresource=subresource, typ=_object_type(info))

        await _pure(prepare, opts)
        if _same(old, new):
            return WriteResult(old, warnings=warnings)
        old_rv = int(old["metadata"]["resourceVersion"])
        finishing = (new["metadata"].get("deletionTimestamp")
                     and not new["metadata"].get("finalizers")
                     and not self._blocking_spec_finalizers(info, new))
        if opts.dry_run:
            return WriteResult(new, warnings=warnings)
        try:
            if finishing:
                stored = await self.store.delete(key, expected_rv=old_rv)
                await self._run_hooks(info, key, old, None)
                return WriteResult(self.present(info, stored), warnings=warnings, deleted=True)
            stored = await self.store.update(key, to_storage(info, new), expected_rv=old_rv)
        except ConflictError:
            raise errors.conflict(info.plural, key.name, "the object has been modified; please "
                                  "apply your changes to the latest version and try again",
                                  group=info.group) from None
        except NotFoundError:
            raise errors.not_found(info.plural, key.name, group=info.group) from None
        await self._run_hooks(info, key, old, json_copy(stored))
        return WriteResult(self.present(info, stored), warnings=warnings)

    @staticmethod
    def _blocking_spec_finalizers(info: ResourceInfo, obj: Obj) -> bool:
        if info.group == "" and info.plural == "namespaces":
            return bool(obj.get("spec", {}).get("finalizers"))
        return False

    # ---- patch ----------------------------------------------------------------

    async def patch(self, info: ResourceInfo, namespace: str, name: str, content_type: str,
                    patch: Any, opts: WriteOptions, *, subresource: str = "") -> WriteResult:
        if content_type == PATCH_STRATEGIC and not info.builtin:
            raise errors.unsupported_media_type(content_type)
        if content_type not in PATCH_TYPES:
            raise errors.unsupported_media_type(content_type)
        key = self.key(info, namespace, name)
        lock = self._key_lock(key)
        try:
            async with lock:
                return await self._patch_attempts(info, key, namespace, name, content_type,
                                                  patch, opts, subresource)
        finally:
            if not lock.locked() and not getattr(lock, "_waiters", None) and \
                    self._locks.get(key) is lock:
                del self._locks[key]

    def _key_lock(self, key: Key) -> asyncio.Lock:
        """Patches of one object are serialised in this process, so they do not
        race each other into conflicts (other writers are handled by retries)."""
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        return lock

    async def _patch_attempts(self, info: ResourceInfo, key: Key, namespace: str, name: str,
                              content_type: str, patch: Any, opts: WriteOptions,
                              subresource: str) -> WriteResult:
        for _attempt in range(MAX_PATCH_RETRIES):
            raw = await self._get_raw(info, key)
            if raw is None:
                if content_type == PATCH_APPLY:
                    return await self._apply_create(info, namespace, name, patch, opts)
                raise errors.not_found(info.plural, name, group=info.group)
            old = self.present(info, raw)
            old_rv = old["metadata"].get("resourceVersion")
            new = self._patched(info, old, content_type, patch, opts, subresource)
            # A patch that sets metadata.resourceVersion is a precondition;
            # otherwise the merged object carries the current one.
            want_rv = (new.get("metadata") or {}).get("resourceVersion") if isinstance(
                new, dict) and isinstance(new.get("metadata"), dict) else None
            new = self.check_identity(info, new, namespace, name)
            if want_rv and str(want_rv) != old_rv:
                raise errors.conflict(info.plural, name, "the object has been modified; please "
                                      "apply your changes to the latest version and try again",
                                      group=info.group)
            try:
                return await self._commit_update(
                    info, key, old, new, opts, subresource=subresource,
                    skip_managed=content_type == PATCH_APPLY)
            except ApiError as exc:
                # Lost a race with another writer: re-read and re-apply. A
                # patch that pinned the old resourceVersion fails above.
                if exc.code == 409 and exc.reason == "Conflict" and \
                        exc.message.endswith("try again"):
                    continue
                raise
        raise errors.conflict(info.plural, name, "too many concurrent updates; try again",
                              group=info.group)

    def _patched(self, info: ResourceInfo, old: Obj, content_type: str, patch: Any,
                 opts: WriteOptions, subresource: str) -> Obj:
        target = json_copy(old)
        try:
            if content_type == PATCH_MERGE:
                return patching.json_merge_patch(target, patch)
            if content_type == PATCH_JSON:
                return patching.json_patch(target, patch)
            if content_type == PATCH_STRATEGIC:
                return patching.strategic_merge_patch(target, patch)
            applied = self.check_identity(info, copy.deepcopy(patch), old["metadata"].get(
                "namespace", ""), old["metadata"]["name"])
            self._require_apply_identity(info, patch)
            return patching.apply_patch(target, applied, manager=self._apply_manager(opts),
                                        force=opts.force, now=now_rfc3339(),
                                        typ=_object_type(info))
        except patching.PatchTestFailed as exc:
            raise errors.invalid(info.kind, _name(old), [Cause("", str(exc))],
                                 group=info.group) from None
        except patching.PatchError as exc:
            if exc.code == 422:
                raise errors.invalid(info.kind, _name(old), [Cause("", str(exc))],
                                     group=info.group) from None
            raise errors.bad_request(str(exc)) from None
        except patching.ApplyConflict as exc:
            raise self._apply_conflict(info, _name(old), exc) from None

    @staticmethod
    def _apply_manager(opts: WriteOptions) -> str:
        if not opts.field_manager:
            raise errors.bad_request("PATCH with apply-patch requires the fieldManager "
                                     "query parameter")
        return opts.field_manager

    @staticmethod
    def _require_apply_identity(info: ResourceInfo, patch: Any) -> None:
        if not isinstance(patch, dict) or not patch.get("apiVersion") or not patch.get("kind"):
            raise errors.bad_request("apply patches must set apiVersion and kind")

    @staticmethod
    def _apply_conflict(info: ResourceInfo, name: str, exc: patching.ApplyConflict) -> ApiError:
        return errors.ApiError(409, "Conflict", exc.message, kind=info.plural, name=name,
                               group=info.group, causes=exc.causes())

    async def _apply_create(self, info: ResourceInfo, namespace: str, name: str, patch: Any,
                            opts: WriteOptions) -> WriteResult:
        manager = self._apply_manager(opts)
        self._require_apply_identity(info, patch)
        body = self.check_identity(info, copy.deepcopy(patch), namespace, name)
        try:
            obj = patching.apply_patch(None, body, manager=manager, force=opts.force,
                                       now=now_rfc3339(), typ=_object_type(info))
        except patching.PatchError as exc:
            raise errors.bad_request(str(exc)) from None
        managed = obj.get("metadata", {}).get("managedFields")
        create_opts = dataclasses.replace(opts, field_manager=manager)
        result = await self._create_keeping_managed(info, namespace, obj, create_opts, managed)
        return result

    async def _create_keeping_managed(self, info: ResourceInfo, namespace: str, obj: Obj,
                                      opts: WriteOptions, managed: Any) -> WriteResult:
        obj = self.check_identity(info, obj, namespace, None)
        namespace = namespace or str(obj["metadata"].get("namespace") or "")
        warnings: list[str] = []
        prepare_create(info, obj, namespace=namespace)
        self._schema_pass(info, obj, opts, warnings)
        builtin_defaults(info, obj)
        self._validate(info, obj, namespace)
        self._admit(info, namespace, obj, None, opts)
        await self._check_namespace(info, namespace)
        if managed is not None:
            obj["metadata"]["managedFields"] = managed
        key = self.key(info, namespace, _name(obj))
        if opts.dry_run:
            return WriteResult(obj, created=True, warnings=warnings)
        try:
            stored = await self.store.create(key, to_storage(info, obj))
        except AlreadyExistsError:
            raise errors.already_exists(info.plural, key.name, group=info.group) from None
        await self._run_hooks(info, key, None, copy.deepcopy(stored))
        return WriteResult(self.present(info, stored), created=True, warnings=warnings)

    # ---- delete ---------------------------------------------------------------

    async def delete(self, info: ResourceInfo, namespace: str, name: str,
                     options: Obj | None = None, *, dry_run: bool = False) -> WriteResult:
        options = options or {}
        key = self.key(info, namespace, name)
        for _attempt in range(MAX_PATCH_RETRIES):
            raw = await self._get_raw(info, key)
            if raw is None:
                raise errors.not_found(info.plural, name, group=info.group)
            obj = self.present(info, raw)
            meta = obj["metadata"]
            pre = options.get("preconditions") or {}
            if pre.get("uid") and pre["uid"] != meta.get("uid"):
                raise errors.conflict(info.plural, name, "Precondition failed: UID in "
                                      f"precondition: {pre['uid']}, UID in object meta: "
                                      f"{meta.get('uid')}", group=info.group)
            if pre.get("resourceVersion") and pre["resourceVersion"] != meta.get(
                    "resourceVersion"):
                raise errors.conflict(info.plural, name, "Precondition failed: "
                                      "ResourceVersion in precondition: "
                                      f"{pre['resourceVersion']}, ResourceVersion in object "
                                      f"meta: {meta.get('resourceVersion')}", group=info.group)
            policy = options.get("propagationPolicy")
            if policy is None and options.get("orphanDependents") is True:
                policy = "Orphan"
            if policy not in (None, "Background", "Foreground", "Orphan"):
                raise errors.invalid("DeleteOptions", "", [Cause(
                    "propagationPolicy", f'Unsupported value: "{policy}": supported values: '
                    '"Foreground", "Background", "Orphan", "nil"', "FieldValueNotSupported")])
            new = copy.deepcopy(obj)
            finalizers = list(new["metadata"].get("finalizers") or [])
            if policy == "Orphan" and "orphan" not in finalizers:
                finalizers.append("orphan")
            if policy == "Foreground" and "foregroundDeletion" not in finalizers:
                finalizers.append("foregroundDeletion")
            is_namespace = info.group == "" and info.plural == "namespaces"
            if finalizers or is_namespace:
                new["metadata"]["finalizers"] = finalizers
                if not finalizers:
                    new["metadata"].pop("finalizers", None)
                if not meta.get("deletionTimestamp"):
                    new["metadata"]["deletionTimestamp"] = now_rfc3339()
                    new["metadata"]["deletionGracePeriodSeconds"] = 0
                if is_namespace:
                    new.setdefault("status", {})["phase"] = "Terminating"
                if _same(obj, new):
                    return WriteResult(obj)
                if dry_run:
                    return WriteResult(new)
                try:
                    stored = await self.store.update(key, to_storage(info, copy.deepcopy(new)),
                                                     expected_rv=int(meta["resourceVersion"]))
                except ConflictError:
                    continue
                except NotFoundError:
                    raise errors.not_found(info.plural, name, group=info.group) from None
                await self._run_hooks(info, key, obj, copy.deepcopy(stored))
                return WriteResult(self.present(info, stored))
            if dry_run:
                return WriteResult(obj, deleted=True)
            try:
                stored = await self.store.delete(key, expected_rv=int(meta["resourceVersion"]))
            except ConflictError:
                continue
            except NotFoundError:
                raise errors.not_found(info.plural, name, group=info.group) from None
            await self._run_hooks(info, key, obj, None)
            return WriteResult(self.present(info, stored), deleted=True)
        raise errors.conflict(info.plural, name, "too many concurrent updates; try again",
                              group=info.group)

    async def delete_collection(self, info: ResourceInfo, namespace: str | None,
                                list_opts: ListOptions, options: Obj | None = None, *,
                                dry_run: bool = False) -> builtins.list[Obj]:
        page = await self.list(info, namespace, dataclasses.replace(list_opts, limit=0,
                                                                     continue_token=""))
        deleted: builtins.list[Obj] = []
        for obj in page.items:
            meta = obj["metadata"]
            try:
                res = await self.delete(info, meta.get("namespace", ""), meta["name"],
                                        options, dry_run=dry_run)
            except ApiError as exc:
                if exc.code == 404:
                    continue
                raise
            deleted.append(res.obj)
        return deleted


async def _pure(step: Callable[[], None], opts: WriteOptions) -> None:
    """Run a pure, CPU-bound step of a write: in a worker thread for a large
    request (it works on the request's private copies only), inline otherwise."""
    if opts.large:
        await asyncio.to_thread(step)
    else:
        step()


def _same(old: Obj, new: Obj) -> bool:
    """Equal apart from managedFields timestamps and resourceVersion."""
    def strip(o: Obj) -> Obj:
        c = dict(o)
        meta = dict(c.get("metadata", {}))
        meta.pop("resourceVersion", None)
        mf = meta.get("managedFields")
        if isinstance(mf, list):
            meta["managedFields"] = [{k: v for k, v in e.items() if k != "time"}
                                     for e in mf if isinstance(e, dict)]
        c["metadata"] = meta
        return c
    return strip(old) == strip(new)

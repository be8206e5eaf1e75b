"""The registry of served resources.

Owns: :class:`ResourceInfo` (everything the server needs to know about one
resource at one version: names, scope, schema, subresources, printer columns,
selectable fields) and :class:`Registry`, the live set of served resources.

Built-in kinds are registered at start (see ``builtins``); custom kinds come
and go with ``CustomResourceDefinition`` objects exactly as on a real cluster:
:func:`infos_from_crd` turns a CRD into one ``ResourceInfo`` per served
version. All versions of one resource share one storage key (no conversion
webhooks: the ``None`` strategy, only ``apiVersion`` changes).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")

DEFAULT_SELECTABLE = ("metadata.name", "metadata.namespace")


@dataclass(frozen=True)
class ResourceInfo:
    """One resource (plural) of one group/version."""

    group: str
    version: str
    kind: str
    plural: str
    singular: str
    namespaced: bool
    schema: Obj | None = None
    """openAPIV3Schema; ``None`` means no schema validation or pruning."""
    subresources: frozenset[str] = frozenset()
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    printer_columns: tuple[Obj, ...] = ()
    selectable_fields: tuple[str, ...] = ()
    """Field selector names besides metadata.name/namespace (``spec.nodeName``)."""
    builtin: bool = False
    storage_version: str = ""
    verbs: tuple[str, ...] = ALL_VERBS
    list_kind: str = ""
    preserve_status_on_create: bool = False
    """Built-ins such as Node accept status on create; CRDs with a status
    subresource drop it."""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def storage_key(self) -> str:
        return f"{self.group or 'core'}/{self.plural}"

    @property
    def group_resource(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def list_kind_name(self) -> str:
        return self.list_kind or f"{self.kind}List"

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources

    def all_selectable(self) -> frozenset[str]:
        return frozenset(DEFAULT_SELECTABLE) | frozenset(self.selectable_fields)


@dataclass
class Registry:
    """The resources served right now, indexed for routing and discovery."""

    _by_gvr: dict[tuple[str, str, str], ResourceInfo] = field(default_factory=dict)
    _crd_owned: dict[str, list[tuple[str, str, str]]] = field(default_factory=dict)
    generation: int = 0
    """Bumped on every change so discovery/OpenAPI caches can be invalidated."""

    def add(self, info: ResourceInfo, *, crd_name: str | None = None) -> None:
        key = (info.group, info.version, info.plural)
        self._by_gvr[key] = info
        if crd_name is not None:
            self._crd_owned.setdefault(crd_name, []).append(key)
        self.generation += 1

    def set_crd(self, crd_name: str, infos: Iterable[ResourceInfo]) -> None:
        """Replace what one CRD serves."""
        self.remove_crd(crd_name)
        for info in infos:
            self.add(info, crd_name=crd_name)

    def remove_crd(self, crd_name: str) -> None:
        for key in self._crd_owned.pop(crd_name, []):
            self._by_gvr.pop(key, None)
        self.generation += 1

    def get(self, group: str, version: str, plural: str) -> ResourceInfo | None:
        return self._by_gvr.get((group, version, plural))

    def all(self) -> list[ResourceInfo]:
        return sorted(self._by_gvr.values(), key=lambda i: (i.group, i.version, i.plural))

    def groups(self) -> dict[str, list[str]]:
        """group → served versions, preferred (storage) version first."""
        out: dict[str, list[str]] = {}
        preferred: dict[str, str] = {}
        for info in self._by_gvr.values():
            versions = out.setdefault(info.group, [])
            if info.version not in versions:
                versions.append(info.version)
            if info.storage_version == info.version:
                preferred[info.group] = info.version
        for group, versions in out.items():
            versions.sort(key=_version_priority)
            pref = preferred.get(group)
            if pref in versions:
                versions.remove(pref)
                versions.insert(0, pref)
        return out

    def in_group_version(self, group: str, version: str) -> list[ResourceInfo]:
        return [i for (g, v, _), i in sorted(self._by_gvr.items()) if g == group and v == version]

    def by_storage_key(self, storage_key: str) -> list[ResourceInfo]:
        return [i for i in self._by_gvr.values() if i.storage_key == storage_key]

    def storage_keys(self) -> dict[str, ResourceInfo]:
        """storage key → the info of its storage version."""
        out: dict[str, ResourceInfo] = {}
        for info in self._by_gvr.values():
            if info.storage_key not in out or info.version == info.storage_version:
                out[info.storage_key] = info
        return out

    def resource(self, group: str, plural: str) -> ResourceInfo | None:
        """``group/plural`` in its storage version (any served one if none stores)."""
        found = None
        for info in self._by_gvr.values():
            if info.group == group and info.plural == plural:
                if info.version == info.storage_version:
                    return info
                found = found or info
        return found

    def find_kind(self, api_version: str, kind: str) -> ResourceInfo | None:
        group, _, version = api_version.rpartition("/")
        for info in self._by_gvr.values():
            if info.group == group and info.version == version and info.kind == kind:
                return info
        return None


def _version_priority(version: str) -> tuple[int, int, int, str]:
    """Kubernetes version priority: GA > beta > alpha, then by numbers."""
    import re

    m = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if not m:
        return (3, 0, 0, version)
    major = int(m.group(1))
    stage = {None: 0, "beta": 1, "alpha": 2}[m.group(2)]
    minor = int(m.group(3) or 0)
    return (stage, -major, -minor, version)


def infos_from_crd(crd: Obj) -> list[ResourceInfo]:
    """The ResourceInfos a (validated) CRD object serves."""
    spec = crd.get("spec", {})
    names = spec.get("names", {})
    group = spec["group"]
    namespaced = spec.get("scope", "Namespaced") == "Namespaced"
    storage_version = next(
        (v["name"] for v in spec.get("versions", []) if v.get("storage")), "")
    infos: list[ResourceInfo] = []
    for ver in spec.get("versions", []):
        if not ver.get("served", True):
            continue
        subresources = frozenset(ver.get("subresources", {}) or {})
        schema = (ver.get("schema") or {}).get("openAPIV3Schema")
        selectable = tuple(
            s["jsonPath"].lstrip(".") for s in ver.get("selectableFields", []) or [])
        infos.append(ResourceInfo(
            group=group,
            version=ver["name"],
            kind=names["kind"],
            plural=names["plural"],
            singular=names.get("singular") or names["kind"].lower(),
            namespaced=namespaced,
            schema=schema,
            subresources=subresources,
            short_names=tuple(names.get("shortNames", []) or []),
            categories=tuple(names.get("categories", []) or []),
            printer_columns=tuple(ver.get("additionalPrinterColumns", []) or []),
            selectable_fields=selectable,
            builtin=False,
            storage_version=storage_version,
            list_kind=names.get("listKind", ""),
        ))
    return infos

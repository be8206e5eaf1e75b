"""API discovery documents.

Owns: ``/version``, ``/api``, ``/apis`` (plain ``APIGroupList`` and
aggregated ``APIGroupDiscoveryList`` v2/v2beta1), ``/api/v1``,
``/apis/<group>`` and ``/apis/<group>/<version>`` (``APIResourceList`` with
subresources), all derived from the live :class:`Registry`.
"""

from __future__ import annotations

from typing import Any

from racksmith import __version__
from racksmith.apiserver.registry import Registry, ResourceInfo

Obj = dict[str, Any]

KUBE_MINOR = "33"
"""The Kubernetes minor version the server reports (the kubectl dispatcher
picks ``kubectl.1.<minor>`` from it)."""

SUBRESOURCE_VERBS = {
    "status": ["get", "patch", "update"],
    "finalize": ["update"],
    "eviction": ["create"],
    "token": ["create"],
}
SUBRESOURCE_KIND = {"eviction": ("policy", "v1", "Eviction"),
                    "token": ("authentication.k8s.io", "v1", "TokenRequest")}


def version_info() -> Obj:
    return {
        "major": "1",
        "minor": KUBE_MINOR,
        "gitVersion": f"v1.{KUBE_MINOR}.0+racksmith.{__version__}",
        "gitCommit": "racksmith",
        "gitTreeState": "clean",
        "buildDate": "2026-11-29T00:00:00Z",
        "goVersion": "python",
        "compiler": "cpython",
        "platform": "linux/amd64",
    }


def _resource_entry(info: ResourceInfo) -> list[Obj]:
    entries: list[Obj] = [{
        "name": info.plural,
        "singularName": info.singular,
        "namespaced": info.namespaced,
        "kind": info.kind,
        "verbs": list(info.verbs),
        **({"shortNames": list(info.short_names)} if info.short_names else {}),
        **({"categories": list(info.categories)} if info.categories else {}),
        "storageVersionHash": "",
    }]
    for sub in sorted(info.subresources):
        group, version, kind = SUBRESOURCE_KIND.get(sub, (info.group, info.version, info.kind))
        entry: Obj = {"name": f"{info.plural}/{sub}", "singularName": "",
                      "namespaced": info.namespaced, "kind": kind,
                      "verbs": SUBRESOURCE_VERBS.get(sub, ["get"])}
        if sub in SUBRESOURCE_KIND:
            entry["group"], entry["version"] = group, version
        entries.append(entry)
    return entries


def resource_list(registry: Registry, group: str, version: str) -> Obj | None:
    infos = registry.in_group_version(group, version)
    if not infos:
        return None
    resources: list[Obj] = []
    for info in infos:
        resources.extend(_resource_entry(info))
    return {"kind": "APIResourceList", "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version,
            "resources": resources}


def core_versions(server_address: str) -> Obj:
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]}


def _group_entry(group: str, versions: list[str]) -> Obj:
    gvs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": gvs, "preferredVersion": gvs[0]}


def group_list(registry: Registry) -> Obj:
    groups = registry.groups()
    return {"kind": "APIGroupList", "apiVersion": "v1",
            "groups": [_group_entry(g, vs) for g, vs in sorted(groups.items()) if g]}


def group(registry: Registry, name: str) -> Obj | None:
    versions = registry.groups().get(name)
    if not versions or not name:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group_entry(name, versions)}


def _aggregated_resource(info: ResourceInfo) -> Obj:
    entry: Obj = {
        "resource": info.plural,
        "responseKind": {"group": info.group, "version": info.version, "kind": info.kind},
        "scope": "Namespaced" if info.namespaced else "Cluster",
        "singularResource": info.singular,
        "verbs": list(info.verbs),
    }
    if info.short_names:
        entry["shortNames"] = list(info.short_names)
    if info.categories:
        entry["categories"] = list(info.categories)
    subs = []
    for sub in sorted(info.subresources):
        group_, version, kind = SUBRESOURCE_KIND.get(sub, (info.group, info.version, info.kind))
        subs.append({"subresource": sub,
                     "responseKind": {"group": group_, "version": version, "kind": kind},
                     "verbs": SUBRESOURCE_VERBS.get(sub, ["get"])})
    if subs:
        entry["subresources"] = subs
    return entry


def aggregated(registry: Registry, *, core: bool, version: str) -> Obj:
    """The aggregated discovery document for ``/api`` (core) or ``/apis``."""
    items = []
    for group_name, versions in sorted(registry.groups().items()):
        if (group_name == "") != core:
            continue
        items.append({
            "metadata": {"name": group_name, "creationTimestamp": None},
            "versions": [{
                "version": v,
                "resources": [_aggregated_resource(i)
                              for i in registry.in_group_version(group_name, v)],
                "freshness": "Current",
            } for v in versions],
        })
    return {"kind": "APIGroupDiscoveryList", "apiVersion": f"apidiscovery.k8s.io/{version}",
            "metadata": {}, "items": items}

"""``racksmith export``: BareMetalHosts as manifests that move to another site.

Owns :func:`exported_host` (pure: a live BareMetalHost → the manifest that
recreates it: apiVersion, kind, name, labels, annotations and spec, with
its status copied into Metal3's ``baremetalhost.metal3.io/status``
annotation, so the host created from it takes that status and is not
inspected again) and :func:`export_hosts` (reads the hosts live through the
kubeconfig). Left out: the namespace (the manifests apply into the one
``kubectl -n`` names), everything the API server or a controller sets
(uid, resourceVersion, managedFields, finalizers, timestamps, owner
references), kubectl's last-applied record, and the status itself. The BMC
credentials Secrets are not exported: they are Secrets, moved with
``kubectl get secret -o yaml`` like any other.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from racksmith.kinds.hostannotations import STATUS
from racksmith.runtime.client import Client
from racksmith.runtime.kubeclient import api_client
from racksmith.runtime.resources import HOSTS

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
"""kubectl's record of the last apply at the old site: left out (the apply at
the new site writes its own)."""


def exported_host(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The manifest that recreates the host ``obj`` elsewhere (module docstring)."""
    meta = obj.get("metadata") or {}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items()
                   if k not in (STATUS, LAST_APPLIED)}
    status = obj.get("status")
    if status:
        annotations[STATUS] = json.dumps(status, sort_keys=True, separators=(",", ":"))
    out_meta: dict[str, Any] = {"name": meta.get("name")}
    if meta.get("labels"):
        out_meta["labels"] = dict(meta["labels"])
    if annotations:
        out_meta["annotations"] = annotations
    return {"apiVersion": obj.get("apiVersion") or f"{HOSTS.group}/{HOSTS.version}",
            "kind": obj.get("kind") or "BareMetalHost",
            "metadata": out_meta, "spec": dict(obj.get("spec") or {})}


async def export_hosts(kubeconfig: Path | None, namespace: str | None
                       ) -> list[dict[str, Any]]:
    """Every BareMetalHost (of ``namespace``; None: all), exported, by name."""
    client = await api_client(kubeconfig)
    try:
        api = Client(client, field_manager="racksmith-cli")
        hosts = await api.list(HOSTS, namespace, live=True)
    finally:
        await client.close()
    return [exported_host(h) for h in sorted(
        hosts, key=lambda h: (h["metadata"].get("namespace") or "", h["metadata"]["name"]))]

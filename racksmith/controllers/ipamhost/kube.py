"""The IpamHost and L2Template controllers' reads and writes, over kubernetes_asyncio.

Owns every API call of the package except claims and releases (those are
``racksmith.ipamclaims.claims``): gets and lists of custom objects,
replaces of objects and of their status subresource (optimistic: a 409 is
:class:`Conflict`), and the IPaddrs of one IpamHost. Events go through the runtime's
``EventRecorder``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kubernetes_asyncio.client import CustomObjectsApi
from kubernetes_asyncio.client.exceptions import ApiException

from racksmith.controllers.ipamhost.names import FIELD_MANAGER, IPAMHOST_LABEL
from racksmith.runtime.resources import IPADDRS
from racksmith.runtime.source import Resource


class Conflict(Exception):
    """A write lost an optimistic-concurrency race (409): re-read and retry."""


class Kube:
    """The package's API access (see the module docstring)."""

    def __init__(self, api_client: Any) -> None:
        self.custom = CustomObjectsApi(api_client)

    async def get(self, res: Resource, namespace: str, name: str) -> dict[str, Any] | None:
        """The object, or None if it does not exist."""
        try:
            obj: dict[str, Any] = await self.custom.get_namespaced_custom_object(
                res.group, res.version, namespace, res.plural, name)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return obj

    async def list_objects(self, res: Resource, namespace: str, label_selector: str = "",
                   page_size: int = 500) -> list[dict[str, Any]]:
        """Every object of ``res`` in ``namespace`` matching ``label_selector``."""
        items: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"limit": page_size}
            if label_selector:
                kwargs["label_selector"] = label_selector
            if token:
                kwargs["_continue"] = token
            out = await self.custom.list_namespaced_custom_object(
                res.group, res.version, namespace, res.plural, **kwargs)
            items.extend(out.get("items") or [])
            token = (out.get("metadata") or {}).get("continue")
            if not token:
                return items

    async def host_ipaddrs(self, namespaces: Iterable[str], host: str
                           ) -> list[dict[str, Any]]:
        """IPaddrs labelled for IpamHost ``host`` in each of ``namespaces``."""
        out: list[dict[str, Any]] = []
        for namespace in sorted(set(namespaces)):
            out.extend(await self.list_objects(IPADDRS, namespace, f"{IPAMHOST_LABEL}={host}"))
        return out

    async def replace(self, res: Resource, obj: dict[str, Any]) -> dict[str, Any] | None:
        """PUT ``obj`` (metadata and spec); None if it is gone. Raises Conflict."""
        meta = obj["metadata"]
        try:
            out: dict[str, Any] = await self.custom.replace_namespaced_custom_object(
                res.group, res.version, meta["namespace"], res.plural, meta["name"], obj,
                field_manager=FIELD_MANAGER)
        except ApiException as exc:
            _conflict_or_raise(exc)
            return None
        return out

    async def replace_status(self, res: Resource, obj: dict[str, Any]
                             ) -> dict[str, Any] | None:
        """PUT ``obj``'s status subresource; None if it is gone. Raises Conflict."""
        meta = obj["metadata"]
        try:
            out: dict[str, Any] = await self.custom.replace_namespaced_custom_object_status(
                res.group, res.version, meta["namespace"], res.plural, meta["name"], obj,
                field_manager=FIELD_MANAGER)
        except ApiException as exc:
            _conflict_or_raise(exc)
            return None
        return out


def _conflict_or_raise(exc: ApiException) -> None:
    """Return on 404 (the object is gone), raise Conflict on 409, else re-raise."""
    if exc.status == 409:
        raise Conflict("conflicting write, retrying with a fresh read") from None
    if exc.status == 404:
        return
    raise exc

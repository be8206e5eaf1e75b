"""``Resource``: one collection of the Kubernetes REST API (group, version,
plural) and its path. Owned here so the informer, the client and the
sources name collections one way."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Resource:
    """A resource collection: ``group`` ``""`` is the core API (``/api/v1``)."""

    group: str
    version: str
    plural: str

    def path(self, namespace: str | None = None) -> str:
        """The collection path, across namespaces when ``namespace`` is None."""
        base = f"/api/{self.version}" if not self.group else f"/apis/{self.group}/{self.version}"
        if namespace:
            return f"{base}/namespaces/{namespace}/{self.plural}"
        return f"{base}/{self.plural}"

    def __str__(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


__all__ = ["Resource"]

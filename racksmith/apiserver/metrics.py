"""The API server's own metrics, as kube-apiserver names them.

Owns :class:`RequestMetrics`: ``apiserver_request_total`` — every request
the server answered, by verb (kube's: ``GET``, ``LIST``, ``WATCH``,
``CREATE``, ``UPDATE``, ``PATCH``, ``DELETE``..., or the HTTP method of a
non-resource path), API group, resource, subresource and response code. It
is served on ``/metrics`` before the metrics of the process the server runs
in (``racksmith up``'s controllers). The labels are bounded: resources come
from the registry's paths, codes from the responses; an object's name or
namespace is never a label.

What an operator reads from it: which clients load the server and how
(``rate(apiserver_request_total[5m])`` by resource and verb), and
``bench/idle.py`` counts an idle site's requests with it.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, generate_latest

from racksmith.apiserver.rbac.rules import Attributes


class RequestMetrics:
    """The request counter of one server (a registry of its own)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._requests = Counter(
            "apiserver_request_total",
            "Requests answered, by verb, API group, resource, subresource and HTTP code.",
            ("verb", "group", "resource", "subresource", "code"), registry=self.registry)

    def observe(self, attrs: Attributes, code: int) -> None:
        if attrs.resource_request:
            self._requests.labels(attrs.verb.upper(), attrs.api_group, attrs.resource,
                                  attrs.subresource, str(code)).inc()
        else:
            self._requests.labels(attrs.verb.upper(), "", "", "", str(code)).inc()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

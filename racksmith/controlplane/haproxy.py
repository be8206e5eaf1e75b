"""HAProxy in front of a cluster's API servers, rendered from the cluster. Pure.

Owns :func:`render_haproxy`: the configuration of the proxy that spreads
the traffic of a cluster's endpoint over every control-plane API server
(kubeadm's HA guide, MetalK8s's apiserver proxy, MOSK's keepalived + HAProxy):

* TCP mode: TLS passes through to the API servers, which authenticate
  clients (bearer tokens, client certificates) themselves;
* health checks: ``GET /readyz`` over TLS, expecting 200, verifying the
  server against the cluster CA (``ca_file``), every ``check_interval``;
  ``fall`` failures mark a server down, ``rise`` successes up again — a
  server whose API is up but not ready (its store lost) takes no traffic;
* a connection refused by a dead server is retried on another at once
  (``option redispatch 1``: every retry goes elsewhere) and marks that
  server down without waiting for its health check (``observe layer4
  error-limit 1 on-error mark-down``; the checks bring it back), so
  clients see no error;
* long client and server timeouts: watches stay open for minutes.

Used by the virtual datacenter (a real Debian HAProxy on loopback) and, on
real hosts, by the state items that install HAProxy on the control-plane
machines. The tests check what it renders with ``haproxy -c``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Backend:
    """One control-plane API server."""

    name: str
    host: str
    port: int


def _addr(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def render_haproxy(*, bind_host: str, bind_port: int, backends: Sequence[Backend],
                   ca_file: str, check_interval: str = "2s", fall: int = 2, rise: int = 2,
                   pidfile: str | None = None) -> str:
    """The haproxy.cfg for one cluster's endpoint (see the module docstring)."""
    if not backends:
        raise ValueError("an API endpoint needs at least one control-plane API server")
    names = [b.name for b in backends]
    if len(set(names)) != len(names):
        raise ValueError(f"backend names repeat: {names}")
    lines = [
        "# Rendered by Racksmith from the Cluster: the API endpoint in front of every",
        "# control-plane API server, health-checked on /readyz.",
        "global",
        "    maxconn 4096",
    ]
    if pidfile:
        lines.append(f"    pidfile {pidfile}")
    lines += [
        "",
        "defaults",
        "    mode tcp",
        "    option redispatch 1",
        "    retries 3",
        "    timeout connect 5s",
        "    timeout client 1h",
        "    timeout server 1h",
        "    timeout check 5s",
        "",
        "frontend kube-apiserver",
        f"    bind {_addr(bind_host, bind_port)}",
        "    default_backend kube-apiserver",
        "",
        "backend kube-apiserver",
        "    balance roundrobin",
        "    option httpchk",
        "    http-check send meth GET uri /readyz",
        "    http-check expect status 200",
        f"    default-server check check-ssl verify required ca-file {ca_file} "
        f"inter {check_interval} fall {fall} rise {rise} "
        "observe layer4 error-limit 1 on-error mark-down",
    ]
    lines += [f"    server {b.name} {_addr(b.host, b.port)}" for b in backends]
    return "\n".join(lines) + "\n"

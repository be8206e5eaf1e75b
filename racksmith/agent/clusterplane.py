"""The emulated kubeadm's control plane: what ``kubeadm init`` and ``kubeadm join
--control-plane`` leave on an emulated control-plane host.

Owns, on an emulated host whose Machine has the master role, kubeadm's
stacked layout (one API server and one etcd member per control-plane host),
made from the cluster's certificate authorities that the user data put in
``/etc/kubernetes/pki`` (``racksmith.controlplane.pki``):

- **certificates** kubeadm issues from those authorities on each host:
  ``apiserver`` (serving: the host's control-plane address and its loopback
  image, the VIP and its image, ``kubernetes.default...``),
  ``apiserver-etcd-client``, ``etcd/server``, ``etcd/peer``,
  ``etcd/healthcheck-client`` and ``admin.crt`` (``kubernetes-admin`` in
  ``system:masters``, kubeadm's ``admin.conf``, written beside them);
- **static pods** in ``/etc/kubernetes/manifests`` (run by ``staticpods``):
  ``etcd`` (Debian's etcd, TLS between members and to clients),
  ``kube-apiserver`` (``racksmith apiserver`` on the cluster's PKI, standing
  in for kube-apiserver, on its local etcd member) and ``haproxy`` (Debian's
  HAProxy on the VIP's image, ``racksmith.controlplane.haproxy``, health
  checks on ``/readyz``, with every control-plane member as a backend;
  every HAProxy binds the same address with ``SO_REUSEPORT``, so the kernel
  spreads connections over the live ones, standing in for keepalived);
- **init** (the host the management plane names, ``params.cluster.initNode``,
  as Cluster API's first control-plane machine): etcd starts as a new
  one-member cluster; once the local API server answers ``/readyz``, the
  ConfigMap ``kube-system/kubeadm-config`` is made with ``ClusterStatus``
  (kubeadm's record of the control-plane members, ``apiEndpoints``);
- **join**: waits until the cluster answers at its endpoint (a HostError
  until then: the agent retries the item), reads ``ClusterStatus``, adds
  the host to etcd (``etcdctl member add``, skipped when its peer URL is
  already a member: an agent killed in between does not add it twice; refused
  while another member is still joining, so joins go one at a time as
  Cluster API's control plane does), starts its member with the others as
  its initial cluster, and records itself in ``ClusterStatus``;
- **the controllers' roles**: the ClusterRoles and bindings of
  ``racksmith rbac --in-cluster`` (the user data puts them in
  ``/etc/kubernetes/racksmith/cluster-rbac.yaml``) are applied with the
  host's own admin credentials, so the management plane's controllers
  reach the cluster as identities of their own, never as its admin;
- **every pass** (the agent re-verifies items): the HAProxy configuration
  is rendered again from ``ClusterStatus``, so a member that joined later
  becomes a backend of every host's proxy, and missing or changed roles are
  put back.

Addresses are loopback images (``racksmith.loopback``): the host serves on
its own 127/8 address with kube's ports, so the processes of different
hosts never share a port. Every step checks its own result first: a pass
that finds everything in place changes nothing. Called by ``executors``
(the kubeadm item); never on a real host, where the real kubeadm runs.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import json
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
import yaml
from cryptography import x509
from cryptography.exceptions import InvalidSignature

from racksmith.agent.host import Host, HostError
from racksmith.agent.staticpods import MANIFESTS_DIR
from racksmith.controlplane.haproxy import Backend, render_haproxy
from racksmith.controlplane.kubeconfig import ADMIN_GROUPS, ADMIN_USER
from racksmith.controlplane.pki import KeyPair, issue_client, issue_serving
from racksmith.loopback import LoopbackMap

__all__ = ["ControlPlaneHost", "Member", "cluster_status", "parse_cluster_status"]

PKI = "/etc/kubernetes/pki"
ADMIN_CONF = "/etc/kubernetes/admin.conf"
HAPROXY_CFG = "/etc/haproxy/racksmith-emulated.cfg"
"""The emulated endpoint's HAProxy configuration: not ``/etc/haproxy/haproxy.cfg``,
which the API VIP's state items (``planners.apivip``) write on every
control-plane host, emulated or real."""
ETCD_DATA = "/var/lib/etcd"
APISERVER_DATA = "/var/lib/kube-apiserver"
API_PORT = 6443
ETCD_CLIENT_PORT = 2379
ETCD_PEER_PORT = 2380
KUBEADM_CONFIG = ("kube-system", "kubeadm-config")
STATUS_KEY = "ClusterStatus"
ETCD_PREFIX = "/registry"
RBAC_FILE = "/etc/kubernetes/racksmith/cluster-rbac.yaml"
_RBAC_PLURALS = {"ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings"}
_RBAC_FIELDS = ("rules", "roleRef", "subjects")
_RENEW_BEFORE = dt.timedelta(days=30)


@dataclass(frozen=True)
class Member:
    """One control-plane member as ``ClusterStatus`` records it."""

    name: str
    address: str
    port: int = API_PORT


def cluster_status(members: Sequence[Member]) -> str:
    """kubeadm's ``ClusterStatus`` document (``apiEndpoints`` by node)."""
    return yaml.safe_dump({
        "apiVersion": "kubeadm.k8s.io/v1beta2", "kind": "ClusterStatus",
        "apiEndpoints": {m.name: {"advertiseAddress": m.address, "bindPort": m.port}
                         for m in sorted(members, key=lambda m: m.name)},
    }, sort_keys=True)


def parse_cluster_status(text: str | None) -> list[Member]:
    """The members of a ``ClusterStatus`` document ([] when unusable)."""
    try:
        doc = yaml.safe_load(text or "")
    except yaml.YAMLError:
        return []
    endpoints = doc.get("apiEndpoints") if isinstance(doc, dict) else None
    members: list[Member] = []
    for name, ep in (endpoints or {}).items() if isinstance(endpoints, dict) else ():
        if isinstance(ep, dict) and isinstance(ep.get("advertiseAddress"), str):
            members.append(Member(str(name), ep["advertiseAddress"],
                                  int(ep.get("bindPort") or API_PORT)))
    return sorted(members, key=lambda m: m.name)


def _fresh(cert_pem: bytes | None, ca: KeyPair, now: dt.datetime) -> bool:
    if not cert_pem:
        return False
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
        cert.verify_directly_issued_by(ca.certificate())
    except (ValueError, TypeError, InvalidSignature):
        return False
    return cert.not_valid_after_utc - now > _RENEW_BEFORE


class ControlPlaneHost:
    """The emulated kubeadm on one control-plane host (module docstring)."""

    def __init__(self, host: Host, node: str, cluster: Mapping[str, Any], address: str,
                 network: LoopbackMap, *, ready_timeout: float = 60.0) -> None:
        self.host = host
        self.node = node
        self.cluster = cluster
        self.address = address
        self.network = network
        self.ready_timeout = ready_timeout
        self.image = network.image(address)
        vip = str(cluster.get("apiServerVIP") or "")
        if not vip:
            raise HostError("the cluster has no apiServer.vip: its endpoint is unknown")
        self.vip = vip
        self.vip_image = network.image(vip)
        self.port = int(cluster.get("apiServerPort") or API_PORT)
        self.init = cluster.get("initNode") == node
        self._ssl_context: ssl.SSLContext | None = None

    # --- what is missing (no side effects) --------------------------------------
    def _ca(self, name: str) -> KeyPair:
        cert, key = self.host.read_file(f"{PKI}/{name}.crt"), self.host.read_file(
            f"{PKI}/{name}.key")
        if not cert or not key:
            raise HostError(f"{PKI}/{name}.crt and .key are missing (the user data writes "
                            "the cluster's certificate authorities)")
        return KeyPair(cert, key)

    #: Each certificate kubeadm issues on the host (file stem) → its CA's file stem.
    LEAVES = {"apiserver": "ca", "apiserver-etcd-client": "etcd/ca", "etcd/server": "etcd/ca",
              "etcd/peer": "etcd/ca", "etcd/healthcheck-client": "etcd/ca", "admin": "ca"}

    def _issue(self, stem: str, ca: KeyPair) -> KeyPair:
        local = [self.address, self.image, "127.0.0.1", "localhost", self.node]
        if stem == "apiserver":
            return issue_serving(ca, "kube-apiserver", [
                *local, self.vip, self.vip_image, "kubernetes", "kubernetes.default",
                "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"])
        if stem == "apiserver-etcd-client":
            return issue_client(ca, "kube-apiserver-etcd-client")
        if stem in ("etcd/server", "etcd/peer"):
            return issue_serving(ca, self.node, local, client=True)
        if stem == "etcd/healthcheck-client":
            return issue_client(ca, "kube-etcd-healthcheck-client")
        return issue_client(ca, ADMIN_USER, ADMIN_GROUPS)

    def missing_certificates(self, now: dt.datetime) -> list[str]:
        cas = {"ca": self._ca("ca"), "etcd/ca": self._ca("etcd/ca")}
        return [stem for stem, ca in self.LEAVES.items()
                if not _fresh(self.host.read_file(f"{PKI}/{stem}.crt"), cas[ca], now)]

    def manifest(self, name: str) -> bytes | None:
        return self.host.read_file(f"{MANIFESTS_DIR}/{name}.yaml")

    async def plan(self, now: dt.datetime) -> list[str]:
        """What this pass would do, in words ([]: up to date)."""
        todo = [f"issue {PKI}/{stem}.crt" for stem in self.missing_certificates(now)]
        for name in ("etcd", "kube-apiserver"):
            if self.manifest(name) is None:
                todo.append(f"{'init' if self.init else 'join'}: write the {name} static pod")
        if self.manifest("etcd") is not None:
            members = await self._members_or_none(local=True)  # one read for both checks
            wanted = await self._haproxy_config(members)
            if wanted is not None and self.host.read_file(HAPROXY_CFG) != wanted:
                todo.append(f"write {HAPROXY_CFG} and the haproxy static pod")
            if members is not None and self._me() not in members:
                todo.append(f"record {self.node} in {STATUS_KEY}")
            stale = await self._rbac_stale_or_none()
            if stale:
                todo.append(f"apply {', '.join(stale)} from {RBAC_FILE}")
        return todo

    # --- doing -------------------------------------------------------------------
    async def apply(self, now: dt.datetime) -> None:
        cas = {"ca": self._ca("ca"), "etcd/ca": self._ca("etcd/ca")}
        for stem in self.missing_certificates(now):
            pair = self._issue(stem, cas[self.LEAVES[stem]])
            self.host.write_file(f"{PKI}/{stem}.key", pair.key_pem, 0o600)
            self.host.write_file(f"{PKI}/{stem}.crt", pair.cert_pem, 0o600)
        if not self.host.exists(ADMIN_CONF):
            self.host.write_file(ADMIN_CONF, self._admin_conf().encode(), 0o600)
        if self.manifest("etcd") is None:
            # An init machine that finds the cluster already serving (the
            # management plane named another one first) joins it instead.
            others = [m for m in await self._members_or_none(local=False) or []
                      if m.name != self.node]
            init = self.init and not others
            initial = await (self._init_etcd() if init else self._join_etcd())
            self._write_manifest("etcd", self._etcd_pod(initial, new=init))
        if self.manifest("kube-apiserver") is None:
            self._write_manifest("kube-apiserver", self._apiserver_pod())
        await self._wait_ready()
        await self._record_me()
        await self._apply_rbac()
        config = await self._haproxy_config(await self._members_or_none(local=True))
        if config is not None and self.host.read_file(HAPROXY_CFG) != config:
            self.host.write_file(HAPROXY_CFG, config, 0o600)
            self._write_manifest("haproxy", self._haproxy_pod(config))

    async def refresh_proxy(self) -> bool:
        """Between kubeadm passes, the endpoint's HAProxy follows the members
        (``ClusterStatus``): its config is rewritten (and its static pod
        restarted) when a member joined or left since; True when it was.
        Nothing before this host's proxy exists (the kubeadm item makes it)."""
        if self.manifest("haproxy") is None:
            return False
        config = await self._haproxy_config(await self._members_or_none(local=True))
        if config is None or self.host.read_file(HAPROXY_CFG) == config:
            return False
        self.host.write_file(HAPROXY_CFG, config, 0o600)
        self._write_manifest("haproxy", self._haproxy_pod(config))
        return True

    # --- etcd --------------------------------------------------------------------
    def _me(self) -> Member:
        return Member(self.node, self.address, API_PORT)

    def _peer_url(self, address_image: str) -> str:
        return f"https://{address_image}:{ETCD_PEER_PORT}"

    def _client_url(self, address_image: str) -> str:
        return f"https://{address_image}:{ETCD_CLIENT_PORT}"

    async def _init_etcd(self) -> str:
        return f"{self.node}={self._peer_url(self.image)}"

    async def _join_etcd(self) -> str:
        members = await self._members_or_none(local=False)
        if not members:
            raise HostError(f"waiting for the control plane at {self.vip}:{self.port} "
                            f"(its {STATUS_KEY} names no member yet)")
        others = [m for m in members if m.name != self.node]
        endpoints = ",".join(self._client_url(self.network.image(m.address)) for m in others)
        if not endpoints:
            raise HostError(f"{STATUS_KEY} names only this host, which has no etcd member")
        mine = self._peer_url(self.image)
        listed = await self._etcdctl(endpoints, ["member", "list"])
        etcd_members = listed.get("members") or []
        if not any(mine in (m.get("peerURLs") or []) for m in etcd_members):
            pending = [m for m in etcd_members if not m.get("name")]
            if pending:
                raise HostError("another control-plane member is joining etcd; "
                                "this one joins after it started")
            added = await self._etcdctl(endpoints, ["member", "add", self.node,
                                                    f"--peer-urls={mine}"])
            etcd_members = added.get("members") or etcd_members
        initial: list[str] = []
        for m in etcd_members:
            urls = m.get("peerURLs") or []
            name = m.get("name") or (self.node if mine in urls else "")
            if not name:
                raise HostError("another control-plane member is joining etcd; "
                                "this one joins after it started")
            initial.extend(f"{name}={u}" for u in urls)
        return ",".join(sorted(initial))

    async def _etcdctl(self, endpoints: str, args: Sequence[str]) -> dict[str, Any]:
        argv = ["/usr/bin/etcdctl", f"--endpoints={endpoints}",
                f"--cacert={self.host.resolve(PKI + '/etcd/ca.crt')}",
                f"--cert={self.host.resolve(PKI + '/etcd/healthcheck-client.crt')}",
                f"--key={self.host.resolve(PKI + '/etcd/healthcheck-client.key')}",
                "--dial-timeout=5s", "--command-timeout=10s", "-w", "json", *args]
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env={"ETCDCTL_API": "3", "PATH": "/usr/bin:/bin"})
        out, err = await proc.communicate()
        if proc.returncode != 0:
            raise HostError(f"etcdctl {' '.join(args[:2])}: "
                            f"{err.decode('utf-8', 'replace').strip()[-300:]}")
        try:
            data = json.loads(out or b"{}")
        except ValueError:
            raise HostError(f"etcdctl {' '.join(args[:2])}: unreadable answer") from None
        # etcdctl prints member IDs as numbers; the names and URLs are what is used.
        return data if isinstance(data, dict) else {}

    # --- the API ------------------------------------------------------------------
    def _ssl(self) -> ssl.SSLContext:
        """The admin's TLS context, built once per pass (not per request)."""
        if self._ssl_context is None:
            context = ssl.create_default_context(
                cafile=str(self.host.resolve(PKI + "/ca.crt")))
            context.load_cert_chain(str(self.host.resolve(PKI + "/admin.crt")),
                                    str(self.host.resolve(PKI + "/admin.key")))
            self._ssl_context = context
        return self._ssl_context

    def _url(self, local: bool) -> str:
        return f"https://{self.image}:{API_PORT}" if local else \
            f"https://{self.vip_image}:{self.port}"

    async def _request(self, method: str, path: str, *, local: bool,
                       body: Mapping[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
        timeout = aiohttp.ClientTimeout(total=10)
        async with aiohttp.ClientSession(timeout=timeout) as session, session.request(
                method, self._url(local) + path, json=body, ssl=self._ssl()) as resp:
            try:
                data = await resp.json(content_type=None)
            except ValueError:
                data = {}
            return resp.status, data if isinstance(data, dict) else {}

    async def _read_status(self, local: bool) -> tuple[list[Member], str | None]:
        ns, name = KUBEADM_CONFIG
        code, cm = await self._request("GET", f"/api/v1/namespaces/{ns}/configmaps/{name}",
                                       local=local)
        if code == 404:
            return [], None
        if code != 200:
            raise HostError(f"GET {ns}/{name}: HTTP {code}")
        rv = (cm.get("metadata") or {}).get("resourceVersion")
        return parse_cluster_status((cm.get("data") or {}).get(STATUS_KEY)), rv

    async def _members_or_none(self, local: bool) -> list[Member] | None:
        try:
            members, _ = await self._read_status(local)
        except (OSError, aiohttp.ClientError, TimeoutError, HostError):
            return None
        return members

    async def _wait_ready(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.ready_timeout
        last = ""
        while loop.time() < deadline:
            try:
                code, _ = await self._request("GET", "/readyz", local=True)
                if code == 200:
                    return
                last = f"HTTP {code}"
            except (OSError, aiohttp.ClientError, TimeoutError) as exc:
                last = type(exc).__name__
            await asyncio.sleep(0.5)
        raise HostError(f"the API server on {self.address} is not ready ({last}); "
                        "the next pass looks again")

    async def _record_me(self) -> None:
        ns, name = KUBEADM_CONFIG
        for _ in range(5):
            members, rv = await self._read_status(local=True)
            if self._me() in members:
                return
            data = {STATUS_KEY: cluster_status(
                [m for m in members if m.name != self.node] + [self._me()])}
            meta: dict[str, Any] = {"name": name, "namespace": ns}
            if rv is None:
                code, _ = await self._request("POST", f"/api/v1/namespaces/{ns}/configmaps",
                                              local=True, body={"apiVersion": "v1",
                                              "kind": "ConfigMap", "metadata": meta,
                                              "data": data})
            else:
                meta["resourceVersion"] = rv
                code, _ = await self._request(
                    "PUT", f"/api/v1/namespaces/{ns}/configmaps/{name}", local=True,
                    body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
                          "data": data})
            if code in (200, 201):
                return
            if code not in (409,):
                raise HostError(f"write {ns}/{name}: HTTP {code}")
        raise HostError(f"write {ns}/{name}: conflicts kept coming")

    # --- the controllers' roles -------------------------------------------------------
    def _rbac_objects(self) -> list[dict[str, Any]]:
        raw = self.host.read_file(RBAC_FILE)
        if not raw:
            return []
        try:
            docs = list(yaml.safe_load_all(raw))
        except yaml.YAMLError:
            raise HostError(f"{RBAC_FILE} is not YAML") from None
        return [d for d in docs if isinstance(d, dict) and d.get("kind") in _RBAC_PLURALS]

    def _rbac_path(self, obj: Mapping[str, Any]) -> str:
        plural = _RBAC_PLURALS[str(obj["kind"])]
        return f"/apis/rbac.authorization.k8s.io/v1/{plural}/{obj['metadata']['name']}"

    async def _rbac_stale(self) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
        """Each wanted object that is missing (None) or differs (the live one)."""
        stale: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
        for obj in self._rbac_objects():
            code, live = await self._request("GET", self._rbac_path(obj), local=True)
            if code == 404:
                stale.append((obj, None))
            elif code != 200:
                raise HostError(f"GET {self._rbac_path(obj)}: HTTP {code}")
            elif any(live.get(f) != obj.get(f) for f in _RBAC_FIELDS):
                stale.append((obj, live))
        return stale

    async def _rbac_stale_or_none(self) -> list[str]:
        try:
            return [f"{o['kind']} {o['metadata']['name']}" for o, _ in await self._rbac_stale()]
        except (OSError, aiohttp.ClientError, TimeoutError, HostError):
            return []

    async def _apply_rbac(self) -> None:
        """Apply the controllers' roles inside the cluster (``racksmith rbac
        --in-cluster``, which the user data carries), with this host's own
        admin credentials: create what is missing, put back what differs."""
        for obj, live in await self._rbac_stale():
            path = self._rbac_path(obj)
            if live is None:
                code, _ = await self._request("POST", path.rsplit("/", 1)[0], local=True,
                                              body=obj)
            else:
                body = {**obj, "metadata": {**obj["metadata"], "resourceVersion":
                                            (live.get("metadata") or {}).get("resourceVersion")}}
                code, _ = await self._request("PUT", path, local=True, body=body)
            if code not in (200, 201, 409):
                raise HostError(f"apply {obj['kind']} {obj['metadata']['name']}: HTTP {code}")

    # --- rendering ------------------------------------------------------------------
    async def _haproxy_config(self, members: list[Member] | None) -> bytes | None:
        if members is None:
            return None
        everyone = {m.name: m for m in members}
        if self.manifest("kube-apiserver") is not None or self.init:
            everyone.setdefault(self.node, self._me())
        if not everyone:
            return None
        backends = [Backend(m.name, self.network.image(m.address), m.port)
                    for m in sorted(everyone.values(), key=lambda m: m.name)]
        return render_haproxy(bind_host=self.vip_image, bind_port=self.port,
                              backends=backends,
                              ca_file=str(self.host.resolve(PKI + "/ca.crt"))).encode()

    def _admin_conf(self) -> str:
        name = str(self.cluster.get("name") or "kubernetes")
        return yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": name, "cluster": {
                "server": f"https://{self.vip_image}:{self.port}",
                "certificate-authority": str(self.host.resolve(PKI + "/ca.crt"))}}],
            "contexts": [{"name": f"{ADMIN_USER}@{name}",
                          "context": {"cluster": name, "user": ADMIN_USER}}],
            "current-context": f"{ADMIN_USER}@{name}",
            "users": [{"name": ADMIN_USER, "user": {
                "client-certificate": str(self.host.resolve(PKI + "/admin.crt")),
                "client-key": str(self.host.resolve(PKI + "/admin.key"))}}],
        }, sort_keys=True)

    def _write_manifest(self, name: str, pod: dict[str, Any]) -> None:
        self.host.write_file(f"{MANIFESTS_DIR}/{name}.yaml",
                             yaml.safe_dump(pod, sort_keys=True).encode(), 0o600)

    def _pod(self, name: str, command: list[str], args: list[str], paths: Sequence[str],
             annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
        return {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "kube-system",
                         "labels": {"component": name, "tier": "control-plane"},
                         "annotations": dict(annotations or {})},
            "spec": {"hostNetwork": True, "priorityClassName": "system-node-critical",
                     "containers": [{"name": name, "command": command, "args": args}],
                     "volumes": [{"name": p.strip("/").replace("/", "-"),
                                  "hostPath": {"path": p}} for p in paths]},
        }

    def _etcd_pod(self, initial_cluster: str, *, new: bool) -> dict[str, Any]:
        pki = PKI + "/etcd"
        args = [
            f"--name={self.node}", f"--data-dir={ETCD_DATA}",
            f"--listen-client-urls={self._client_url(self.image)}",
            f"--advertise-client-urls={self._client_url(self.image)}",
            f"--listen-peer-urls={self._peer_url(self.image)}",
            f"--initial-advertise-peer-urls={self._peer_url(self.image)}",
            f"--initial-cluster={initial_cluster}",
            f"--initial-cluster-state={'new' if new else 'existing'}",
            f"--initial-cluster-token={self.cluster.get('name') or 'kubernetes'}",
            f"--cert-file={pki}/server.crt", f"--key-file={pki}/server.key",
            "--client-cert-auth=true", f"--trusted-ca-file={pki}/ca.crt",
            f"--peer-cert-file={pki}/peer.crt", f"--peer-key-file={pki}/peer.key",
            "--peer-client-cert-auth=true", f"--peer-trusted-ca-file={pki}/ca.crt",
            "--snapshot-count=10000", "--pre-vote=true", "--max-request-bytes=8388608",
            "--logger=zap", "--log-level=warn",
        ]
        return self._pod("etcd", ["etcd"], args, [ETCD_DATA, pki], {
            "kubeadm.kubernetes.io/etcd.advertise-client-urls": self._client_url(self.image)})

    def _apiserver_pod(self) -> dict[str, Any]:
        args = [
            "apiserver", f"--data-dir={APISERVER_DATA}", f"--host={self.image}",
            f"--port={API_PORT}", f"--tls-cert-file={PKI}/apiserver.crt",
            f"--tls-private-key-file={PKI}/apiserver.key", f"--client-ca-file={PKI}/ca.crt",
            f"--etcd-endpoints={self._client_url(self.image)}",
            f"--etcd-cafile={PKI}/etcd/ca.crt",
            f"--etcd-certfile={PKI}/apiserver-etcd-client.crt",
            f"--etcd-keyfile={PKI}/apiserver-etcd-client.key",
            f"--etcd-prefix={ETCD_PREFIX}", "--log-level=warning",
        ]
        return self._pod("kube-apiserver", ["racksmith"], args, [PKI, APISERVER_DATA], {
            "kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint":
                f"{self.address}:{API_PORT}"})

    def _haproxy_pod(self, config: bytes) -> dict[str, Any]:
        return self._pod("haproxy", ["haproxy"], ["-db", "-f", HAPROXY_CFG],
                         ["/etc/haproxy"],
                         {"racksmith.io/config-sha256": hashlib.sha256(config).hexdigest()})

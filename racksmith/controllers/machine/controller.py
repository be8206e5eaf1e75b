"""The Machine controller: reconciler and runtime wiring.

Owns ``MachineReconciler`` (read the Machine and everything it depends on
into ``Observed``, ask ``plan.decide`` for the next step, hand it to the
committer) and ``machine_controller``, which builds the runtime
``Controller``. It talks through the runtime ``Client``: it watches
(shared informers) Machines, BareMetalHosts, IpamHosts, LCMMachines, Nodes,
Clusters and ClusterReleases, mapped to the Machines they concern by
``index.MachineKeys`` (indexes of the Machine informer), and reads them
from the cache; the Secrets (the Machine's user data, the agent's access)
and, while a Machine is deleted, its Node's pods are read live. What it
writes is ``commit``'s. A lost race raises ``Conflict``, which the runtime
requeues; an object gone under a write ends the reconcile.

One step per reconcile; a step that wrote something asks to be reconciled
again at once, so a Machine walks the checklist in a few quick rounds and
a controller killed at any moment picks up where the world is.

Events (core v1, about the Machine, component ``racksmith-machine``, through
the runtime's ``EventRecorder``, so a repeat only bumps a count): a Normal
Event named after each new phase (``Provisioning``, ``Deploying``,
``Ready``...), a Warning for each condition turning False (its reason:
``NoMatchingHost``, ``EvictionRefused``...) and the actions' own Normal
Events: ``HostClaimed``, ``ProvisioningRequested``, ``HostReleased``,
``Cordoned``, ``Evicted``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any, TypeVar

import structlog
from pydantic import ValidationError

from racksmith.clock import Clock, SystemClock
from racksmith.controllers.machine import names as n
from racksmith.controllers.machine.addresses import control_plane_address
from racksmith.controllers.machine.commit import Committer, Raw, SecretData
from racksmith.controllers.machine.index import MachineKeys
from racksmith.controllers.machine.observed import NodeView, Observed, PodView, init_machine
from racksmith.controllers.machine.plan import decide, release_to_render
from racksmith.controllers.machine.selection import may_be_candidate
from racksmith.controllers.machine.timings import MachineTimings
from racksmith.controllers.machine.userdata import (
    AgentAccess,
    agent_access,
    file_of,
    token_fresh,
    token_of,
)
from racksmith.controlplane.jointoken import (
    JOIN_FILE,
    ca_cert_hash,
    cluster_token_secret,
    join_file,
    join_secret_name,
    parse_join,
)
from racksmith.controlplane.pki import (
    KUBELET_CLIENT_FILE,
    ClusterPki,
    PkiDamaged,
    issue_kubelet_client,
    kubelet_client_fresh,
    parse_pair,
)
from racksmith.controlplane.pki import SUFFIXES as PKI_SUFFIXES
from racksmith.controlplane.pki import secret_name as pki_secret_name
from racksmith.controlplane.vrrp import AUTH_PASS_KEY, AUTH_PASS_MAX, Peer, vrrp_secret_name
from racksmith.kinds.base import Resource
from racksmith.kinds.cluster import GROUP, Cluster, ClusterRelease, Machine, Role
from racksmith.kinds.ipam import IpamHost
from racksmith.kinds.lcm import LCMMachine, lcm_change
from racksmith.kinds.metal import BareMetalHost, Image
from racksmith.planners.apivip import VRRP_AUTH_FILE, holds_vip, vrrp_auth_file
from racksmith.runtime.access import EVENTS, reads, watches, writes
from racksmith.runtime.client import Client, as_client
from racksmith.runtime.controller import Controller
from racksmith.runtime.errors import AlreadyExists, ApiError, NotFound
from racksmith.runtime.events import EventRecorder, component_recorder
from racksmith.runtime.keys import ObjectKey, on_change, owner_keys
from racksmith.runtime.planes import ClusterPlane, SharedPlane
from racksmith.runtime.resources import (
    CLUSTERS,
    HOSTS,
    IPAMHOSTS,
    LCMMACHINES,
    MACHINES,
    NODES,
    PODS,
    RELEASES,
    ROLE_BINDINGS,
    ROLES,
    SECRETS,
    SERVICE_ACCOUNTS,
)
from racksmith.runtime.result import Done, RequeueAfter, Result

CONTROLLER_NAME = "machine"
ACCESS = (watches(MACHINES, HOSTS, IPAMHOSTS, LCMMACHINES, NODES, CLUSTERS, RELEASES)
          + reads(SECRETS, PODS)
          + writes(MACHINES, "update") + writes(MACHINES, "update", subresource="status")
          + writes(HOSTS, "update")
          + writes(IPAMHOSTS, "create", "update", "delete")
          + writes(LCMMACHINES, "create", "update", "delete")
          + writes(SECRETS, "create", "update", "delete")
          + writes(NODES, "update", "delete")
          + writes(PODS, "create", subresource="eviction")
          + writes(SERVICE_ACCOUNTS, "create")
          + writes(SERVICE_ACCOUNTS, "create", subresource="token")
          + reads(ROLES, ROLE_BINDINGS)
          + writes(ROLES, "create", "update", "escalate", "bind")
          + writes(ROLE_BINDINGS, "create", "update") + EVENTS)
"""What the controller reads and writes: its ClusterRole (``racksmith.app.identities``).
It creates each host agent's ServiceAccount, Role and RoleBinding
(:mod:`racksmith.hostcreds`) and asks for its bound tokens. The Role grants
what the controller itself need not hold (an LCMMachine's status), so it may
``escalate`` and ``bind`` Roles, as kube's RBAC requires of anyone granting
more than it has: held by one controller identity, never by users."""
DEFAULT_AGENT_SECRET = ("racksmith-system", "racksmith-agent")


class MachineReconciler:
    """Reconciles one Machine per call (see the module docstring)."""

    def __init__(
        self,
        api_client: Any,
        *,
        default_image: Image | None = None,
        agent_secret: tuple[str, str] = DEFAULT_AGENT_SECRET,
        clock: Clock | None = None,
        logger: Any = None,
        timings: MachineTimings | None = None,
        recorder: EventRecorder | None = None,
        control_plane_files: Mapping[str, bytes] | None = None,
        plane: ClusterPlane | None = None,
    ) -> None:
        self.control_plane_files = dict(control_plane_files or {})
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.timings = timings if timings is not None else MachineTimings()
        self.client: Client = as_client(api_client).with_field_manager(n.FIELD_MANAGER)
        self.default_image = default_image
        self.agent_secret = agent_secret
        self.recorder = component_recorder(recorder, self.client, n.COMPONENT, clock=self.clock)
        self.plane: ClusterPlane = plane if plane is not None else SharedPlane(self.client)
        self.committer = Committer(self.client, self.clock, self.timings, self.recorder)
        self.log = logger if logger is not None else structlog.get_logger(
            "racksmith.controllers.machine")
        self._shared: dict[tuple[str, str], tuple[float, dict[str, Any]]] = {}
        self._tokens_seen: set[tuple[str, str, str]] = set()
        """(namespace, cluster, token id) known to be in that cluster's API."""
        """Secrets every Machine reads, kept ``timings.shared_secrets`` seconds:
        (namespace, name) → (read at, the object)."""

    async def reconcile(self, key: ObjectKey) -> Result:
        raw_machine = await self.client.get(MACHINES, key.namespace, key.name)
        if raw_machine is None:
            return Done()
        machine = Machine.model_validate(raw_machine)
        observed, raw = await self._observe(machine, raw_machine)
        if observed is None:
            # the cluster's API cannot be reached now: its Node is unknown
            # (a deleted Machine is never released undrained, a Ready one
            # never looks Node-less)
            return RequeueAfter(self.timings.cluster_unreachable)
        if observed.node is None and raw.cluster_client is not None \
                and machine.metadata.deletion_timestamp is None:
            await self._join_token_in_cluster(key.namespace, machine.spec.cluster_name,
                                              raw.cluster_client)
        step = decide(observed)
        log = self.log.bind(kind="Machine", namespace=key.namespace, name=key.name)
        try:
            return await self.committer.commit(machine, raw, step, log)
        except NotFound:
            return Done()  # the Machine went away under a write: its event follows

    async def _observe(self, machine: Machine, raw_machine: dict[str, Any]
                       ) -> tuple[Observed | None, Raw]:
        meta = machine.metadata
        ns, name = meta.namespace or "", meta.name or ""
        raw = Raw(machine=raw_machine)
        deleting = meta.deletion_timestamp is not None
        cluster = _model(Cluster, await self.client.get(CLUSTERS, ns,
                                                        machine.spec.cluster_name))
        raw.lcm = await self.client.get(LCMMACHINES, ns, name)
        lcm = _model(LCMMachine, raw.lcm)
        release = None
        release_name = release_to_render(machine, cluster, lcm)
        if cluster is not None and release_name is not None:
            release = _model(ClusterRelease, await self.client.get(RELEASES, None,
                                                                   release_name))
        hosts: list[BareMetalHost] = []
        host_ref = machine.status.host_ref if machine.status else None
        # Read without copying, and parse only the hosts the planner may look
        # at (the one this Machine holds or recorded, and the claimable ones):
        # parsing every host of the namespace on every reconcile cost the
        # control plane most of its CPU while a fleet registers. The executor
        # deep-copies a host before writing it.
        for item in await self.client.list(HOSTS, ns, copy=False):
            if not _may_concern(item, name, host_ref.name if host_ref else None):
                continue
            host = _model(BareMetalHost, item)
            if host is not None:
                hosts.append(host)
                raw.hosts[host.metadata.name or ""] = item
        raw.ipamhost = await self.client.get(IPAMHOSTS, ns, name)
        inside = await self.plane.client(ObjectKey(ns, machine.spec.cluster_name))
        joined = machine.status is not None and machine.status.node_ref is not None
        if inside is None and cluster is not None and (deleting or joined):
            # its Node is unknown while its cluster's API cannot be reached:
            # nothing is decided on a Node that only looks absent
            return None, raw
        if inside is not None:
            inside = inside.with_field_manager(n.FIELD_MANAGER)
            raw.cluster_client = inside
        # (the Node of a Machine whose Cluster and its API are gone is gone too)
        raw.node = await inside.get(NODES, None, name) if inside is not None else None
        node = NodeView.from_raw(raw.node) if raw.node is not None else None
        pods: tuple[PodView, ...] = ()
        if deleting and node is not None and inside is not None:
            pods = tuple(PodView.from_raw(p) for p in await inside.list(
                PODS, fields={"spec.nodeName": name}, live=True)
                if (p.get("spec") or {}).get("nodeName") == name)
        raw.user_data = await self._secret(ns, n.user_data_secret(name))
        user_data = None
        if raw.user_data is not None:
            user_data = raw.user_data.data.get(n.USER_DATA_KEY, b"").decode("utf-8", "replace")
        agent: AgentAccess | str = "not needed while deleting"
        pki_files: dict[str, bytes] | str | None = None
        init_node: str | None = None
        vip_peers: tuple[Peer, ...] = ()
        if not deleting:
            agent = await self._agent()
            if Role.MASTER in machine.spec.roles:
                pki_files = await self._pki_files(ns, machine.spec.cluster_name)
                init_node = init_machine(await self.client.list(MACHINES, ns, copy=False),
                                         machine.spec.cluster_name)
            if self.plane.own_apis and not isinstance(pki_files, str):
                pki_files = await self._kubelet_files(ns, machine.spec.cluster_name, name,
                                                      pki_files, user_data)
            if self.plane.own_apis and isinstance(pki_files, dict):
                pki_files = await self._join_files(ns, cluster, machine.spec.cluster_name,
                                                   pki_files, Role.MASTER in machine.spec.roles)
            if Role.MASTER in machine.spec.roles and cluster is not None \
                    and holds_vip(cluster):
                vip_peers = await self._vip_peers(ns, cluster)
                if isinstance(pki_files, dict):
                    pki_files = await self._vrrp_files(ns, machine.spec.cluster_name,
                                                       pki_files)
        token = token_of(user_data)
        secret_uid = raw.user_data.uid if raw.user_data is not None else ""
        if not token_fresh(token, secret_uid, self.clock.wall().timestamp()):
            token = None
        observed = Observed(
            machine=machine, cluster=cluster, release=release, hosts=tuple(hosts),
            ipamhost=_model(IpamHost, raw.ipamhost), lcm=lcm,
            node=node, pods=pods, user_data=user_data, agent=agent, agent_token=token,
            default_image=self.default_image, timings=self.timings, pki_files=pki_files,
            init_node=init_node, vip_peers=vip_peers,
        )
        return observed, raw

    async def _pki_files(self, namespace: str, cluster: str) -> dict[str, bytes] | str:
        """The cluster's PKI as kubeadm's files, or why not (never their content)."""
        secrets: dict[str, Any] = {}
        for suffix in PKI_SUFFIXES:
            secrets[suffix] = await self._shared_secret(namespace,
                                                        pki_secret_name(cluster, suffix))
        try:
            pki = ClusterPki.from_secrets(cluster, secrets)
        except PkiDamaged as exc:
            return str(exc)
        return {f"{n.PKI_DIR}/{path}": data for path, data in pki.kubeadm_files().items()} \
            | self.control_plane_files

    async def _kubelet_files(self, namespace: str, cluster: str, node: str,
                             files: dict[str, bytes] | None, user_data: str | None
                             ) -> dict[str, bytes] | str:
        """``files`` with what the node's kubelet needs to reach its cluster's
        own API (``racksmith.runtime.planes``): the cluster CA certificate and
        a kubelet client certificate (``system:node:<node>``) — the one the
        written user data carries while it is sound, else a new one from the
        cluster CA (``<cluster>-ca``), or why not."""
        secret = await self._shared_secret(namespace, pki_secret_name(cluster, "ca"))
        try:
            ca = parse_pair(cluster, "ca", secret)
        except PkiDamaged as exc:
            return str(exc)
        kept = file_of(user_data, KUBELET_CLIENT_FILE)
        if not kubelet_client_fresh(kept, ca, node, self.clock.wall()):
            kept = issue_kubelet_client(ca, node)
        assert kept is not None
        return {**(files or {}), f"{n.PKI_DIR}/ca.crt": ca.cert_pem,
                KUBELET_CLIENT_FILE: kept}

    async def _join_token_in_cluster(self, namespace: str, cluster: str,
                                     inside: Client) -> None:
        """While a machine has yet to join: the cluster's current bootstrap
        token in the cluster's own API (``kube-system/bootstrap-token-<id>``,
        ``racksmith.controlplane.jointoken``), where the real kubeadm join
        authenticates with it. ``kubeadm init`` makes the first one itself;
        this brings each renewed one. Looked at once per token and process;
        a failure is logged (never the token) and tried again next time."""
        join = parse_join(await self._shared_secret(namespace, join_secret_name(cluster)))
        if join is None or (namespace, cluster, join.token_id) in self._tokens_seen:
            return
        body = cluster_token_secret(join)
        meta = body["metadata"]
        try:
            if await inside.get(SECRETS, meta["namespace"], meta["name"], live=True) is None:
                with contextlib.suppress(AlreadyExists):
                    await inside.create(SECRETS, body)
        except ApiError as exc:
            self.log.warning("bootstrap token not written in the cluster's API",
                             namespace=namespace, cluster=cluster, error=exc.describe())
            return
        self._tokens_seen.add((namespace, cluster, join.token_id))

    async def _join_files(self, namespace: str, cluster: Cluster | None, name: str,
                          files: dict[str, bytes], control_plane: bool
                          ) -> dict[str, bytes] | str:
        """``files`` with what the real kubeadm joins with
        (``racksmith.controlplane.jointoken.JOIN_FILE``: the cluster's current
        bootstrap token, its endpoint and CA pin; a control-plane machine also
        the certificate key), or why not."""
        secret_id = join_secret_name(name)
        join = parse_join(await self._shared_secret(namespace, secret_id))
        if join is None:
            return f"Secret {namespace}/{secret_id} is missing or damaged"
        endpoint = cluster.status.control_plane_endpoint \
            if cluster is not None and cluster.status is not None else None
        if endpoint is None:
            return f"the API endpoint of Cluster {namespace}/{name} is not known yet"
        host = f"[{endpoint.host}]" if ":" in endpoint.host else endpoint.host
        return {**files, JOIN_FILE: join_file(
            join, ca_cert_hash(files[f"{n.PKI_DIR}/ca.crt"]), f"{host}:{endpoint.port}",
            control_plane=control_plane)}

    async def _vip_peers(self, namespace: str, cluster: Cluster) -> tuple[Peer, ...]:
        """The control-plane machines of ``cluster`` (master role, not being
        deleted) with their control-plane addresses, read from their
        IpamHosts' netplan (cache), by name: the VIP's VRRP peers and
        HAProxy's backends (``planners.apivip``)."""
        name = cluster.metadata.name or ""
        masters = [str((raw.get("metadata") or {}).get("name"))
                   for raw in await self.client.list(MACHINES, namespace, copy=False)
                   if (raw.get("spec") or {}).get("clusterName") == name
                   and not (raw.get("metadata") or {}).get("deletionTimestamp")
                   and "master" in ((raw.get("spec") or {}).get("roles") or [])]
        peers: list[Peer] = []
        for machine in masters:
            ipam = await self.client.get(IPAMHOSTS, namespace, machine) or {}
            netconfig = (ipam.get("status") or {}).get("netconfig")
            address = control_plane_address(cluster, netconfig)
            if address is not None:
                peers.append(Peer(machine, address))
        return tuple(sorted(peers, key=lambda p: p.name))

    async def _vrrp_files(self, namespace: str, cluster: str, files: dict[str, bytes]
                          ) -> dict[str, bytes] | str:
        """``files`` with keepalived's VRRP password file
        (``planners.apivip.VRRP_AUTH_FILE``) from ``<cluster>-vrrp``, or why not."""
        secret_id = vrrp_secret_name(cluster)
        raw = await self._shared_secret(namespace, secret_id)
        secret = SecretData.from_raw(raw) if raw is not None else None
        word = secret.data.get(AUTH_PASS_KEY, b"").decode("ascii", "replace") \
            if secret is not None else ""
        if not word.isalnum() or len(word) > AUTH_PASS_MAX:
            return f"Secret {namespace}/{secret_id} is missing or damaged"
        return {**files, VRRP_AUTH_FILE: vrrp_auth_file(word)}

    async def _agent(self) -> AgentAccess | str:
        ns, name = self.agent_secret
        raw = await self._shared_secret(ns, name)
        secret = SecretData.from_raw(raw) if raw is not None else None
        if secret is None:
            return f"agent Secret {ns}/{name} not found"
        access = agent_access(secret.data)
        return f"agent Secret {ns}/{name} {access}" if isinstance(access, str) else access

    async def _secret(self, namespace: str, name: str) -> SecretData | None:
        """A Secret, read live (the controller watches no Secrets)."""
        raw = await self.client.get(SECRETS, namespace, name, live=True)
        return SecretData.from_raw(raw) if raw is not None else None

    async def _shared_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A Secret every Machine (of a cluster) reads: the agent Secret, the
        cluster's PKI. Read live, then kept ``timings.shared_secrets``
        seconds (a reconcile of 50 Machines would otherwise read the same
        Secrets 50 times); one not found is not kept."""
        ttl = self.timings.shared_secrets
        now = self.clock.now()
        kept = self._shared.get((namespace, name))
        if kept is not None and now - kept[0] < ttl:
            return kept[1]
        raw = await self.client.get(SECRETS, namespace, name, live=True)
        if raw is None or ttl <= 0:
            self._shared.pop((namespace, name), None)
        else:
            self._shared[(namespace, name)] = (now, raw)
        return raw


_R = TypeVar("_R", bound=Resource)


def _may_concern(host: dict[str, Any], machine: str, recorded: str | None) -> bool:
    """Whether the planner may look at ``host`` (raw) for Machine ``machine``:
    the host its status records, a host whose consumerRef names a Machine of
    that name (the uid is the planner's to check), or an unclaimed
    ``available`` host (a candidate). A cheap pre-filter on the raw object;
    :mod:`racksmith.controllers.machine.selection` decides."""
    if recorded is not None and (host.get("metadata") or {}).get("name") == recorded:
        return True
    ref = (host.get("spec") or {}).get("consumerRef")
    if ref:
        return isinstance(ref, dict) and ref.get("kind") == "Machine" \
            and ref.get("name") == machine
    return may_be_candidate(host)


def _model(cls: type[_R], raw: dict[str, Any] | None) -> _R | None:
    """``raw`` as a ``cls``; None when absent or not valid (it cannot be acted on)."""
    if raw is None:
        return None
    try:
        return cls.model_validate(raw)
    except ValidationError:
        return None


def machine_controller(
    api_client: Any,
    *,
    default_image: Image | None = None,
    agent_secret: tuple[str, str] = DEFAULT_AGENT_SECRET,
    clock: Clock | None = None,
    workers: int = 2,
    namespace: str | None = None,
    logger: Any = None,
    timings: MachineTimings | None = None,
    recorder: EventRecorder | None = None,
    control_plane_files: Mapping[str, bytes] | None = None,
    plane: ClusterPlane | None = None,
) -> Controller:
    """The runtime Controller for Machines (see the module docstring).

    ``control_plane_files``: more files every control-plane machine's user
    data carries beside the cluster's PKI (path → content): the roles of
    the controllers' identities inside the cluster, which its first control
    plane host applies at init.

    ``default_image``: the OS image for releases without ``spec.osImage``.
    ``agent_secret``: (namespace, name) of the Secret with the API server
    URL, CA and agent token written into each host's user data.
    ``namespace``: watch one namespace only (None: all).
    ``timings``: how long it waits without events (None: the defaults).
    ``recorder``: the process's EventRecorder (None: one of its own); its
    Events come from component ``racksmith-machine``.
    ``plane``: where its clusters' Nodes and pods are (None: in the
    management API, ``racksmith.runtime.planes.SharedPlane``).
    """
    clock = clock if clock is not None else SystemClock()
    reconciler = MachineReconciler(api_client, default_image=default_image,
                                   agent_secret=agent_secret, clock=clock, logger=logger,
                                   timings=timings, recorder=recorder,
                                   control_plane_files=control_plane_files, plane=plane)
    client = reconciler.client
    plane = reconciler.plane
    keys = MachineKeys(client, namespace)
    owned = owner_keys("Machine", GROUP, controller_only=True)
    sources = [
        client.source(MACHINES, namespace=namespace, mapper=keys.machine_keys),
        client.source(HOSTS, namespace=namespace, mapper=keys.host_keys),
        client.source(IPAMHOSTS, namespace=namespace, mapper=keys.ipam_keys),
        # the agents' heartbeats would reconcile every Machine every 20 s
        client.source(LCMMACHINES, namespace=namespace, mapper=on_change(lcm_change, owned)),
        plane.source(NODES, keys.node_mapper),
        client.source(CLUSTERS, namespace=namespace, mapper=keys.cluster_keys),
        client.source(RELEASES, mapper=keys.release_keys),
    ]
    return Controller(CONTROLLER_NAME, sources, reconciler, workers=workers, clock=clock)

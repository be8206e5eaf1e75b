"""The Cluster controller's control-plane part: a cluster's PKI, endpoint and
admin kubeconfig as Secrets, and the conditions that say how they stand.

Owns :class:`ControlPlaneData`, called once per Cluster reconcile (it only
proposes the status; the reconciler writes it with the rest):

1. **Endpoint** (``racksmith.controlplane.endpoint.plan_endpoint``) from the
   spec, the other clusters' VIPs (the Cluster cache) and the control-plane
   machines' addresses. A refused VIP sets ``ControlPlaneEndpointValid=False``
   with the reason (``VIPInvalid``, ``VIPOutsideControlPlaneNetwork``,
   ``VIPConflict``) and nothing is made for the cluster.
   With a VIP held by keepalived (``spec.apiServer.keepalived``), the VRRP
   ``virtual_router_id`` (``racksmith.controlplane.vrrp``: the one the spec
   asks for, else the one recorded in ``status.virtualRouterID``, else the
   lowest free among clusters on overlapping control-plane networks) and
   the Secret ``<cluster>-vrrp`` (key ``authPass``) with keepalived's
   authentication; a router id clash (``VirtualRouterIDConflict``) or none
   free (``VirtualRouterIDsExhausted``) refuses the endpoint like a bad VIP,
   and so does the endpoint port 6444 (``EndpointPortReserved``: where the
   API servers listen behind the VIP's HAProxy, ``planners.apivip``).
2. **Certificates** (``CertificatesAvailable``, Cluster API's condition):
   ``<cluster>-ca``, ``-proxy``, ``-etcd``, ``-sa``, owned by the Cluster.
   A missing one is generated only while no machine of the cluster has been
   deployed (nothing used it yet: this is also how a crash between two
   creates converges). Once a machine is deployed, a missing or unusable one
   is damage — ``CertificatesAvailable=False`` naming it — and is never
   replaced: a new CA would cut every node off. Restore it from a backup.
   Then, per management controller that works inside clusters, its
   identity there: ``<cluster>-racksmith-NAME`` (a client certificate of
   user ``racksmith:NAME``, ``racksmith.controlplane.identities``), issued
   again within 30 days of its end. And ``<cluster>-join``
   (``racksmith.controlplane.jointoken``): the bootstrap token and
   certificate key the real kubeadm joins machines with, made when missing
   or damaged and made anew when a third of the token's life is left (the
   reconcile is requeued for then).
3. **Admin kubeconfig** (``<cluster>-kubeconfig``, key ``value``, owned by
   the Cluster): written when missing, rewritten when the endpoint moved.
   One that does not trust the cluster CA or holds no certificate it issued
   sets ``ControlPlaneReachable=False`` (reason ``KubeconfigInvalid``) and
   is left for its owner to fix or delete (deleting it has it rebuilt).
   While it is sound, ``ControlPlaneReachable`` is what the runtime's
   per-cluster tracker (``racksmith.runtime.clusters``) last saw of the
   endpoint's ``/readyz`` (``Reachable``, ``Unreachable``, ``NotReady``; the
   probe runs in the background, never in the reconcile); without a tracker
   (``probe`` off) it is ``Unknown`` (``NotProbed``).
4. ``ControlPlaneAvailable``: True once a control-plane (master) machine is
   Ready, with how many of them are; ``ControlPlaneQuorum``: False
   (``EvenControlPlaneMachines``) with an even number of control-plane
   machines, which stacked etcd cannot make better use of than the odd
   number below: no further machine of the cluster starts deploying until
   the number is odd again (Machines added together — one to three — go
   on as soon as the last is seen); deployed machines go on.

Reads come from the shared caches (Secrets, Clusters); the writes are
create/update of those Secrets. Secret contents never reach a log, an
Event or a condition.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from cryptography import x509

from racksmith.controlplane.endpoint import (
    ClusterVip,
    Endpoint,
    EndpointPlan,
    EndpointProblem,
    plan_endpoint,
)
from racksmith.controlplane.identities import (
    RENEW_BEFORE,
    identity_secret,
    identity_secret_name,
    needs_renewal,
)
from racksmith.controlplane.jointoken import join_secret, join_secret_name, new_join, parse_join
from racksmith.controlplane.kubeconfig import (
    KubeconfigDamaged,
    KubeconfigStale,
    admin_kubeconfig,
    check_kubeconfig,
    kubeconfig_secret,
    kubeconfig_secret_name,
)
from racksmith.controlplane.pki import (
    AUTHORITIES,
    CLUSTER_NAME_LABEL,
    SA_SUFFIX,
    SUFFIXES,
    ClusterPki,
    KeyPair,
    PkiDamaged,
    new_ca,
    new_service_account_keys,
    parse_pair,
    pki_secret,
    secret_bytes,
    secret_name,
)
from racksmith.controlplane.vrrp import (
    RouterClaim,
    RouterIdProblem,
    allocate_router_id,
    new_auth_pass,
    vrrp_secret,
    vrrp_secret_name,
)
from racksmith.kinds.cluster import (
    CONTROL_PLANE_ENDPOINT_VALID,
    CONTROL_PLANE_QUORUM,
    ENDPOINT_WAITING,
    AddressType,
    APIEndpoint,
    Cluster,
    Machine,
    MachinePhase,
    Role,
)
from racksmith.kinds.common import ConditionStatus
from racksmith.planners.apivip import API_SERVER_BIND_PORT, holds_vip
from racksmith.runtime.client import Client
from racksmith.runtime.clusters import NOT_PROBED, ClusterAccess, ClusterClients
from racksmith.runtime.conditions import ConditionSpec, EventSpec, find
from racksmith.runtime.errors import AlreadyExists
from racksmith.runtime.keys import ObjectKey
from racksmith.runtime.resources import CLUSTERS, SECRETS

ENDPOINT_VALID = CONTROL_PLANE_ENDPOINT_VALID
CERTIFICATES_AVAILABLE = "CertificatesAvailable"
CONTROL_PLANE_AVAILABLE = "ControlPlaneAvailable"
CONTROL_PLANE_REACHABLE = "ControlPlaneReachable"

_DEPLOYED = (MachinePhase.DEPLOYING, MachinePhase.READY, MachinePhase.DELETING)


@dataclass
class ControlPlaneOutcome:
    """What the control-plane part proposes for the Cluster's status."""

    endpoint: APIEndpoint | None
    router_id: int | None = None
    conditions: list[ConditionSpec] = field(default_factory=list)
    events: list[EventSpec] = field(default_factory=list)
    requeue_after: float | None = None
    """Seconds until something falls due (the join token's renewal)."""


def control_plane_machines(machines: Sequence[Machine]) -> list[Machine]:
    return sorted((m for m in machines if Role.MASTER in m.spec.roles),
                  key=lambda m: m.metadata.name or "")


def _internal_address(machine: Machine) -> str | None:
    if machine.status is None:
        return None
    return next((a.address for a in machine.status.addresses
                 if a.type is AddressType.INTERNAL_IP), None)


def is_deployed(machines: Sequence[Machine]) -> bool:
    """Has any machine of the cluster taken its control plane's data yet?"""
    return any(m.status is not None and (m.status.phase in _DEPLOYED
                                         or m.status.node_ref is not None) for m in machines)


def vip_claim(obj: dict[str, Any]) -> ClusterVip | None:
    meta = obj.get("metadata") or {}
    vip = ((obj.get("spec") or {}).get("apiServer") or {}).get("vip")
    if not vip:
        return None
    return ClusterVip(str(meta.get("creationTimestamp") or ""), str(meta.get("namespace", "")),
                      str(meta.get("name", "")), str(vip))


def availability(masters: Sequence[Machine]) -> ConditionSpec:
    ready = sum(1 for m in masters if m.status is not None
                and m.status.phase is MachinePhase.READY)
    if not masters:
        return ConditionSpec.false(CONTROL_PLANE_AVAILABLE, "NoControlPlaneMachines",
                                   "the cluster has no machine with the master role")
    if ready == 0:
        return ConditionSpec.false(CONTROL_PLANE_AVAILABLE, "WaitingForControlPlaneMachines",
                                   f"0/{len(masters)} control-plane machines Ready")
    return ConditionSpec.true(CONTROL_PLANE_AVAILABLE, "ControlPlaneMachinesReady",
                              f"{ready}/{len(masters)} control-plane machines Ready")


def quorum(masters: Sequence[Machine]) -> ConditionSpec:
    """etcd's quorum: an odd number of control-plane (stacked etcd) machines.
    An even one tolerates no more failures than the odd number below it and
    can split evenly. While it is, no further machine of the cluster starts
    deploying (the Machine controller waits); the machines already deployed
    go on (a master being replaced passes through an even number)."""
    count = len(masters)
    if count and count % 2 == 0:
        return ConditionSpec.false(
            CONTROL_PLANE_QUORUM, "EvenControlPlaneMachines",
            f"{count} control-plane machines: etcd keeps quorum with {count // 2 + 1}, so "
            f"{count} tolerate no more failures than {count - 1}; use an odd number")
    return ConditionSpec.true(CONTROL_PLANE_QUORUM, "Odd",
                              f"{count} control-plane machines" if count else
                              "no control-plane machine yet")


class ControlPlaneData:
    """Keeps one Cluster's control-plane Secrets (see the module docstring)."""

    def __init__(self, client: Client, namespace: str | None = None,
                 clusters: ClusterClients | None = None, identities: tuple[str, ...] = (),
                 now: Callable[[], datetime] | None = None,
                 reach: Callable[[str], str] | None = None) -> None:
        self.client = client
        self.reach = reach
        """Where the management plane connects for an endpoint's host (None: itself)."""
        self.identities = identities
        """The management controllers that get an identity in each cluster."""
        self.now = now if now is not None else (lambda: datetime.now(UTC))
        # What was parsed and checked, by the resourceVersions it came from:
        # the Cluster is reconciled on every Machine change, and certificate
        # checks (signatures) need not run again for Secrets that did not change.
        self._pki: dict[tuple[str, str], tuple[tuple[str, ...], ClusterPki]] = {}
        self._checked: dict[tuple[str, str, str], tuple[str, str, datetime | None]] = {}
        self.clusters = clusters
        """The per-cluster tracker that probes endpoints (None: no probing)."""
        self.namespace = namespace
        """The namespace the controller watches (None: all): where VIP clashes are seen."""

    async def reconcile(self, raw: dict[str, Any], cluster: Cluster,
                        machines: Sequence[Machine]) -> ControlPlaneOutcome:
        """The endpoint, conditions and Events to propose; ``machines``: the
        cluster's members. Events of a refused endpoint come only when the
        refusal is new (the reconciler runs on every Machine change)."""
        meta = cluster.metadata
        namespace, name = meta.namespace or "", meta.name or ""
        masters = control_plane_machines(machines)
        plan = await self._plan(raw, cluster, masters)
        available = availability(masters)
        odd = quorum(masters)
        router_id: int | None = None
        if plan.problem is None and holds_vip(cluster) \
                and cluster.spec.api_server.port == API_SERVER_BIND_PORT:
            plan = EndpointPlan(None, EndpointProblem(
                "EndpointPortReserved", f"spec.apiServer.port {API_SERVER_BIND_PORT} is where "
                "the API servers listen behind the VIP's HAProxy; choose another port"))
        if plan.problem is None and cluster.spec.api_server.vip \
                and cluster.spec.api_server.keepalived:
            try:
                router_id = await self._router_id(raw, cluster)
            except RouterIdProblem as exc:
                plan = EndpointPlan(None, EndpointProblem(exc.reason, str(exc)))
        if plan.problem is not None:
            await self.forget(namespace, name)
            why = plan.problem
            before = find(cluster.status.conditions if cluster.status else [], ENDPOINT_VALID)
            news = [] if before is not None and before.reason == why.reason else [
                EventSpec("Warning", why.reason, why.message)]
            return ControlPlaneOutcome(None, conditions=[
                ConditionSpec.false(ENDPOINT_VALID, why.reason, why.message),
                ConditionSpec.false(CERTIFICATES_AVAILABLE, "EndpointInvalid",
                                    "nothing is made for a cluster whose endpoint is refused"),
                available, odd,
                ConditionSpec.false(CONTROL_PLANE_REACHABLE, "EndpointInvalid", why.message),
            ], events=news)
        valid = (ConditionSpec.true(ENDPOINT_VALID, "Valid", "the API endpoint is sound")
                 if plan.endpoint is not None else
                 ConditionSpec.false(ENDPOINT_VALID, ENDPOINT_WAITING, plan.waiting))
        out = ControlPlaneOutcome(_api_endpoint(plan.endpoint), router_id=router_id,
                                  conditions=[valid])
        pki = await self._certificates(raw, namespace, name, machines, out)
        if pki is not None:
            await self._identities(raw, namespace, name, pki, out)
            await self._join(raw, namespace, name, out)
        if router_id is not None:
            await self._vrrp_secret(raw, namespace, name, out)
        out.conditions.extend((available, odd))
        out.conditions.append(await self._kubeconfig(raw, namespace, name, plan, pki, out))
        return out

    async def _plan(self, raw: dict[str, Any], cluster: Cluster,
                    masters: Sequence[Machine]) -> EndpointPlan:
        others = [c for c in (vip_claim(o) for o in await self.client.list(
            CLUSTERS, self.namespace, copy=False))
                  if c is not None]
        explicit = cluster.spec.control_plane_endpoint
        addresses = [a for a in (_internal_address(m) for m in masters) if a]
        return plan_endpoint(
            me=vip_claim(raw), port=cluster.spec.api_server.port,
            explicit=Endpoint(explicit.host, explicit.port) if explicit is not None else None,
            control_plane_cidrs=cluster.spec.networks.control_plane_cidrs, others=others,
            control_plane_addresses=addresses)

    async def _router_id(self, raw: dict[str, Any], cluster: Cluster) -> int:
        """The VRRP router id (see ``racksmith.controlplane.vrrp``)."""
        def claim(obj: dict[str, Any]) -> RouterClaim:
            meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
            wanted = (spec.get("apiServer") or {}).get("virtualRouterID")
            recorded = (obj.get("status") or {}).get("virtualRouterID")
            return RouterClaim(f"{meta.get('namespace')}/{meta.get('name')}",
                               tuple((spec.get("networks") or {}).get("controlPlaneCIDRs") or ()),
                               recorded if isinstance(recorded, int) else None,
                               wanted if isinstance(wanted, int) else None)
        others = [claim(o) for o in await self.client.list(CLUSTERS, self.namespace, copy=False)
                  if ((o.get("spec") or {}).get("apiServer") or {}).get("vip")]
        return allocate_router_id(claim(raw), others)

    async def _vrrp_secret(self, raw: dict[str, Any], namespace: str, name: str,
                           out: ControlPlaneOutcome) -> None:
        """``<cluster>-vrrp`` (key ``authPass``): keepalived's authentication,
        made once."""
        secret_id = vrrp_secret_name(name)
        if await self.client.get(SECRETS, namespace, secret_id) is not None:
            return
        if await self._create_owned(raw, vrrp_secret(namespace, name, new_auth_pass())):
            out.events.append(EventSpec("Normal", "VRRPSecretGenerated",
                                        f"generated Secret {secret_id}"))

    async def _join(self, raw: dict[str, Any], namespace: str, name: str,
                    out: ControlPlaneOutcome) -> None:
        """``<cluster>-join`` (``racksmith.controlplane.jointoken``): a bootstrap
        token and a certificate key for the real kubeadm, made when missing or
        damaged and made anew when a third of the token's life is left; the
        reconcile comes back when that falls due."""
        secret_id = join_secret_name(name)
        now = self.now().replace(microsecond=0)
        current = await self.client.get(SECRETS, namespace, secret_id)
        join = parse_join(current)
        if join is not None and not join.due(now):
            out.requeue_after = max(1.0, ((join.expires - now) - (
                join.expires - join.issued) / 3).total_seconds())
            return
        fresh = new_join(now)
        labels = {CLUSTER_NAME_LABEL: name}
        if current is None:
            if await self._create_owned(raw, join_secret(namespace, name, fresh, labels)):
                out.events.append(EventSpec("Normal", "JoinTokenIssued",
                                            f"issued Secret {secret_id}"))
        else:
            current["data"] = join_secret(namespace, name, fresh, labels)["data"]
            await self.client.update(SECRETS, current)
            out.events.append(EventSpec("Normal", "JoinTokenRenewed",
                                        f"issued Secret {secret_id} again"))
        out.requeue_after = (fresh.expires - fresh.issued).total_seconds() * 2 / 3

    async def _identities(self, raw: dict[str, Any], namespace: str, name: str,
                          pki: ClusterPki, out: ControlPlaneOutcome) -> None:
        """``<cluster>-racksmith-NAME`` per controller that works inside the
        cluster (``racksmith.controlplane.identities``): made when missing,
        issued again within 30 days of its end or when unusable."""
        for controller in self.identities:
            secret_id = identity_secret_name(name, controller)
            current = await self.client.get(SECRETS, namespace, secret_id)
            if current is None:
                fresh = identity_secret(namespace, name, controller, pki.ca)
                if await self._create_owned(raw, fresh):
                    out.events.append(EventSpec("Normal", "IdentityIssued",
                                                f"issued Secret {secret_id}"))
            elif self._needs_renewal(current, pki):
                current["data"] = identity_secret(namespace, name, controller, pki.ca)["data"]
                await self.client.update(SECRETS, current)
                out.events.append(EventSpec("Normal", "IdentityRenewed",
                                            f"issued Secret {secret_id} again"))

    async def _create_owned(self, raw: dict[str, Any], secret: dict[str, Any]) -> bool:
        """Create ``secret`` owned by the Cluster ``raw``; False when another
        writer made it first (then it is theirs, and it is read next time)."""
        secret["metadata"]["ownerReferences"] = [_owner(raw)]
        try:
            await self.client.create(SECRETS, secret)
        except AlreadyExists:
            return False
        return True

    async def _certificates(self, raw: dict[str, Any], namespace: str, name: str,
                            machines: Sequence[Machine], out: ControlPlaneOutcome
                            ) -> ClusterPki | None:
        found = {s: await self.client.get(SECRETS, namespace, secret_name(name, s))
                 for s in SUFFIXES}
        missing = [s for s in SUFFIXES if found[s] is None]
        if missing and not is_deployed(machines):
            made = []
            for suffix in missing:
                pair = (new_service_account_keys() if suffix == SA_SUFFIX
                        else new_ca(AUTHORITIES[suffix][1]))
                await self._create_owned(raw, pki_secret(namespace, name, suffix, pair))
                found[suffix] = await self.client.get(SECRETS, namespace,
                                                      secret_name(name, suffix), live=True)
                made.append(secret_name(name, suffix))
            out.events.append(EventSpec("Normal", "CertificatesGenerated",
                                        f"generated {', '.join(made)}"))
        try:
            versions = tuple(_rv(found[s]) for s in SUFFIXES)
            memo = self._pki.get((namespace, name))
            if memo is not None and memo[0] == versions and all(versions):
                return _available(out, name, memo[1])
            pairs: dict[str, KeyPair] = {s: parse_pair(name, s, found[s]) for s in SUFFIXES}
        except PkiDamaged as exc:
            message = (f"{exc}; the cluster's machines were deployed with it, so it is not "
                       "replaced: restore it from a backup")
            out.conditions.append(ConditionSpec.false(CERTIFICATES_AVAILABLE,
                                                      "CertificatesDamaged", message))
            return None
        pki = ClusterPki(**pairs)
        self._pki[(namespace, name)] = (versions, pki)
        return _available(out, name, pki)

    def _needs_renewal(self, secret: dict[str, Any], pki: ClusterPki) -> bool:
        """``identities.needs_renewal``, its certificate checks done once per
        resourceVersion of the Secret (the time test every call)."""
        meta = secret.get("metadata") or {}
        key = (str(meta.get("namespace")), str(meta.get("name")), "identity")
        rv, ca = _rv(secret), _ca_digest(pki)
        memo = self._checked.get(key)
        if memo is None or memo[:2] != (rv, ca):
            due = None if needs_renewal(secret, pki.ca, datetime.min.replace(tzinfo=UTC)) \
                else _not_after(secret) - RENEW_BEFORE
            memo = (rv, ca, due)
            self._checked[key] = memo
        return memo[2] is None or memo[2] <= self.now()

    def _check_kubeconfig(self, secret: dict[str, Any], cluster: str, endpoint: Endpoint,
                          pki: ClusterPki) -> None:
        """``check_kubeconfig``, done once per resourceVersion, endpoint and CA."""
        meta = secret.get("metadata") or {}
        key = (str(meta.get("namespace")), str(meta.get("name")), "kubeconfig")
        stamp = f"{_rv(secret)}|{endpoint.url()}"
        if self._checked.get(key, ("", "", None))[:2] == (stamp, _ca_digest(pki)):
            return
        check_kubeconfig(secret, cluster, endpoint, pki.ca)
        self._checked[key] = (stamp, _ca_digest(pki), None)

    async def _kubeconfig(self, raw: dict[str, Any], namespace: str, name: str,
                          plan: EndpointPlan, pki: ClusterPki | None,
                          out: ControlPlaneOutcome) -> ConditionSpec:
        if pki is None:
            return ConditionSpec.false(CONTROL_PLANE_REACHABLE, "CertificatesDamaged",
                                       "no kubeconfig without the cluster's certificates")
        if plan.endpoint is None:
            return ConditionSpec.false(CONTROL_PLANE_REACHABLE, "WaitingForEndpoint",
                                       plan.waiting)
        # The kubeconfig names the endpoint as the management plane reaches it.
        target = plan.endpoint if self.reach is None else Endpoint(
            self.reach(plan.endpoint.host), plan.endpoint.port)
        secret_id = kubeconfig_secret_name(name)
        current = await self.client.get(SECRETS, namespace, secret_id)
        if current is not None:
            try:
                self._check_kubeconfig(current, name, target, pki)
            except KubeconfigStale as exc:
                fresh = kubeconfig_secret(namespace, name,
                                          admin_kubeconfig(name, target, pki.ca))
                current["data"] = fresh["data"]
                await self.client.update(SECRETS, current)
                out.events.append(EventSpec("Normal", "KubeconfigWritten",
                                            f"rewrote Secret {secret_id}: it {exc}"))
            except KubeconfigDamaged as exc:
                return ConditionSpec.false(
                    CONTROL_PLANE_REACHABLE, "KubeconfigInvalid",
                    f"Secret {secret_id} {exc}; delete it to have it rebuilt")
        else:
            await self._create_owned(raw, kubeconfig_secret(
                namespace, name, admin_kubeconfig(name, target, pki.ca)))
            out.events.append(EventSpec("Normal", "KubeconfigWritten",
                                        f"wrote Secret {secret_id} for {target.url()}"))
        if self.clusters is None:
            return ConditionSpec(CONTROL_PLANE_REACHABLE, ConditionStatus.UNKNOWN, NOT_PROBED,
                                 f"Secret {secret_id} is sound; the endpoint "
                                 f"{target.url()} is not probed from the management "
                                 "plane")
        verdict = self.clusters.track(ObjectKey(namespace, name), ClusterAccess(
            server=target.url(), ca_pem=pki.ca.cert_pem))
        status = {True: ConditionStatus.TRUE, False: ConditionStatus.FALSE}.get(
            verdict.reachable, ConditionStatus.UNKNOWN) if verdict.reachable is not None \
            else ConditionStatus.UNKNOWN
        return ConditionSpec(CONTROL_PLANE_REACHABLE, status, verdict.reason, verdict.message)

    async def forget(self, namespace: str, name: str) -> None:
        """The Cluster is gone (or has no endpoint): stop tracking it."""
        self._pki.pop((namespace, name), None)
        for key in [k for k in self._checked if k[0] == namespace and k[1].startswith(name)]:
            del self._checked[key]
        if self.clusters is not None:
            await self.clusters.drop(ObjectKey(namespace, name))


def _rv(obj: dict[str, Any] | None) -> str:
    return str(((obj or {}).get("metadata") or {}).get("resourceVersion") or "")


def _ca_digest(pki: ClusterPki) -> str:
    return hashlib.sha256(pki.ca.cert_pem).hexdigest()


def _not_after(secret: dict[str, Any]) -> datetime:
    cert = x509.load_pem_x509_certificate(secret_bytes(secret, "tls.crt") or b"")
    return cert.not_valid_after_utc


def _available(out: ControlPlaneOutcome, name: str, pki: ClusterPki) -> ClusterPki:
    out.conditions.append(ConditionSpec.true(
        CERTIFICATES_AVAILABLE, "Available",
        f"{', '.join(secret_name(name, s) for s in SUFFIXES)}"))
    return pki


def _api_endpoint(endpoint: Endpoint | None) -> APIEndpoint | None:
    if endpoint is None:
        return None
    return APIEndpoint(host=endpoint.host, port=endpoint.port)


def _owner(raw: dict[str, Any]) -> dict[str, Any]:
    meta = raw.get("metadata") or {}
    return {"apiVersion": raw.get("apiVersion", "cluster.racksmith.io/v1alpha1"),
            "kind": "Cluster", "name": meta.get("name"), "uid": meta.get("uid"),
            "controller": True}

"""The composition root: ``racksmith up`` and ``racksmith apiserver``.

Owns: building every part from :class:`Settings` and starting/stopping them
in order — the embedded API server (with Racksmith's CRDs as bootstrap
objects), the controllers' identities (a ServiceAccount and ClusterRole each,
from what each declares, and their clients: :mod:`racksmith.app.identities`;
the controllers talk to the server over HTTPS exactly as on a real cluster,
never as the administrator), the controllers (:func:`build_controllers`,
with the waits of ``Settings.timings``, the backup controller with its
``LocalSnapshotter``) and their manager, ``--apply`` manifests, and after a
restore the detaching of the hosts deployed after the backup — plus
readiness (``/readyz`` is 200 once the API and every controller run),
``/metrics`` and clean shutdown on SIGINT/SIGTERM. On start the data dir is
made private (:func:`racksmith.filemodes.tighten_tree`) and locked (one
server per data dir: :mod:`racksmith.datalock`).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from racksmith import console, datalock, filemodes
from racksmith.apiserver.errors import ApiError
from racksmith.apiserver.server import ApiServer, ApiServerConfig
from racksmith.app import clusterproxy
from racksmith.app.admission import kind_admission
from racksmith.app.clusterplanes import AccessReader, planes
from racksmith.app.clusterproxy import ClusterProxy, Upstreams
from racksmith.app.identities import LEASE_NAME, LEASE_NAMESPACE, Identities, identity_objects
from racksmith.app.logrotate import LogRotator
from racksmith.app.manifests import load_manifests
from racksmith.app.progress import follow_clusters
from racksmith.app.replicas import Replicas, start_etcd
from racksmith.app.services import (
    EmulatorService,
    IronicProcess,
    PortBook,
    StartupError,
    StaticHTTP,
    ironic_settings,
)
from racksmith.app.settings import Settings
from racksmith.backup.archive import REPORT as RESTORE_REPORT
from racksmith.backup.crypto import load_key
from racksmith.backup.service import EtcdStoreSnapshots, LocalSnapshotter
from racksmith.controllers import (
    CONTROLLER_ACCESS,
    ClusterOptions,
    all_controllers,
    in_cluster_access,
)
from racksmith.controllers.backup import ACCESS as BACKUP_ACCESS
from racksmith.controllers.backup import BackupSchedule, Snapshotter, backup_controller
from racksmith.emulator.alertmanager import BuiltinAlertmanager
from racksmith.emulator.workloads import ACCESS as WORKLOADS_ACCESS
from racksmith.emulator.workloads import reference_workloads_controller
from racksmith.etcdcluster import LocalEtcdCluster
from racksmith.ironic.client import IronicClient
from racksmith.kinds.crdgen import bootstrap_manifests
from racksmith.kinds.hostannotations import DEPLOYED_AFTER_BACKUP, DETACHED
from racksmith.kinds.metal import BareMetalHost, ChecksumType, Image
from racksmith.loopback import LoopbackMap
from racksmith.provisioner.base import Provisioner
from racksmith.provisioner.ironic import IronicProvisioner
from racksmith.runtime.access import Access
from racksmith.runtime.client import Client, as_client
from racksmith.runtime.clusters import ClusterClients
from racksmith.runtime.controller import Controller
from racksmith.runtime.manager import Manager

log = logging.getLogger("racksmith")

#: Namespace and name of the Secret with the host agents' API access.
AGENT_SECRET = ("racksmith-system", "racksmith-agent")

Step = Callable[[str], None]


#: What every controller ``racksmith up`` may run reads and writes, by name:
#: the source of their ServiceAccounts and ClusterRoles (racksmith.app.identities).
ACCESS: dict[str, Access] = {**CONTROLLER_ACCESS, "reference-workloads": WORKLOADS_ACCESS,
                             "backup": BACKUP_ACCESS}


def build_controllers(settings: Settings, client: Any, *, provisioner: Provisioner | None,
                      registry: CollectorRegistry, default_image: Image | None,
                      alertmanager_url: str | None, emulated: bool,
                      on_step: Step = lambda _msg: None,
                      client_for: Callable[[str], Any] | None = None,
                      snapshotter: Snapshotter | None = None,
                      backup_before_update: bool = True,
                      clusters: ClusterClients | None = None,
                      reach: Callable[[str], str] | None = None) -> list[Controller]:
    """Every controller ``racksmith up`` runs, built with ``settings`` (workers,
    timings): those of :func:`all_controllers` (the BareMetalHost controller
    when a ``provisioner`` is given), with a ``snapshotter`` the backup
    controller (and, unless ``backup_before_update`` is False, a backup
    before every update plan starts), with ``clusters`` the probes of each
    managed cluster's endpoint (``reach``: the address it connects to for one
    of the site's, the virtual datacenter's loopback image) and, with
    emulated hosts and ``settings.reference_workloads``, the reference
    workload controller. ``client_for``: each controller's own client, by
    name (None: ``client``). With ``clusters``, the node-side controllers
    work inside each cluster's own API (``racksmith.app.clusterplanes``).
    Every cluster also gets the cluster proxy's identity ``console``
    (``racksmith.app.clusterproxy``): its certificate and its role there."""
    # the cluster proxy's identity in every cluster (racksmith.app.clusterproxy),
    # and the reference workloads' with emulated hosts
    workloads: dict[str, Access] = {clusterproxy.IDENTITY: clusterproxy.ACCESS}
    if emulated and settings.reference_workloads:
        workloads["reference-workloads"] = WORKLOADS_ACCESS
    own: Callable[[str], Any] = client_for if client_for is not None else (lambda _n: client)
    plane_of = planes(lambda name: as_client(own(name)),
                      [n for n in in_cluster_access(workloads) if n != clusterproxy.IDENTITY],
                      clusters, reach, reader=own("cluster"))
    controllers = all_controllers(client, workers=settings.controller_workers,
                                  provisioner=provisioner, registry=registry,
                                  ipam=True, cluster=ClusterOptions(
                                      default_image=default_image,
                                      agent_secret=AGENT_SECRET,
                                      alertmanager_url=alertmanager_url,
                                      backup_before_update=(snapshotter is not None
                                                            and backup_before_update),
                                      clusters=clusters, reach=reach,
                                      plane_for=plane_of.__getitem__,
                                      workload_identities=workloads),
                                  timings=settings.timings.controllers, client_for=client_for)
    if snapshotter is not None:
        controllers.append(backup_controller(
            client_for("backup") if client_for is not None else client, snapshotter,
            schedule=BackupSchedule(every=settings.backup_every, keep=settings.backup_keep),
            reach=reach))
    if emulated and settings.reference_workloads:
        on_step("reference workload controller: namespace racksmith-workloads")
        controllers.append(reference_workloads_controller(
            client_for("reference-workloads") if client_for is not None else client,
            timings=settings.timings.reference_workloads,
            plane=plane_of["reference-workloads"]))
    return controllers


@dataclass
class Racksmith:
    """Everything ``racksmith up`` runs, in one process."""

    settings: Settings
    with_controllers: bool = True
    on_step: Step = lambda _msg: None
    server: ApiServer | None = None
    manager: Manager | None = None
    identities: Identities | None = None
    ironic: IronicProcess | None = None
    emulator: EmulatorService | None = None
    _http: StaticHTTP | None = None
    alertmanager: BuiltinAlertmanager | None = None
    alertmanager_url: str | None = None
    _ironic_client: IronicClient | None = None
    provisioner: IronicProvisioner | None = None
    _manager_task: asyncio.Task[None] | None = None
    _progress_task: asyncio.Task[None] | None = None
    _stopping: asyncio.Event = field(default_factory=asyncio.Event)
    _lock: int | None = None
    etcd_cluster: LocalEtcdCluster | None = None
    log_rotator: LogRotator | None = None
    replicas: Replicas | None = None
    _started: bool = False
    _server_started: bool = False
    cluster_clients: ClusterClients | None = None
    cluster_proxy: ClusterProxy | None = None
    proxy_upstreams: Upstreams | None = None

    async def _apply_manifest(self, obj: dict[str, Any]) -> None:
        """Server-side apply of one ``--apply`` object (manager racksmith-apply,
        not forced). A restart re-applies the same manifests: fields others
        set since survive; a field someone else changed to another value
        (``kubectl patch`` of the cluster's release, say) is a conflict — the
        object is left as it is and the conflict logged, never overwritten."""
        assert self.server is not None
        try:
            await self.server.apply(obj, manager="racksmith-apply", server_side=True)
        except ApiError as exc:
            if exc.code != 409:
                raise
            meta = obj.get("metadata") or {}
            log.warning("--apply left %s %s as it is: %s", obj.get("kind"),
                        "/".join(x for x in (meta.get("namespace"), meta.get("name")) if x),
                        exc.message)

    def _check_store_kind(self) -> None:
        """A data dir keeps the store it was made with: starting it with the
        other one would serve an empty site beside the real one."""
        s = self.settings
        local_etcd = s.data_dir / "etcd" / "cluster.json"
        sqlite = s.data_dir / "store.db"
        if s.etcd_members and sqlite.exists():
            raise StartupError(f"{s.data_dir} holds a SQLite store ({sqlite}): start it "
                               "with --store sqlite (the default), or use another data dir "
                               "for --store etcd")
        if s.etcd is None and not s.etcd_members and local_etcd.exists():
            raise StartupError(f"{s.data_dir} holds a local etcd cluster ({local_etcd.parent}): "
                               "start it with --store etcd, or use another data dir")

    @property
    def server_started(self) -> bool:
        """The API server answers (the controllers may still be starting)."""
        return self._server_started

    @property
    def uses_sqlite(self) -> bool:
        return self.settings.etcd is None and not self.settings.etcd_members

    @property
    def runs_controllers(self) -> bool:
        return self.with_controllers and self.settings.run_controllers

    def ready(self) -> bool:
        if self.server is None or not self._server_started:
            return False
        if not self.runs_controllers:
            return self._started
        return self.manager is not None and self.manager.ready

    def _metrics(self) -> bytes:
        return self.manager.metrics_text() if self.manager is not None else b""

    async def start(self) -> None:
        s = self.settings
        # Private before anything reads or writes it: a data dir (or files
        # in it) left readable by others is tightened, each path logged.
        filemodes.private_dir(s.data_dir)
        try:
            self._lock = datalock.hold(s.data_dir)  # one server per data dir
        except datalock.DataDirBusy as exc:
            raise StartupError(str(exc)) from None
        await asyncio.to_thread(filemodes.tighten_tree, s.data_dir)
        self._check_store_kind()
        etcd = s.etcd
        if s.etcd_members:
            self.on_step(f"starting a {s.etcd_members}-member etcd cluster")
            try:
                self.etcd_cluster, local = await asyncio.to_thread(
                    start_etcd, s.data_dir, s.etcd_members)
            except (RuntimeError, OSError) as exc:
                raise StartupError(f"etcd did not start: {exc}") from None
            etcd = local
            self.on_step(f"etcd on {', '.join(local.endpoints)}")
        self.on_step("starting the API server")
        self.cluster_proxy = ClusterProxy(
            lambda subject, attrs: self.server is not None
            and self.server.authorizer.authorize(subject, attrs),
            lambda: self.proxy_upstreams)
        self.server = ApiServer(
            ApiServerConfig(data_dir=s.data_dir, host=s.host, port=s.port,
                            insecure_http=s.insecure_http, etcd=etcd,
                            shared_dir=s.shared_dir, tls_cert_file=s.tls_cert_file,
                            tls_key_file=s.tls_key_file, client_ca_file=s.client_ca_file,
                            host_restriction=s.host_restriction),
            ready=self.ready, metrics=self._metrics,
            extra_routes=[*(console.routes(lambda: self.alertmanager_url) if s.console else []),
                          *self.cluster_proxy.routes()],
            public=lambda path: (s.console and console.is_public(path))
            or clusterproxy.is_public(path),
            admission=[kind_admission])
        await self.server.start(bootstrap=bootstrap_manifests())
        self._server_started = True
        self.log_rotator = LogRotator(s.data_dir)
        self.log_rotator.start()
        self.on_step(f"API server on {self.server.url}")
        if s.apiserver_replicas > 1 and etcd is not None:
            self.replicas = Replicas(s.data_dir, etcd, s.apiserver_replicas, s.host,
                                     host_restriction=s.host_restriction)
            try:
                await self.replicas.start()
            except RuntimeError as exc:
                raise StartupError(str(exc)) from None
            self.replicas.add_contexts(self.server.kubeconfig_path)
            for replica in self.replicas.replicas:
                self.on_step(f"API server replica r{replica.index} on {replica.url}")
        await self._publish_agent_config()
        await self._apply_restore_report()
        if s.with_ironic and self.with_controllers:
            await self._start_provisioning()
        manifests = list(s.apply)
        if self.emulator is not None and s.apply_emulated_hosts:
            manifests.append(self.emulator.manifest_path)
        if manifests:
            self.on_step(f"applying {len(manifests)} manifest path(s)")
            for obj in load_manifests(manifests):
                await self._apply_manifest(obj)
        if self.with_controllers and not s.run_controllers:
            for obj in identity_objects(ACCESS):
                await self.server.apply(obj, manager="racksmith")
            self.on_step("controllers not started here (--no-controllers): run "
                         "`racksmith controllers` with the identity "
                         "racksmith-system/controller-manager")
        if self.runs_controllers:
            self.on_step("starting controllers")
            self.identities = await self._start_identities()
            manager_client = self.identities.manager
            registry = CollectorRegistry()
            await self._start_alert_source()
            controllers = build_controllers(
                s, manager_client, provisioner=self.provisioner, registry=registry,
                default_image=self._default_image(), alertmanager_url=self.alertmanager_url,
                emulated=self.emulator is not None, on_step=self.on_step,
                client_for=self.identities.client_for, reach=self._reach(),
                # backups read the SQLite store; etcd is backed up with etcdctl
                # (docs/ha.md): there a ControlPlaneBackup fails saying so
                snapshotter=self._snapshotter() if self.uses_sqlite else EtcdStoreSnapshots(
                    self._backup_dir(), self._backup_key()),
                # the pre-update backup takes the cluster's own store: on either store
                clusters=self._cluster_clients())
            if self.cluster_clients is not None:
                # the cluster proxy reads each cluster's access as the Cluster
                # controller (which issues the identities) does
                self.proxy_upstreams = Upstreams(self.cluster_clients, AccessReader(
                    as_client(self.identities.client_for("cluster")), self._reach()))
            self.manager = Manager(manager_client, controllers,
                                   leader_election=s.leader_election,
                                   lease_namespace=LEASE_NAMESPACE, lease_name=LEASE_NAME,
                                   registry=registry)
            self._manager_task = asyncio.create_task(self.manager.run(), name="manager")
            for _ in range(600):
                if self.manager.ready or self._manager_task.done():
                    break
                await asyncio.sleep(0.05)
            if self._manager_task.done():
                self._manager_task.result()
            # over the controllers' shared informers (the process's identity)
            progress_client = Client(manager_client, informers=self.identities.informers)
            self._progress_task = asyncio.create_task(
                follow_clusters(progress_client, self.on_step), name="cluster-progress")
        self._started = True
        self.on_step("ready")

    def _reach(self) -> Callable[[str], str] | None:
        """With emulated hosts, a cluster's endpoint is reached at its loopback
        image in the virtual datacenter (``racksmith.loopback``)."""
        if not self.settings.emulate_hosts:
            return None
        return LoopbackMap(self.settings.data_dir / "emulator" / "network.json").image

    def _cluster_clients(self) -> ClusterClients | None:
        """The per-cluster tracker, when endpoints are probed (always with
        emulated hosts, whose clusters serve their own API; its key files
        under DATA/clusters)."""
        s = self.settings
        if not (s.probe_cluster_endpoints or s.emulate_hosts):
            return None
        self.cluster_clients = ClusterClients(s.data_dir / "clusters",
                                              probe_interval=s.cluster_probe_interval)
        return self.cluster_clients

    async def _apply_restore_report(self) -> None:
        """After a restore: detach the hosts it found deployed after the backup
        (racksmith.backup.archive), with the annotation that makes the
        BareMetalHost controller say why; the report is then kept as
        ``restore-report.applied.json``."""
        assert self.server is not None
        path = self.settings.data_dir / RESTORE_REPORT
        if not path.exists():
            return
        try:
            report = json.loads(path.read_text())
            hosts = [str(h) for h in report.get("deployedSinceBackup") or []]
            when = str(report.get("restoredAt") or "")
        except (OSError, ValueError, AttributeError):
            log.warning("unreadable %s left as it is", path)
            return
        for ref in hosts:
            namespace, _, name = ref.partition("/")
            found = await self.server.annotate(
                BareMetalHost.info.api_version, "BareMetalHost", namespace, name,
                # force: detached whatever state the restored record says (it
                # may say provisioning: nothing may deploy over the server).
                {DETACHED: '{"force": true}',
                 DEPLOYED_AFTER_BACKUP: when})
            self.on_step(f"host {ref} was deployed after the restored backup: "
                         + ("detached; see its RecordMatchesHardware condition" if found
                            else "not in the backup (enrol it again once checked)"))
        path.rename(path.with_name("restore-report.applied.json"))

    def _backup_dir(self) -> Path:
        return self.settings.backup_dir or self.settings.data_dir / "backups"

    def _backup_key(self) -> bytes | None:
        s = self.settings
        return load_key(s.backup_key_file) if s.backup_key_file is not None else None

    def _snapshotter(self) -> LocalSnapshotter:
        """Where the backup controller writes backups (racksmith.backup.service)."""
        return LocalSnapshotter(self.settings.data_dir, self._backup_dir(), self._backup_key())

    async def _start_identities(self) -> Identities:
        """Every controller's ServiceAccount and ClusterRole (put back as
        declared at every start), then their clients (racksmith.app.identities)."""
        assert self.server is not None
        for obj in identity_objects(ACCESS):
            await self.server.apply(obj, manager="racksmith")
        ca_file = None if self.settings.insecure_http else \
            self.settings.data_dir / "pki" / "ca.crt"
        identities = Identities(self.server.url, ca_file, self.server.issue_token, list(ACCESS))
        await identities.start()
        return identities

    async def _publish_agent_config(self) -> None:
        """The Secret the Machine controller builds host agents' user data from:
        this API server's URL and its CA (see docs/design/cluster-contracts.md;
        each host's token is its own, requested by the Machine controller).
        Re-applied on every start, since the URL or CA may change."""
        assert self.server is not None
        namespace, name = AGENT_SECRET
        await self.server.apply({"apiVersion": "v1", "kind": "Namespace",
                                 "metadata": {"name": namespace}}, manager="racksmith")
        data = {"server": self.server.url, "ca.crt": (self.server.ca_pem or b"").decode("ascii")}
        await self.server.apply({
            "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {"app.kubernetes.io/part-of": "racksmith"}},
            "data": {k: base64.b64encode(v.encode()).decode("ascii") for k, v in data.items()},
        }, manager="racksmith")

    async def _start_alert_source(self) -> None:
        """The Alertmanager the update controller reads: ``--alertmanager-url``,
        else with emulated hosts the built-in one on a loopback port kept in
        ``DIR/ports.json`` (key ``alertmanager``), else none."""
        s = self.settings
        if s.alertmanager_url:
            self.alertmanager_url = s.alertmanager_url.rstrip("/")
        elif self.emulator is not None:
            book = PortBook(s.data_dir)
            self.alertmanager = BuiltinAlertmanager()
            self.alertmanager_url = await self.alertmanager.start(
                "127.0.0.1", book.get("alertmanager"))
            book.record({"alertmanager": self.alertmanager.port})
        if self.alertmanager_url:
            kind = "built-in" if self.alertmanager is not None else "external"
            self.on_step(f"alert source ({kind}): {self.alertmanager_url}")

    def external(self) -> dict[str, str]:
        """What a ``racksmith controllers`` process of its own needs to know
        (``--no-controllers``): Ironic's URL and the default OS image."""
        out: dict[str, str] = {}
        if self.ironic is not None:
            out["ironic"] = self.ironic.url
        image = self._default_image()
        if image is not None:
            out["default-image"] = f"{image.url} {image.checksum}"
        return out

    def _default_image(self) -> Image | None:
        """The OS image for releases that name none: the virtual datacenter's
        sample image when emulating, else none (the release must say)."""
        if self.emulator is None:
            return None
        image = self.emulator.dc.sample_image()
        return Image(url=image.url, checksum=image.sha256, checksum_type=ChecksumType.SHA256)

    async def _start_provisioning(self) -> None:
        """Ironic (started here or given), its HTTP root, the provisioner and,
        with --emulate-hosts, the virtual datacenter. Every port is bound by
        the service that uses it (the datacenter's by this process, handed to
        its child) and recorded in DIR/ports.json for the next start."""
        s = self.settings
        book = PortBook(s.data_dir)
        if s.ironic_url:
            url = s.ironic_url
            settings = ironic_settings(s.data_dir, 0, "", s.data_dir / "ironic" / "http", None)
        else:
            if s.emulate_hosts:
                self.on_step(f"starting the virtual datacenter ({s.emulate_hosts} hosts, "
                             f"{s.hardware} BMCs)")
                self.emulator = EmulatorService(s.data_dir, s.emulate_hosts,
                                                hardware=s.hardware)
                await self.emulator.prepare()
                http_url, http_root = self.emulator.dc.http_url, self.emulator.dc.http_root
                deploy_iso: str | None = self.emulator.dc.deploy_iso_url
            else:
                self._http = StaticHTTP(s.data_dir / "ironic" / "http", book.get("http"))
                book.record({"http": self._http.port})
                await self._http.start()
                http_url, http_root, deploy_iso = self._http.url, self._http.root, None
            # An explicit --ironic-port wins; 0 reuses the recorded one, or
            # lets Ironic's start pick one.
            port = s.ironic_port or book.get("ironic")
            periodics = s.timings.ironic_service
            settings = ironic_settings(
                s.data_dir, port, http_url, http_root, deploy_iso,
                sync_power_state_interval=periodics.sync_power_state_interval,
                check_provision_state_interval=periodics.check_provision_state_interval,
                firmware_status_interval=periodics.firmware_status_interval)
            self.on_step("starting Ironic")
            self.ironic = IronicProcess(settings)
            await self.ironic.start()
            settings = self.ironic.settings
            url = self.ironic.url
            book.record({"ironic": settings.port})
            self.on_step(f"Ironic on {url}")
            if self.emulator is not None:
                await self.emulator.start(url)
                self.on_step(f"emulated hosts: kubectl apply -f {self.emulator.manifest_path}")
        self._ironic_client = IronicClient(url, node_poll_interval=1.0)
        await self._ironic_client.__aenter__()
        self.provisioner = IronicProvisioner(self._ironic_client, settings,
                                             timings=s.timings.ironic)

    async def stop(self) -> None:
        if self._progress_task is not None:
            self._progress_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._progress_task
        if self.manager is not None:
            await self.manager.stop()
        if self.cluster_proxy is not None:
            await self.cluster_proxy.close()
        if self.cluster_clients is not None:
            await self.cluster_clients.close()
        if self._manager_task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(self._manager_task, 30)
        if self.identities is not None:
            await self.identities.close()
        if self.alertmanager is not None:
            await self.alertmanager.stop()
        if self._ironic_client is not None:
            await self._ironic_client.__aexit__(None, None, None)
        if self.ironic is not None:
            await self.ironic.stop()
        if self.emulator is not None:
            await self.emulator.stop()
        if self._http is not None:
            await self._http.stop()
        if self.log_rotator is not None:
            await self.log_rotator.stop()
        if self.replicas is not None:
            await self.replicas.stop()
        if self.server is not None:
            await self.server.stop()
        if self.etcd_cluster is not None:
            await asyncio.to_thread(self.etcd_cluster.stop)
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    async def run_forever(self) -> None:
        loop = asyncio.get_running_loop()
        # SIGHUP: the terminal went away; stop as cleanly as on Ctrl-C
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            loop.add_signal_handler(sig, self._stopping.set)
        try:
            await self.start()
            await self._stopping.wait()
        finally:
            self.on_step("stopping")
            await self.stop()
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                loop.remove_signal_handler(sig)

"""The composition root of ``racksmith controllers``: the controllers alone,
against any Kubernetes API.

Owns :class:`ControllersSettings` and :class:`Controllers`: the process's
own credentials (a kubeconfig, else the pod's ServiceAccount — in-cluster
config), each controller's own identity asked for through the TokenRequest
API with them (:class:`racksmith.app.identities.Identities`: the
ServiceAccounts and ClusterRoles of ``racksmith rbac`` / ``racksmith
manifests`` must exist), the BareMetalHost controller when an Ironic URL is
given (http_basic credentials and a CA bundle as Metal3's Ironic uses), the
manager with leader election across replicas (Lease
``racksmith-system/racksmith-controllers``), and ``/metrics``, ``/healthz``
and ``/readyz`` on their own address. The backup controller runs with
:class:`~racksmith.backup.service.EtcdStoreSnapshots`: on a real cluster the
API's objects are in the cluster's etcd, which a ControlPlaneBackup cannot
copy, so one created there ends Failed at once with the way to back etcd up
(``etcdctl snapshot save``) and a BackupFailed Event rather than staying
unprocessed; no backup is taken before an update either. With a clusters
directory (``--clusters-dir``) each managed cluster is reached through its
own API, as ``racksmith up`` reaches them (the node-side controllers inside
each cluster, a ClusterClients tracker keeping its client keys there), and
with the virtual datacenter's network file (``--emulated-network``) an
emulated cluster's endpoint at its loopback image.
SIGTERM/SIGINT stop it gracefully (the Lease is released for the standby).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog
from aiohttp import web
from prometheus_client import CollectorRegistry

from racksmith.app.identities import LEASE_NAME, Identities
from racksmith.app.runner import ACCESS, build_controllers
from racksmith.app.services import ironic_settings
from racksmith.app.settings import Settings, Timings
from racksmith.backup.service import EtcdStoreSnapshots
from racksmith.controllers import DEFAULT_WORKERS
from racksmith.ironic.client import IronicClient
from racksmith.kinds.metal import ChecksumType, Image
from racksmith.loopback import LoopbackMap
from racksmith.provisioner.ironic import IronicProvisioner
from racksmith.runtime.clusters import ClusterClients
from racksmith.runtime.kubeclient import api_client
from racksmith.runtime.manager import Manager

log = structlog.get_logger("racksmith.controllers")

LEASE_NAMESPACE = "racksmith-system"


@dataclass
class ControllersSettings:
    kubeconfig: Path | None = None
    """None: ``$KUBECONFIG``/``~/.kube/config``, or the pod's ServiceAccount in a pod."""
    ironic_url: str | None = None
    """Ironic's API (None: no BareMetalHost controller)."""
    ironic_username: str | None = None
    ironic_password: str | None = field(default=None, repr=False)
    ironic_ca: Path | None = None
    listen: tuple[str, int] = ("127.0.0.1", 8081)
    """Where ``/metrics``, ``/healthz`` and ``/readyz`` are served (port 0: any)."""
    leader_election: bool = True
    service_account_credentials: bool = True
    """Each controller with its own ServiceAccount (False: all with the process's)."""
    default_image: Image | None = None
    workers: int = DEFAULT_WORKERS
    timings: Timings = field(default_factory=Timings)
    clusters_dir: Path | None = None
    """Reach each managed cluster through its own API, its client keys kept
    here (None: every cluster's node side in the API of ``kubeconfig``)."""
    emulated_network: Path | None = None
    """The virtual datacenter's ``network.json``: reach an emulated
    cluster's endpoint at its loopback image (``racksmith.loopback``)."""


class Controllers:
    """See the module docstring."""

    def __init__(self, settings: ControllersSettings) -> None:
        self.settings = settings
        self.manager: Manager | None = None
        self.identities: Identities | None = None
        self.port = 0
        self._client: Any = None
        self._ironic: IronicClient | None = None
        self._scratch: tempfile.TemporaryDirectory[str] | None = None
        """The provisioner's work directory (Ironic's settings want one), removed at stop."""
        self._clusters: ClusterClients | None = None
        self._runner: web.AppRunner | None = None
        self._stopping = asyncio.Event()

    async def start(self) -> None:
        s = self.settings
        self._client = await api_client(s.kubeconfig)
        client_for = None
        if s.service_account_credentials:
            self.identities = Identities.of_client(self._client, list(ACCESS))
            await self.identities.start()
            client_for = self.identities.client_for
        provisioner = None
        if s.ironic_url:
            auth = None
            if s.ironic_username:
                import aiohttp

                auth = aiohttp.BasicAuth(s.ironic_username, s.ironic_password or "")
            self._ironic = IronicClient(s.ironic_url, node_poll_interval=1.0, auth=auth,
                                        ca_file=s.ironic_ca)
            await self._ironic.__aenter__()
            self._scratch = tempfile.TemporaryDirectory(prefix="racksmith-controllers-")
            work = Path(self._scratch.name)
            provisioner = IronicProvisioner(
                self._ironic, ironic_settings(work, 0, "", work / "http", None),
                timings=s.timings.ironic)
        registry = CollectorRegistry()
        settings = Settings(controller_workers=s.workers, timings=s.timings,
                            reference_workloads=False)
        if s.clusters_dir is not None:
            self._clusters = ClusterClients(s.clusters_dir)
        reach = LoopbackMap(s.emulated_network).image if s.emulated_network is not None \
            else None
        controllers = build_controllers(
            settings, self._client, provisioner=provisioner, registry=registry,
            default_image=s.default_image, alertmanager_url=None, emulated=False,
            client_for=client_for, snapshotter=EtcdStoreSnapshots(),
            backup_before_update=False, clusters=self._clusters, reach=reach)
        self.manager = Manager(self._client, controllers, leader_election=s.leader_election,
                               lease_namespace=LEASE_NAMESPACE, lease_name=LEASE_NAME,
                               registry=registry)
        self._runner = await self.manager.serve_http(*s.listen)
        for site in self._runner.sites:
            server = getattr(site, "_server", None)
            sockets = getattr(server, "sockets", None) or []
            for sock in sockets:
                self.port = int(sock.getsockname()[1])

    async def run_forever(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self._stopping.set)
        try:
            await self.start()
            assert self.manager is not None
            task = asyncio.create_task(self.manager.run(), name="manager")
            log.info("controllers started", metrics=f"{self.settings.listen[0]}:{self.port}",
                     leader_election=self.settings.leader_election)
            stop = asyncio.create_task(self._stopping.wait())
            await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
            if task.done():
                task.result()
        finally:
            await self.stop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)

    async def stop(self) -> None:
        if self.manager is not None:
            await self.manager.stop()
        if self._runner is not None:
            await self._runner.cleanup()
        if self.identities is not None:
            await self.identities.close()
        if self._ironic is not None:
            await self._ironic.__aexit__(None, None, None)
        if self._scratch is not None:
            self._scratch.cleanup()
        if self._clusters is not None:
            await self._clusters.close()
        if self._client is not None:
            with contextlib.suppress(Exception):
                await self._client.close()


def image_of(url: str | None, sha256: str | None) -> Image | None:
    """The default OS image from ``--default-image-url``/``--default-image-sha256``."""
    if not url:
        return None
    if not sha256:
        raise ValueError("--default-image-url needs --default-image-sha256")
    return Image(url=url, checksum=sha256, checksum_type=ChecksumType.SHA256)

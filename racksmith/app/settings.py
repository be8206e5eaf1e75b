"""Settings: the one typed configuration object, passed explicitly.

Owns: every knob of ``racksmith up`` / ``racksmith apiserver`` and where its
default comes from (``$RACKSMITH_DATA_DIR``, else ``~/.local/share/racksmith``),
and :class:`Timings`, the waits of every part ``racksmith up`` builds (no
command-line flag: the defaults are the product's; tests that start an
in-process app pass small ones).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from racksmith.apiserver.store.etcd import EtcdConfig
from racksmith.controllers import DEFAULT_WORKERS, ControllerTimings
from racksmith.emulator.workloads import WorkloadTimings
from racksmith.ironic.config import IronicPeriodics
from racksmith.provisioner.ironic_states import IronicTimings


def default_data_dir() -> Path:
    env = os.environ.get("RACKSMITH_DATA_DIR")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".local" / "share" / "racksmith"


@dataclass(frozen=True)
class Timings:
    """Poll intervals, retry delays and resync periods of everything the
    composition root builds, each part's own settings object with its defaults."""

    controllers: ControllerTimings = field(default_factory=ControllerTimings)
    """Every controller of :func:`racksmith.controllers.all_controllers`."""
    ironic: IronicTimings = field(default_factory=IronicTimings)
    """The Ironic provisioner's waits after its own requests."""
    reference_workloads: WorkloadTimings = field(default_factory=WorkloadTimings)
    """The reference workload controller (with emulated hosts)."""
    ironic_service: IronicPeriodics = field(default_factory=IronicPeriodics)
    """The periodic tasks of the Ironic ``racksmith up`` starts."""


@dataclass
class Settings:
    data_dir: Path = field(default_factory=default_data_dir)
    host: str = "127.0.0.1"
    port: int = 6443
    insecure_http: bool = False
    emulate_hosts: int = 0
    apply_emulated_hosts: bool = False
    """Apply DIR/emulated-hosts.yaml after start (the demo)."""
    hardware: str = "redfish"
    """BMCs of the emulated hosts: ``redfish`` (sushy-tools, virtual media)
    or ``fake`` (instant BMCs through Ironic's ``racksmith-fake`` type)."""
    ironic_url: str | None = None
    """An existing Ironic to use instead of starting one."""
    ironic_port: int = 6385
    """Port of the Ironic racksmith up starts (0: pick one, then keep it)."""
    with_ironic: bool = True
    """Start (or use) Ironic and the BareMetalHost controller."""
    apply: list[Path] = field(default_factory=list)
    leader_election: bool = True
    controller_workers: int = DEFAULT_WORKERS
    log_level: str = "info"
    alertmanager_url: str | None = None
    """Alertmanager v2 API read by UpdateAutoPause; None with emulated hosts:
    the built-in alert source (port kept in DIR/ports.json)."""
    reference_workloads: bool = True
    """With emulated hosts, run the reference workload controller."""
    console: bool = True
    """Serve the web console under /console/ on the API server's port."""
    timings: Timings = field(default_factory=Timings)
    """The waits of the controllers, the provisioner and the reference workloads."""
    run_controllers: bool = True
    """False (``--no-controllers``): the API server, Ironic and the virtual
    datacenter only, with the controllers' identities in place, for a
    ``racksmith controllers`` process of its own."""
    backup_every: float | None = None
    """Seconds between scheduled backups (``--backup-every``; None: none)."""
    backup_keep: int = 7
    """Scheduled backups kept (``--backup-keep``)."""
    backup_dir: Path | None = None
    """Where racksmith up writes backups (None: DATA/backups)."""
    backup_key_file: Path | None = None
    """Encrypt the backups racksmith up takes with this key file."""
    etcd: EtcdConfig | None = None
    """Serve the API from this etcd cluster (None: DATA/store.db)."""
    shared_dir: Path | None = None
    """The secrets API server replicas share (None: the data dir)."""
    tls_cert_file: Path | None = None
    """``racksmith apiserver --tls-cert-file`` (with ``tls_key_file``): serve
    with this certificate, as kube-apiserver does (a cluster's control plane)."""
    tls_key_file: Path | None = None
    client_ca_file: Path | None = None
    """``--client-ca-file``: accept client certificates this CA issued."""
    host_restriction: bool = True
    """``--no-host-restriction``: the API server does without its host
    restriction (host agents and kubelets get RBAC alone, as on a
    kube-apiserver without Racksmith's second line)."""
    probe_cluster_endpoints: bool = False
    """``racksmith up --probe-cluster-endpoints``: the Cluster controller
    probes each managed cluster's endpoint (``/readyz``) and sets
    ``ControlPlaneReachable`` from it. Always on with emulated hosts (the
    virtual datacenter's clusters serve their own API, reached at the
    loopback images of their VIPs); off by default otherwise: a real site's
    VIPs may not be routable from where ``racksmith up`` runs."""
    cluster_probe_interval: float = 30.0
    """Seconds between two probes of one cluster's endpoint."""
    etcd_members: int = 0
    """``racksmith up --store etcd``: members of the local etcd cluster it starts."""
    apiserver_replicas: int = 1
    """API server processes on that etcd (the first one in this process)."""

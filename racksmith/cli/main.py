"""The ``racksmith`` command line.

Owns: the commands and their flags — ``up`` (API server + controllers in the
foreground), ``apiserver`` (the API server alone), ``agent`` (the host
agent, :mod:`racksmith.agent`), ``crds`` (every CRD
manifest as a YAML stream, for a real cluster), ``version``. Parsing only;
the work is done by :mod:`racksmith.app`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Any

import typer
import yaml
from rich.console import Console

from racksmith import __version__
from racksmith.apiserver.audit import parse_duration
from racksmith.apiserver.store.etcd import EtcdConfig
from racksmith.app import daemon, kubeconfigs
from racksmith.app.display import LiveDisplay, SiteCounts, site_counts
from racksmith.app.identities import identity_objects
from racksmith.app.logs import configure_logging
from racksmith.app.runner import ACCESS, Racksmith
from racksmith.app.services import StartupError
from racksmith.app.settings import Settings, Timings, default_data_dir
from racksmith.app.timings_file import TimingsError, load_timings
from racksmith.cli.agent import agent, check_logging
from racksmith.controllers import DEFAULT_WORKERS
from racksmith.emulator.datacenter import HARDWARE_KINDS
from racksmith.emulator.listeners import PortInUse
from racksmith.filemodes import PRIVATE_UMASK
from racksmith.ironic.process import IronicStartError
from racksmith.kinds.crdgen import all_crds, render_yaml
from racksmith.runtime.client import Client
from racksmith.runtime.kubeclient import api_client
from racksmith.runtime.resources import CLUSTERS, HOSTS, MACHINES, PLANS, VOLUMES

app = typer.Typer(add_completion=True, no_args_is_help=True, pretty_exceptions_enable=False,
                  rich_markup_mode="markdown",
                  help="Racksmith: Kubernetes on bare metal, driven by kubectl.")
console = Console(stderr=True)


def _logging(level: str, fmt: str = "console", *, file: Path | None = None,
             terminal: bool = True, extra: list[logging.Handler] | None = None) -> None:
    """Configure logging; an unknown level or format is a usage error (exit 2)
    naming the valid ones, never a silent fallback."""
    check_logging(level, fmt)
    configure_logging(level.lower(), fmt, file=file, terminal=terminal, extra=extra)


def _private_files() -> None:
    """Server processes (``up``, ``apiserver``, ``emulator``) create every
    file 0600 and directory 0700, and so do their children (Ironic, SQLite's
    -wal/-shm, sushy-tools): see :mod:`racksmith.filemodes`. Not the host
    agent, which writes a host's files with the host's own umask."""
    os.umask(PRIVATE_UMASK)


def _run(rs: Racksmith, progress: bool, live: LiveDisplay | None = None) -> None:
    def step(msg: str) -> None:
        if live is not None:
            live.step(msg)
            logging.getLogger("racksmith").info(msg)
        elif progress:
            console.print(f"[bold cyan]•[/] {msg}")
        else:
            logging.getLogger("racksmith").info(msg)

    rs.on_step = step

    async def main() -> None:
        display: asyncio.Task[None] | None = None
        counter = _SiteCounter(rs)
        if live is not None:
            display = asyncio.create_task(live.run(counter, Console()))
        async def announce() -> None:
            while not rs.ready():  # noqa: ASYNC110 - readiness is a predicate, not an event
                await asyncio.sleep(0.1)
            server = rs.server
            assert server is not None
            # The kubeconfig path goes to stdout: scripts read it from there.
            print(f"kubeconfig: {server.kubeconfig_path}", flush=True)
            for key, value in rs.external().items() if not rs.runs_controllers else ():
                print(f"{key}: {value}", flush=True)
            print(f"readyz: {server.url}/readyz", flush=True)
            if rs.settings.console:
                print(f"console: {server.url}/console/ (log in with the token in "
                      f"{server.kubeconfig_path})", flush=True)
            if live is not None:
                live.ready_line = (f"ready: export KUBECONFIG={server.kubeconfig_path}; "
                                   "kubectl get machines")
            elif progress:
                console.print(f"[bold green]ready[/]: export KUBECONFIG={server.kubeconfig_path}"
                              "; kubectl get crds")

        task = asyncio.create_task(announce())
        try:
            await rs.run_forever()
        finally:
            task.cancel()
            if display is not None:
                display.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await display
            await counter.close()

    try:
        asyncio.run(main())
    except (StartupError, PortInUse, IronicStartError) as exc:
        # Something to fix before starting again: say what, no traceback.
        print(f"racksmith: cannot start: {exc}", file=sys.stderr, flush=True)
        raise typer.Exit(1) from None


class _SiteCounter:
    """The live display's poll: the site in counts, None until the API is up
    (read with the site's admin kubeconfig, as ``racksmith status`` does)."""

    def __init__(self, rs: Racksmith) -> None:
        self.rs = rs
        self.raw: Any = None
        self.api: Client | None = None

    async def __call__(self) -> SiteCounts | None:
        server = self.rs.server
        if server is None or not self.rs.server_started:
            return None
        if self.api is None:
            self.raw = await api_client(server.kubeconfig_path)
            self.api = Client(self.raw, field_manager="racksmith-display")
        lists = [await self.api.list(r, live=True)
                 for r in (HOSTS, MACHINES, CLUSTERS, VOLUMES, PLANS)]
        return site_counts(*lists)

    async def close(self) -> None:
        if self.raw is not None:
            await self.raw.close()


def _detach(data_dir: Path, timeout: float) -> None:
    """This very ``racksmith up`` command line, without --detach, in the background."""
    argv = sys.argv[sys.argv.index("up") + 1:] if "up" in sys.argv else []
    args = [a for a in argv if a != "--detach"]
    if not any(a == "--data-dir" or a.startswith("--data-dir=") for a in args):
        args += ["--data-dir", str(data_dir)]
    _private_files()
    try:
        pid, log_path, readyz = daemon.detach(args, data_dir, timeout)
    except daemon.DetachError as exc:
        print(f"racksmith: cannot start: {exc}", file=sys.stderr, flush=True)
        raise typer.Exit(1) from None
    print(f"racksmith up runs in the background (pid {pid}); logs: {log_path}", flush=True)
    print(f"kubeconfig: {data_dir / 'kubeconfig'}", flush=True)
    print(f"readyz: {readyz}", flush=True)
    print("stop it with: racksmith down"
          + ("" if data_dir == default_data_dir() else f" --data-dir {data_dir}"), flush=True)


@app.command()
def down(
    data_dir: Path = typer.Option(None, help="State directory (default $RACKSMITH_DATA_DIR, "
                                  "else ~/.local/share/racksmith)."),
    timeout: float = typer.Option(60, help="Seconds racksmith up gets to stop cleanly before "
                                  "it is killed."),
) -> None:
    """Stop everything running on a data dir: racksmith up (or apiserver) and
    what it started (API server replicas, etcd members, Ironic, the virtual
    datacenter, host agents); says what it stopped."""
    target = data_dir or default_data_dir()
    if not target.is_dir():
        raise typer.BadParameter(f"{target} is not a directory", param_hint="--data-dir")
    stopped = daemon.down(target, timeout)
    for item in stopped:
        print(item.line())
    if not stopped:
        print(f"nothing runs on {target}")


class StoreKind(StrEnum):
    """Where ``racksmith up`` keeps the API's objects."""

    SQLITE = "sqlite"
    ETCD = "etcd"


@app.command()
def up(
    data_dir: Path = typer.Option(None, help="State directory (default $RACKSMITH_DATA_DIR, "
                                  "else ~/.local/share/racksmith)."),
    port: int = typer.Option(6443, help="API server port, on the --host address (0 picks one)."),
    host: str = typer.Option("127.0.0.1", help="Address to listen on."),
    emulate_hosts: int = typer.Option(0, help="Start a virtual datacenter of N hosts and "
                                      "write DIR/emulated-hosts.yaml."),
    apply_emulated_hosts: bool = typer.Option(False, help="Also apply the emulated hosts "
                                              "(the demo)."),
    hardware: str = typer.Option("redfish", help="BMCs of the emulated hosts: redfish "
                                 "(sushy-tools, virtual media) or fake (instant BMCs; "
                                 "everything above provisioning as with redfish)."),
    ironic_url: str = typer.Option(None, help="Use this Ironic instead of starting one."),
    ironic_port: int = typer.Option(6385, help="Port of the Ironic started here (0 picks "
                                    "one and keeps it)."),
    no_ironic: bool = typer.Option(False, "--no-ironic", help="Run without Ironic and the "
                                   "BareMetalHost controller."),
    apply: list[Path] = typer.Option([], help="Manifests (files or directories) to apply "
                                     "after start; repeatable."),
    insecure_http: bool = typer.Option(False, help="Plain http, anonymous access (tests "
                                       "only)."),
    host_restriction: bool = typer.Option(
        True, "--host-restriction/--no-host-restriction",
        help="The API server narrows host agents to their own host's objects before RBAC "
        "(a second line: with --no-host-restriction it authorizes with RBAC alone, as "
        "kube-apiserver does)."),
    leader_election: bool = typer.Option(True, help="Hold a Lease while running "
                                         "controllers."),
    progress: bool = typer.Option(False, help="Without a terminal: print each start-up step "
                                  "and cluster progress as a line (on a terminal the live "
                                  "display shows them)."),
    verbose: bool = typer.Option(False, "--verbose", help="Log lines on the terminal instead of "
                                 "the live display (they always go to DATA/logs/racksmith.log)."),
    log_level: str = typer.Option("info", help="Log level."),
    log_format: str = typer.Option("console", help="console or json."),
    alertmanager_url: str = typer.Option(None, help="Prometheus Alertmanager (v2 API) whose "
                                         "alerts pause updates (UpdateAutoPause); default with "
                                         "--emulate-hosts: a built-in one on a loopback port."),
    no_reference_workloads: bool = typer.Option(False, "--no-reference-workloads",
                                                help="With --emulate-hosts, do not run the "
                                                "reference workload controller."),
    no_console: bool = typer.Option(False, "--no-console",
                                    help="Do not serve the web console (/console/)."),
    timings: Path = typer.Option(None, help="YAML file overriding controller waits (poll "
                                 "intervals, retry delays; see docs/testing.md). Labs and "
                                 "tests only: the defaults are the product's."),
    backup_every: str = typer.Option(None, help="Take a backup this often (e.g. 6h, 1d); "
                                     "one is also taken before every update plan starts."),
    backup_keep: int = typer.Option(7, help="Scheduled backups to keep (the newest "
                                    "verified one is never deleted)."),
    backup_dir: Path = typer.Option(None, help="Where backups go (default DATA/backups; "
                                    "better another disk)."),
    backup_key_file: Path = typer.Option(None, help="Encrypt backups with this key file "
                                         "(32 bytes or more, kept away from the backups)."),
    probe_cluster_endpoints: bool = typer.Option(
        False, "--probe-cluster-endpoints", help="Probe each managed cluster's API endpoint "
        "(/readyz) and set ControlPlaneReachable from it (off by default: emulated "
        "clusters do not serve their own API yet)."),
    no_controllers: bool = typer.Option(False, "--no-controllers",
                                        help="Start no controller (run `racksmith "
                                        "controllers` as its own process)."),
    store: StoreKind = typer.Option(StoreKind.SQLITE, help="sqlite (DATA/store.db, one "
                                    "process) or etcd (a local etcd cluster, DATA/etcd)."),
    etcd_members: int = typer.Option(3, help="With --store etcd: members of the local etcd "
                                     "cluster (1, 3 or 5)."),
    apiserver_replicas: int = typer.Option(1, help="API server processes (the first in this "
                                           "one); more than 1 needs --store etcd."),
    detach: bool = typer.Option(False, "--detach", help="Run in the background (logs in "
                                "DATA/logs/racksmith-up.log); return once ready. Stop it "
                                "with racksmith down."),
    wait_timeout: float = typer.Option(600, help="With --detach: seconds to wait for ready."),
) -> None:
    """Start the API server, Ironic and every controller (in the foreground, or
    with --detach in the background)."""
    use_etcd = store.value == StoreKind.ETCD.value
    if use_etcd and etcd_members not in (1, 3, 5):
        raise typer.BadParameter("must be 1, 3 or 5", param_hint="--etcd-members")
    if apiserver_replicas < 1:
        raise typer.BadParameter("must be 1 or more", param_hint="--apiserver-replicas")
    if apiserver_replicas > 1 and not use_etcd:
        raise typer.BadParameter("replicas share one store: add --store etcd",
                                 param_hint="--apiserver-replicas")
    if use_etcd and backup_every is not None:
        raise typer.BadParameter("backups read the SQLite store; back etcd up with "
                                 "etcdctl snapshot save (docs/ha.md)",
                                 param_hint="--backup-every")
    if emulate_hosts < 0:
        raise typer.BadParameter("must be 0 or more", param_hint="--emulate-hosts")
    if emulate_hosts and (no_ironic or ironic_url):
        raise typer.BadParameter("the virtual datacenter needs the Ironic racksmith up "
                                 "starts", param_hint="--emulate-hosts")
    if hardware not in HARDWARE_KINDS:
        raise typer.BadParameter(f"must be one of {', '.join(HARDWARE_KINDS)}",
                                 param_hint="--hardware")
    try:
        waits = load_timings(timings) if timings is not None else Timings()
    except TimingsError as exc:
        raise typer.BadParameter(str(exc), param_hint="--timings") from None
    every = None
    if backup_every is not None:
        try:
            every = parse_duration(backup_every).total_seconds()
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--backup-every") from None
    if backup_keep < 1:
        raise typer.BadParameter("must be 1 or more", param_hint="--backup-keep")
    if backup_key_file is not None:
        _key(backup_key_file)  # a clear error now rather than at the first backup
    if detach:
        _detach(data_dir or default_data_dir(), wait_timeout)
        return
    _private_files()
    site = data_dir or default_data_dir()
    live = LiveDisplay(str(site / "logs" / "racksmith.log")) \
        if sys.stdout.isatty() and not verbose else None
    _logging(log_level, log_format, file=site / "logs" / "racksmith.log",
             terminal=live is None, extra=[live.problems] if live is not None else None)
    settings = Settings(data_dir=site, host=host, port=port,
                        insecure_http=insecure_http, emulate_hosts=emulate_hosts,
                        apply_emulated_hosts=apply_emulated_hosts, hardware=hardware,
                        ironic_url=ironic_url,
                        ironic_port=ironic_port, with_ironic=not no_ironic,
                        apply=list(apply), leader_election=leader_election,
                        log_level=log_level, alertmanager_url=alertmanager_url or None,
                        reference_workloads=not no_reference_workloads,
                        console=not no_console, timings=waits, backup_every=every,
                        backup_keep=backup_keep, backup_dir=backup_dir,
                        backup_key_file=backup_key_file, run_controllers=not no_controllers,
                        etcd_members=etcd_members if use_etcd else 0,
                        apiserver_replicas=apiserver_replicas,
                        probe_cluster_endpoints=probe_cluster_endpoints,
                        host_restriction=host_restriction)
    _run(Racksmith(settings), progress, live)


@app.command()
def apiserver(
    data_dir: Path = typer.Option(None, help="State directory."),
    port: int = typer.Option(6443, help="Port, on the --host address (0 picks one)."),
    host: str = typer.Option("127.0.0.1", help="Address to listen on."),
    insecure_http: bool = typer.Option(False, help="Plain http, anonymous access (tests "
                                       "only)."),
    log_level: str = typer.Option("info", help="Log level."),
    etcd_endpoints: str = typer.Option(None, help="Serve from this etcd cluster (client "
                                       "URLs, comma-separated) instead of DATA/store.db."),
    etcd_cafile: Path = typer.Option(None, help="CA bundle of the etcd members."),
    etcd_certfile: Path = typer.Option(None, help="Client certificate for etcd."),
    etcd_keyfile: Path = typer.Option(None, help="Its key."),
    etcd_prefix: str = typer.Option("/racksmith", help="Key prefix in etcd (one per site)."),
    shared_dir: Path = typer.Option(None, help="Directory of the secrets the replicas of "
                                    "one site share (CA, ServiceAccount key, token file); "
                                    "default: the data dir."),
    tls_cert_file: Path = typer.Option(None, help="Serving certificate, as kube-apiserver's "
                                       "(default: one issued from DATA/pki/ca.crt)."),
    tls_private_key_file: Path = typer.Option(None, help="Its key."),
    client_ca_file: Path = typer.Option(None, help="Accept client certificates this CA "
                                        "issued (CN the user, O its groups), as "
                                        "kube-apiserver's --client-ca-file."),
    host_restriction: bool = typer.Option(
        True, "--host-restriction/--no-host-restriction",
        help="Narrow host agents and kubelets to their own host's objects before RBAC "
        "(a second line: with --no-host-restriction the server authorizes with RBAC "
        "alone, as kube-apiserver does)."),
) -> None:
    """Run the embedded API server alone (no controllers); with --etcd-endpoints,
    one of several replicas on one etcd cluster; with a cluster's PKI
    (--tls-cert-file, --client-ca-file), in place of its kube-apiserver."""
    _private_files()
    _logging(log_level)
    etcd = None
    if etcd_endpoints:
        endpoints = tuple(e.strip() for e in etcd_endpoints.split(",") if e.strip())
        for path, hint in ((etcd_cafile, "--etcd-cafile"), (etcd_certfile, "--etcd-certfile"),
                           (etcd_keyfile, "--etcd-keyfile")):
            if path is not None and not path.is_file():
                raise typer.BadParameter(f"{path} is not a file", param_hint=hint)
        etcd = EtcdConfig(endpoints=endpoints, ca_file=etcd_cafile, cert_file=etcd_certfile,
                          key_file=etcd_keyfile, prefix=etcd_prefix)
    for path, hint in ((tls_cert_file, "--tls-cert-file"),
                       (tls_private_key_file, "--tls-private-key-file"),
                       (client_ca_file, "--client-ca-file")):
        if path is not None and not path.is_file():
            raise typer.BadParameter(f"{path} is not a file", param_hint=hint)
    if (tls_cert_file is None) != (tls_private_key_file is None):
        raise typer.BadParameter("give both or neither", param_hint="--tls-cert-file")
    settings = Settings(data_dir=data_dir or default_data_dir(), host=host, port=port,
                        insecure_http=insecure_http, log_level=log_level, with_ironic=False,
                        etcd=etcd, shared_dir=shared_dir, tls_cert_file=tls_cert_file,
                        tls_key_file=tls_private_key_file, client_ca_file=client_ca_file,
                        host_restriction=host_restriction)
    _run(Racksmith(settings, with_controllers=False), False)


@app.command()
def controllers(
    kubeconfig: Path = typer.Option(None, help="Kubeconfig of the process's own identity "
                                    "(default $KUBECONFIG or ~/.kube/config; in a pod, its "
                                    "ServiceAccount)."),
    ironic_url: str = typer.Option(None, help="Ironic's API; without it, no BareMetalHost "
                                   "controller."),
    ironic_username: str = typer.Option(None, help="Ironic http_basic user."),
    ironic_password_file: Path = typer.Option(None, help="File holding its password."),
    ironic_ca: Path = typer.Option(None, help="CA bundle of Ironic's TLS certificate."),
    listen: str = typer.Option("127.0.0.1:8081", help="HOST:PORT of /metrics, /healthz "
                               "and /readyz (port 0: any)."),
    leader_election: bool = typer.Option(True, help="Hold the Lease "
                                         "racksmith-system/racksmith-controllers."),
    service_account_credentials: bool = typer.Option(
        True, help="Run each controller as its own ServiceAccount (racksmith rbac)."),
    default_image_url: str = typer.Option(None, help="OS image for releases that name none."),
    default_image_sha256: str = typer.Option(None, help="Its sha256."),
    workers: int = typer.Option(DEFAULT_WORKERS, help="Workers per controller (at most)."),
    timings: Path = typer.Option(None, help="YAML file overriding controller waits."),
    clusters_dir: Path = typer.Option(None, help="Reach each managed cluster through its "
                                      "own API (Cluster.status.controlPlaneEndpoint), its "
                                      "client keys kept in this directory."),
    emulated_network: Path = typer.Option(None, help="The virtual datacenter's network.json "
                                          "(racksmith up's DATA/emulator/network.json): "
                                          "reach emulated clusters at their loopback "
                                          "images."),
    log_level: str = typer.Option("info", help="Log level."),
    log_format: str = typer.Option("console", help="console or json."),
) -> None:
    """Run every controller against any Kubernetes API (a real cluster, or racksmith
    apiserver), with leader election across replicas."""
    from racksmith.app.standalone import Controllers, ControllersSettings, image_of

    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit():
        raise typer.BadParameter("must be HOST:PORT", param_hint="--listen")
    try:
        waits = load_timings(timings) if timings is not None else Timings()
        image = image_of(default_image_url, default_image_sha256)
    except TimingsError as exc:
        raise typer.BadParameter(str(exc), param_hint="--timings") from None
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--default-image-sha256") from None
    password = None
    if ironic_password_file is not None:
        try:
            password = ironic_password_file.read_text().strip()
        except OSError as exc:
            raise typer.BadParameter(f"cannot read it: {exc.strerror or exc}",
                                     param_hint="--ironic-password-file") from None
    _logging(log_level, log_format)
    settings = ControllersSettings(
        kubeconfig=kubeconfig, ironic_url=ironic_url, ironic_username=ironic_username,
        ironic_password=password, ironic_ca=ironic_ca, listen=(host, int(port)),
        leader_election=leader_election, service_account_credentials=service_account_credentials,
        default_image=image, workers=workers, timings=waits, clusters_dir=clusters_dir,
        emulated_network=emulated_network)
    asyncio.run(Controllers(settings).run_forever())


@app.command()
def emulator(
    data_dir: Path = typer.Option(..., help="State directory (shared with racksmith up)."),
    count: int = typer.Option(..., help="Number of emulated hosts."),
    ironic_url: str = typer.Option(..., help="Ironic's URL (for the ramdisk agent)."),
    listen_fds: str = typer.Option("", help="Inherited listening sockets, "
                                   "agent=FD,http=FD,bmc=FD (racksmith up passes them)."),
    agent_port: int = typer.Option(0, help="Ramdisk agent port, without --listen-fds "
                                   "(0: any free port)."),
    http_port: int = typer.Option(0, help="Image/ISO HTTP server port, without --listen-fds."),
    bmc_port: int = typer.Option(0, help="BMC (Redfish or fake) port, without --listen-fds."),
    hardware: str = typer.Option("redfish", help="redfish or fake BMCs."),
    log_level: str = typer.Option("info", help="Log level."),
) -> None:
    """Run the virtual datacenter in the foreground (racksmith up starts it)."""
    from racksmith.cli.emulator import parse_fds, run_emulator

    if hardware not in HARDWARE_KINDS:
        raise typer.BadParameter(f"must be one of {', '.join(HARDWARE_KINDS)}",
                                 param_hint="--hardware")
    try:
        fds = parse_fds(listen_fds)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--listen-fds") from None
    _private_files()
    _logging(log_level)
    asyncio.run(run_emulator(data_dir, count, ironic_url, fds=fds,
                             ports={"agent": agent_port, "http": http_port, "bmc": bmc_port},
                             hardware=hardware))


app.command("agent")(agent)


volume_app = typer.Typer(no_args_is_help=True, rich_markup_mode="markdown",
                         help="Volume commands that apply the storage "
                         "design's deletion rules.")
app.add_typer(volume_app, name="volume")


@volume_app.command("delete")
def volume_delete(
    name: str = typer.Argument(..., help="Volume name."),
    kubeconfig: Path = typer.Option(None, help="Kubeconfig (default $KUBECONFIG, else "
                                    "~/.kube/config)."),
) -> None:
    """Delete a Volume unless its PersistentVolume is bound to a claim (then refuse,
    saying which)."""
    from racksmith.cli.volume import delete_volume

    code, message = asyncio.run(delete_volume(name, kubeconfig))
    (console.print if code else print)(message)
    raise typer.Exit(code)


user_app = typer.Typer(no_args_is_help=True, rich_markup_mode="markdown",
                       help="People who use the API server: a token "
                       "and a kubeconfig per user, with a role (docs/access.md).")
app.add_typer(user_app, name="user")


class Role(StrEnum):
    view = "view"
    operator = "operator"
    admin = "admin"


@user_app.command("add")
def user_add(
    name: str = typer.Argument(..., help="User name (lower-case; shown in the audit trail)."),
    role: Role = typer.Option(..., help="view (read-only, no Secrets), operator (view plus "
                              "the day-2 actions) or admin (everything)."),
    data_dir: Path = typer.Option(None, help="State directory."),
) -> None:
    """Add a user: a token in the token file and DATA/users/NAME.kubeconfig (effective at
    once, also on a running server)."""
    from racksmith.apiserver.users import UserError, add_user

    _private_files()
    try:
        path = add_user(data_dir or default_data_dir(), name, role.value)
    except UserError as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(1) from None
    print(f"user {name} added with role {role.value}; kubeconfig: {path}")


@user_app.command("revoke")
def user_revoke(
    name: str = typer.Argument(..., help="User name."),
    data_dir: Path = typer.Option(None, help="State directory."),
) -> None:
    """Revoke a user: its token stops working within a second, its kubeconfig is deleted."""
    from racksmith.apiserver.users import UserError, revoke_user

    try:
        done = revoke_user(data_dir or default_data_dir(), name)
    except UserError as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(1) from None
    if not done:
        console.print(f"[red]error:[/] no user {name!r}")
        raise typer.Exit(1)
    print(f"user {name} revoked")


@user_app.command("list")
def user_list(data_dir: Path = typer.Option(None, help="State directory.")) -> None:
    """List the users and their roles (never their tokens)."""
    from racksmith.apiserver.users import list_users

    accounts = list_users(data_dir or default_data_dir())
    width = max([4, *(len(a.name) for a in accounts)])
    print(f"{'NAME':{width}}  ROLE")
    for account in accounts:
        print(f"{account.name:{width}}  {account.role}")


backup_app = typer.Typer(no_args_is_help=True, rich_markup_mode="markdown",
                         help="Backups of the control plane: the API "
                         "store, Ironic's database, the PKI and the tokens (docs/backup.md).")
app.add_typer(backup_app, name="backup")


def _key(key_file: Path | None) -> bytes | None:
    from racksmith.backup.crypto import KeyFileError, load_key

    if key_file is None:
        return None
    try:
        return load_key(key_file)
    except KeyFileError as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(1) from None


def _steps(label: str) -> Callable[[str], None]:
    """A progress line per step on a terminal (stderr), nothing otherwise."""
    if not console.is_terminal:
        return lambda _step: None
    return lambda step: console.print(f"[bold cyan]•[/] {label}: {step}")


@backup_app.command("create")
def backup_create(
    data_dir: Path = typer.Option(None, help="State directory (default: racksmith up's)."),
    output: Path = typer.Option(None, help="The backup file (default: "
                                "`DATA/backups/racksmith-<time>.tar[.enc]`)."),
    key_file: Path = typer.Option(None, help="Encrypt with this key (a file of at least "
                                  "32 bytes; keep it away from the backups)."),
) -> None:
    """Take a consistent backup while the server runs (or not): prints the file, its
    size and the store's resourceVersion."""
    import datetime as dt

    from racksmith.backup.archive import BackupError, create_backup, default_name

    _private_files()
    key = _key(key_file)
    data = data_dir or default_data_dir()
    out = output or data / "backups" / default_name(dt.datetime.now(dt.UTC), key is not None)
    try:
        info = create_backup(data, out, key=key, progress=_steps("backup"))
    except (BackupError, OSError) as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(1) from None
    print(f"backup: {info.path}")
    print(f"size: {info.size} bytes; sha256: {info.sha256}")
    print(f"resourceVersion: {info.manifest.resource_version} "
          f"({info.manifest.objects} objects){'; encrypted' if key else ''}")


@backup_app.command("verify")
def backup_verify(
    file: Path = typer.Argument(..., help="The backup file."),
    key_file: Path = typer.Option(None, help="The key it was encrypted with."),
) -> None:
    """Check a backup (checksums, decryption, the store's integrity); changes nothing."""
    from racksmith.backup.archive import BackupError, verify_backup
    from racksmith.backup.crypto import CannotDecrypt

    key = _key(key_file)
    try:
        verified = verify_backup(file, key=key, progress=_steps("verify"))
    except (BackupError, CannotDecrypt, OSError) as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(1) from None
    verified.close()
    m = verified.info.manifest
    print(f"ok: {file}: {m.objects} objects at resourceVersion {m.resource_version}, "
          f"{len(m.parts)} parts, made {m.created} by Racksmith {m.racksmith}")


@backup_app.command("decrypt")
def backup_decrypt(
    file: Path = typer.Argument(..., help="An encrypted backup file (.enc)."),
    output: Path = typer.Option(..., help="Where the plain file goes (made 0600; must "
                                "not exist)."),
    key_file: Path = typer.Option(..., help="The key it was encrypted with."),
) -> None:
    """Decrypt a backup, e.g. a cluster's etcd snapshot before `etcdctl snapshot
    restore` (docs/backup.md)."""
    from racksmith.backup.crypto import CannotDecrypt, decrypt_file

    key = _key(key_file)
    assert key is not None
    try:
        fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        console.print(f"[red]error:[/] {output}: {exc.strerror or exc}")
        raise typer.Exit(1) from None
    try:
        with os.fdopen(fd, "wb") as out:
            decrypt_file(file, out, key)
    except (CannotDecrypt, OSError) as exc:
        output.unlink(missing_ok=True)
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(1) from None
    print(f"ok: {output}")


@backup_app.command("list")
def backup_list(
    backup_dir: Path = typer.Option(None, help="Folder of backups (default: DATA/backups)."),
    data_dir: Path = typer.Option(None, help="State directory."),
) -> None:
    """The backups of a folder, oldest first (encrypted ones without their contents)."""
    from racksmith.backup.archive import read_manifest

    folder = backup_dir or (data_dir or default_data_dir()) / "backups"
    files = sorted(p for p in folder.glob("racksmith-*.tar*") if p.is_file()) \
        if folder.is_dir() else []
    rows = [("FILE", "SIZE", "RESOURCEVERSION", "OBJECTS", "CREATED")]
    for path in files:
        m = read_manifest(path)
        rows.append((path.name, str(path.stat().st_size),
                     str(m.resource_version) if m else "(encrypted)",
                     str(m.objects) if m else "", m.created if m else ""))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


@app.command()
def restore(
    file: Path = typer.Argument(..., help="The backup file."),
    data_dir: Path = typer.Option(..., help="The state directory to restore (stop the "
                                  "server on it first)."),
    key_file: Path = typer.Option(None, help="The key it was encrypted with."),
) -> None:
    """Restore a backup into a data dir: verified first, swapped in atomically, the
    previous data kept as `DATA.pre-restore-<time>`."""
    from racksmith.backup.archive import BackupError, restore_backup
    from racksmith.backup.crypto import CannotDecrypt

    _private_files()
    key = _key(key_file)
    try:
        done = restore_backup(file, data_dir, key=key, progress=_steps("restore"))
    except (BackupError, CannotDecrypt, OSError) as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(1) from None
    print(f"restored {file} into {done.data_dir} (resourceVersion "
          f"{done.manifest.resource_version}, {done.manifest.objects} objects)")
    if done.previous is not None:
        print(f"the previous data: {done.previous}")


@app.command()
def audit(
    user: str = typer.Option(None, help="Only this user's requests."),
    object_: str = typer.Option(None, "--object", help="Only requests on KIND/NAME (or KIND), "
                                "e.g. baremetalhost/node-01, secrets."),
    since: str = typer.Option(None, help="Only the last DURATION, e.g. 10m, 2h, 1d."),
    data_dir: Path = typer.Option(None, help="State directory."),
) -> None:
    """Who changed what, and who was refused: the audit trail as a table."""
    import datetime as dt

    from racksmith.apiserver.audit import matches, parse_duration, read_events

    start = None
    if since is not None:
        try:
            start = dt.datetime.now(dt.UTC) - parse_duration(since)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--since") from None
    rows = []
    for ev in read_events(data_dir or default_data_dir()):
        if not matches(ev, user=user, obj=object_, since=start):
            continue
        ref = ev.get("objectRef") or {}
        what = ref.get("resource", "")
        if ref.get("subresource"):
            what += "/" + ref["subresource"]
        if not ref:
            what = ev.get("requestURI", "")
        where = "/".join(p for p in (ref.get("namespace"), ref.get("name")) if p)
        rows.append((str(ev.get("stageTimestamp", ""))[:19].replace("T", " "),
                     str((ev.get("user") or {}).get("username", "")), str(ev.get("verb", "")),
                     what, where, str((ev.get("responseStatus") or {}).get("code", ""))))
    head = ("TIME (UTC)", "USER", "VERB", "RESOURCE", "NAMESPACE/NAME", "CODE")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    for row in [head, *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


@app.command()
def crds() -> None:
    """Print every CRD manifest (a YAML stream) for use on a real cluster."""
    sys.stdout.write(render_yaml(all_crds()))


@app.command()
def rbac(
    in_cluster: bool = typer.Option(False, "--in-cluster", help="The roles inside a managed "
                                    "cluster instead: a ClusterRole and binding per "
                                    "controller that works there, for its client "
                                    "certificate's user racksmith:NAME."),
) -> None:
    """Print the controllers' ServiceAccounts, ClusterRoles and bindings (a
    YAML stream): what each controller may read and write, for a real cluster."""
    if in_cluster:
        from racksmith.app import clusterproxy
        from racksmith.controllers import in_cluster_access
        from racksmith.controlplane.identities import cluster_rbac

        access = in_cluster_access({clusterproxy.IDENTITY: clusterproxy.ACCESS})
        sys.stdout.write(render_yaml(cluster_rbac(
            {name: rules.policy_rules() for name, rules in access.items()})))
        return
    sys.stdout.write(render_yaml(identity_objects(ACCESS)))


@app.command()
def kubeconfig(
    data_dir: Path = typer.Option(None, help="State directory (default $RACKSMITH_DATA_DIR, "
                                  "else ~/.local/share/racksmith)."),
    cluster: str = typer.Option(None, "--cluster", help="NAMESPACE/NAME of a managed "
                                "Cluster: its admin kubeconfig (Secret NAME-kubeconfig) "
                                "instead of the management plane's."),
    management: Path = typer.Option(None, "--kubeconfig", help="With --cluster: the "
                                    "management plane's kubeconfig (default DATA/kubeconfig "
                                    "of the data dir, else $KUBECONFIG)."),
    merge: bool = typer.Option(False, "--merge", help="Add the contexts to your "
                               "kubeconfig instead of printing the file."),
    into: Path = typer.Option(None, help="With --merge: the kubeconfig to merge into (default "
                              "the first file of $KUBECONFIG, else ~/.kube/config)."),
    set_current: bool = typer.Option(True, help="With --merge: make the merged context the "
                                     "current one."),
) -> None:
    """Print the site's kubeconfig (or, with --cluster, a managed cluster's), or
    merge its contexts into yours (kind's habit)."""
    if cluster is not None:
        from racksmith.cli.clusterconfig import ClusterKubeconfigError, cluster_kubeconfig
        from racksmith.cli.clusterconfig import parse_ref as parse_cluster_ref

        try:
            namespace, name = parse_cluster_ref(cluster)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--cluster") from None
        try:
            text = asyncio.run(cluster_kubeconfig(_management_kubeconfig(management, data_dir),
                                                  namespace, name))
        except ClusterKubeconfigError as exc:
            print(f"error: {exc}", file=sys.stderr)
            raise typer.Exit(1) from None
        if not merge:
            sys.stdout.write(text)
            return
        _merge(kubeconfigs.parse_text(text, f"Secret {namespace}/{name}-kubeconfig"),
               into, set_current)
        return
    source = (data_dir or default_data_dir()) / "kubeconfig"
    if not source.is_file():
        raise typer.BadParameter(f"{source} does not exist: start racksmith up first",
                                 param_hint="--data-dir")
    if not merge:
        sys.stdout.write(source.read_text())
        return
    try:
        site = kubeconfigs.load_file(source)
    except kubeconfigs.KubeconfigError as exc:
        raise typer.BadParameter(str(exc), param_hint="--data-dir") from None
    _merge(site, into, set_current)


def _management_kubeconfig(given: Path | None, data_dir: Path | None) -> Path | None:
    """The kubeconfig given, else DATA/kubeconfig of the data dir if there is
    one, else None ($KUBECONFIG or ~/.kube/config)."""
    if given is not None:
        return given
    own = (data_dir or default_data_dir()) / "kubeconfig"
    return own if own.exists() else None


def _merge(source: dict[str, Any], into: Path | None, set_current: bool) -> None:
    target = into or kubeconfigs.default_target()
    try:
        names = kubeconfigs.merge_config(source, target, set_current=set_current)
    except kubeconfigs.KubeconfigError as exc:
        raise typer.BadParameter(str(exc), param_hint="--into") from None
    print(f"merged context(s) {', '.join(names)} into {target}"
          + (f"; current context: {names[0]}" if set_current and names else ""))


@app.command()
def status(
    kubeconfig: Path = typer.Option(None, help="Kubeconfig (default DATA/kubeconfig of the "
                                    "data dir, else $KUBECONFIG)."),
    data_dir: Path = typer.Option(None, help="State directory (for its kubeconfig)."),
    wait: bool = typer.Option(False, "--wait", help="Wait until everything is Ready."),
    timeout: str = typer.Option("15m", help="With --wait: give up after this long."),
) -> None:
    """The site as a tree (cluster → control plane and workers → machine → host) with
    the first problem marked; exit code 0 only when everything is Ready."""
    from racksmith.cli.status import site_status

    try:
        limit = parse_duration(timeout).total_seconds()
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--timeout") from None
    code, lines = asyncio.run(site_status(_management_kubeconfig(kubeconfig, data_dir),
                                          wait=wait, timeout=limit))
    for line in lines:
        print(line)
    raise typer.Exit(code)


@app.command("export")
def export_command(
    namespace: str = typer.Option(None, "--namespace", "-n",
                                  help="Only this namespace's hosts (default: all)."),
    kubeconfig: Path = typer.Option(None, help="Kubeconfig (default DATA/kubeconfig of the "
                                    "data dir, else $KUBECONFIG)."),
    data_dir: Path = typer.Option(None, help="State directory (for its kubeconfig)."),
) -> None:
    """BareMetalHosts as YAML manifests that recreate them at another site, each
    carrying its status in Metal3's baremetalhost.metal3.io/status annotation (the
    recreated host is not inspected again). Secrets are not included."""
    from racksmith.cli.export import export_hosts
    from racksmith.runtime.errors import ApiError

    try:
        hosts = asyncio.run(export_hosts(_management_kubeconfig(kubeconfig, data_dir),
                                         namespace))
    except ApiError as exc:
        print(f"cannot read the hosts: {exc}", file=sys.stderr)
        raise typer.Exit(1) from None
    sys.stdout.write(yaml.safe_dump_all(hosts, sort_keys=False))


@app.command("support-dump")
def support_dump_command(
    output: Path = typer.Option(None, help="The tarball (default: "
                                "`racksmith-support-<time>.tar.gz` here)."),
    data_dir: Path = typer.Option(None, help="State directory."),
    kubeconfig: Path = typer.Option(None, help="Kubeconfig (default DATA/kubeconfig)."),
) -> None:
    """Everything support needs — objects (Secret values redacted), logs, metrics,
    versions, settings, the audit tail — in one tarball; never fails for a missing part."""
    import datetime as dt

    from racksmith.app.supportdump import support_dump

    _private_files()
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    out = output or Path(f"racksmith-support-{stamp}.tar.gz")
    path = asyncio.run(support_dump(data_dir or default_data_dir(), out, kubeconfig))
    print(f"support dump: {path} ({path.stat().st_size} bytes)")


@app.command()
def manifests(
    output: Path = typer.Option(..., help="Folder of the kustomize base (created; its "
                                "files are overwritten)."),
    image: str = typer.Option("ghcr.io/racksmith/racksmith", help="The controllers' image."),
    tag: str = typer.Option(__version__, help="Its tag."),
) -> None:
    """Write a kustomize base that runs the controllers on a real cluster: CRDs,
    namespace, least-privilege identities, the Deployment (kubectl apply -k DIR)."""
    from racksmith.app.deploy import kustomize_base

    output.mkdir(parents=True, exist_ok=True)
    for name, docs in kustomize_base(ACCESS, image=image, tag=tag).items():
        text = render_yaml(docs) if isinstance(docs, list) else yaml.safe_dump(
            docs, sort_keys=False)
        (output / name).write_text(text)
        print(output / name)


@app.command()
def version() -> None:
    """Print the version."""
    print(f"racksmith {__version__}")


def main() -> None:
    app()


if __name__ == "__main__":
    main()

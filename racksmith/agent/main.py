"""The agent's composition root: ``run_agent``, called by ``racksmith agent``.

Owns wiring the parts for one run: the config (``config``), the host
(``RealHost`` or, with ``emulated``, ``EmulatedHost`` — nothing outside
``root`` is touched and no process is started but the storage tasks'
mkfs/blkid/wipefs on files under it and the host's static pods), the API
client (``kube``), the executors' context, the reconcile loop (``loop``), in
emulated mode the emulated kubelet (``kubelet``) with its static pods
(``staticpods``; on a control-plane host its endpoint proxy following the
members, ``_follow_members``; the datacenter's loopback images come from the file
``$RACKSMITH_EMULATED_NETWORK`` names, ``racksmith.loopback``, also how
the node side reaches the cluster's endpoint) and, when
running continuously, the storage loop (``storage``: the node's Volume jobs).
Modes:

- default: loop, storage loop (and kubelet) until SIGTERM/SIGINT or
  ``stop`` is set;
- ``once``: one pass, one kubelet tick; exit code 0 if Ready, else 1;
- ``dry_run``: print each item's planned actions; change nothing, write no
  status; exit code 0 (1 if the LCMMachine does not exist).

Exit code 2: the config cannot be read.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import TextIO

import aiohttp
import structlog

from racksmith import __version__, loopback
from racksmith.agent import kubeadm
from racksmith.agent.config import AgentTiming, ConfigError, load_config
from racksmith.agent.executors import ExecContext, control_plane_host
from racksmith.agent.host import EmulatedHost, Host, HostError, RealHost, Runner, run_process
from racksmith.agent.kube import AgentKube, api_client
from racksmith.agent.kubelet import EmulatedKubelet
from racksmith.agent.loop import Outcome, ReconcileLoop
from racksmith.agent.staticpods import StaticPods
from racksmith.agent.storage import StorageContext, StorageLoop
from racksmith.agent.token import TokenRenewer
from racksmith.clock import Clock, SystemClock, wait_event
from racksmith.loopback import LoopbackMap

__all__ = ["AGENT_VERSION", "run_agent"]

AGENT_VERSION = f"racksmith-agent/{__version__}"

log = structlog.get_logger("racksmith.agent")


async def run_agent(
    config_path: Path,
    *,
    root: Path = Path("/"),
    emulated: bool = False,
    dry_run: bool = False,
    once: bool = False,
    stop: asyncio.Event | None = None,
    clock: Clock | None = None,
    timing: AgentTiming = AgentTiming(),
    runner: Runner = run_process,
    out: TextIO | None = None,
    handle_signals: bool = True,
) -> int:
    """Run the agent; returns the process exit code (see the module docstring).

    ``config_path`` is used as given (not under ``root``). ``stop`` ends a
    long-running agent (SIGTERM/SIGINT set it when ``handle_signals``);
    ``clock``, ``timing`` and ``runner`` are injectable for tests.
    """
    output = out if out is not None else sys.stdout
    try:
        config = load_config(config_path)
    except ConfigError as exc:
        print(f"racksmith agent: {exc}", file=sys.stderr)
        return 2
    host: Host = EmulatedHost(root) if emulated else RealHost(root, runner)
    clock = clock if clock is not None else SystemClock()
    # The CA file exists only while the client is built, beside the config
    # (inside the root when emulated), so no run leaves anything behind.
    client = api_client(config.server, config.token, config.certificate_authority_data,
                        config_path.parent)
    network_file = os.environ.get(loopback.ENV) if emulated else None
    network = LoopbackMap(Path(network_file)) if network_file else None
    # The node side (Node, Lease, pods, Volumes) goes to the cluster's API once
    # kubelet.conf carries the kubelet's credentials (kube's module docstring).
    kube = AgentKube(client, host=host, network=network)
    try:
        kubelet = EmulatedKubelet(host, kube, config.node_name, clock, timing) \
            if emulated else None
        ctx = ExecContext(host=host, node_name=config.node_name, server=config.server,
                          nodes=kube, dry_run=dry_run, network=network)
        static_pods = StaticPods(host) if emulated and not dry_run else None
        if kubelet is not None and not dry_run:
            ctx.on_kubelet_conf = _kubelet_starter(kubelet)
        loop = ReconcileLoop(kube, config.namespace, config.lcm_machine, ctx, clock, timing,
                             agent_version=AGENT_VERSION)
        if dry_run:
            return await _dry_run(loop, output)
        if once:
            result = await loop.run_pass()
            if kubelet is not None:
                await kubelet.sync()
            if static_pods is not None:
                await asyncio.to_thread(static_pods.sync)
            if result.error:
                print(f"racksmith agent: {result.error}", file=sys.stderr)
            return 0 if result.outcome == Outcome.READY else 1
        stop = stop if stop is not None else asyncio.Event()
        with _signals(stop, handle_signals):
            async with kube.storage_class_cache():  # the storage jobs' reads
                log.info("agent started", lcm_machine=f"{config.namespace}/{config.lcm_machine}",
                         node=config.node_name, emulated=emulated, root=str(host.root))
                storage = StorageLoop(kube, StorageContext.for_host(host, runner), config.node_name,
                                      clock, kube.volume_source(config.node_name, clock), timing)
                renewer = TokenRenewer(client, config_path, config.token, clock, timing.token_check)
                changes = kube.lcm_source(config.namespace, config.lcm_machine, clock)
                tasks = [asyncio.create_task(loop.run(stop, changes), name="racksmith-agent-loop"),
                         asyncio.create_task(storage.run(stop), name="racksmith-agent-storage"),
                         asyncio.create_task(renewer.run(stop), name="racksmith-agent-token")]
                if static_pods is not None:
                    tasks.append(asyncio.create_task(
                        static_pods.run(stop, timing.static_pods), name="racksmith-static-pods"))
                if static_pods is not None and network is not None:
                    tasks.append(asyncio.create_task(
                        _follow_members(host, config.node_name, network, clock,
                                        timing.kubelet_status, stop),
                        name="racksmith-endpoint-members"))
                if kubelet is not None:
                    tasks.append(asyncio.create_task(kubelet.run(stop), name="racksmith-kubelet"))
                    tasks.append(asyncio.create_task(
                        kubelet.follow_pods(kube.pod_source(config.node_name, clock), stop),
                        name="racksmith-kubelet-pods"))
                try:
                    await stop.wait()
                finally:
                    for task in tasks:
                        task.cancel()
                    await asyncio.gather(*tasks, return_exceptions=True)
            log.info("agent stopped")
        return 0
    finally:
        await kube.close()
        await client.close()


async def _dry_run(loop: ReconcileLoop, out: TextIO) -> int:
    planned = await loop.plan()
    if planned is None:
        print(f"LCMMachine {loop.namespace}/{loop.name} not found", file=out)
        return 1
    for name, actions in planned:
        for action in actions or ["up to date"]:
            print(f"{name}: {action}", file=out)
    out.flush()
    return 0


async def _follow_members(host: Host, node: str, network: LoopbackMap, clock: Clock,
                          period: float, stop: asyncio.Event) -> None:
    """On an emulated control-plane host, the endpoint's HAProxy follows the
    cluster's members between kubeadm passes (``ControlPlaneHost.refresh_proxy``):
    a member that joins after this host's last pass is a backend within
    ``period`` seconds."""
    while not stop.is_set():
        cluster = kubeadm.read_cluster_context(host)
        if "master" in (cluster.get("roles") or []):
            try:
                if await control_plane_host(cluster, host, node, network).refresh_proxy():
                    log.info("endpoint proxy follows the members", node=node)
            except (HostError, OSError, aiohttp.ClientError, ValueError) as exc:
                log.debug("endpoint members not read", error=type(exc).__name__)
        await wait_event(clock, stop, period)


def _kubelet_starter(kubelet: EmulatedKubelet) -> Callable[[], Awaitable[None]]:
    async def start() -> None:
        try:
            await kubelet.sync()
        except Exception as exc:  # its own loop retries on the next tick
            log.warning("first kubelet sync failed", error=f"{type(exc).__name__}: {exc}")

    return start


@contextlib.contextmanager
def _signals(stop: asyncio.Event, enabled: bool) -> Iterator[None]:
    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []
    if enabled:
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, stop.set)
                installed.append(sig)
    try:
        yield
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)

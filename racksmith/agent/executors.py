"""The state-item executors: what each item type checks on the host and changes.

Owns the per-type semantics of the contracts ("The agent"): ``file``,
``package``, ``service``, ``command`` and ``kubeadm``. Each executor only
*checks* (reads the host) and proposes :class:`Action` s, each with the exact
text of what it would do; :func:`apply` runs them, :func:`check` alone is the
dry run. An up-to-date item proposes nothing, so re-applying on an
unchanged host reports ``changed=False`` for every item.

All host access goes through the ``Host`` seam (``host``); the built-in
``kubectl cordon|uncordon <node>`` (any host) goes through
:class:`NodeControl` (the API). Called by ``loop`` for every item, in order.
A ``file`` item with ``reload: <service>`` reloads that service once the
file holds new content (:func:`_reload`). Raises :class:`ItemError` for bad
parameters and ``HostError`` when the host
refuses; both messages end up in the item's status. An item with
``requiresReboot`` that changed the host touches ``/var/run/reboot-required``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import shlex
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import yaml

from racksmith.agent import kubeadm
from racksmith.agent.clusterplane import ControlPlaneHost
from racksmith.agent.host import REBOOT_REQUIRED, Host, HostError, render_argv
from racksmith.agent.kubelet import internal_ip, netplan_addresses
from racksmith.kinds.cluster import StateItem, StateItemType
from racksmith.loopback import LoopbackMap
from racksmith.planners.release import NETPLAN_PATH

__all__ = [
    "EXECUTORS",
    "NODE_NAME_VAR",
    "Action",
    "ExecContext",
    "ItemError",
    "NodeControl",
    "apply",
    "check",
    "control_plane_host",
]

NODE_NAME_VAR = "$(NODE_NAME)"
DEFAULT_FILE_MODE = 0o644


class ItemError(Exception):
    """A state item cannot be applied as written (bad or missing parameters)."""


class NodeControl(Protocol):
    """The Node operations of the built-in ``kubectl cordon|uncordon``."""

    async def is_unschedulable(self, node: str) -> bool | None:
        """``spec.unschedulable`` of ``node``; None when the Node does not exist."""
        ...

    async def set_unschedulable(self, node: str, value: bool) -> None:
        """Patch ``spec.unschedulable``; may be called repeatedly."""
        ...


@dataclass
class ExecContext:
    """What executors need besides the item.

    ``server``: the API URL written into the emulated kubelet.conf when the
    host has no kubelet credentials (else the cluster's endpoint is).
    ``on_kubelet_conf``: awaited after an emulated kubeadm item wrote
    kubelet.conf (starts the emulated kubelet before the next item).
    ``dry_run``: never evaluate guards that run processes.
    ``network``: an emulated host's loopback images (``racksmith.loopback``);
    with it, a control-plane host's kubeadm item runs the emulated control
    plane (``clusterplane``).
    """

    host: Host
    node_name: str
    server: str = ""
    nodes: NodeControl | None = None
    dry_run: bool = False
    on_kubelet_conf: Callable[[], Awaitable[None]] | None = None
    network: LoopbackMap | None = None


@dataclass(frozen=True)
class Action:
    """One change an executor proposes: its exact description and how to do it."""

    text: str
    run: Callable[[], Awaitable[None]]


Executor = Callable[[Mapping[str, Any], ExecContext], Awaitable[list[Action]]]


async def check(item: StateItem, ctx: ExecContext) -> list[Action]:
    """The actions that would bring the host to ``item``; [] when it is up to date."""
    executor = EXECUTORS.get(item.type)
    if executor is None:
        raise ItemError(f"unknown state item type {item.type!r}")
    return await executor(item.params, ctx)


async def apply(item: StateItem, ctx: ExecContext) -> bool:
    """Check, then do every proposed action in order; returns whether anything changed.

    An item with ``requiresReboot`` that changed the host touches
    ``/var/run/reboot-required`` (after its actions all succeeded).
    """
    actions = await check(item, ctx)
    for action in actions:
        await action.run()
    if actions and item.requires_reboot:
        ctx.host.touch(REBOOT_REQUIRED)
    return bool(actions)


# --- file ------------------------------------------------------------------------------


def _mode(value: Any) -> int:
    if value is None:
        return DEFAULT_FILE_MODE
    if isinstance(value, bool):
        raise ItemError(f"params.mode {value!r} is not a file mode")
    if isinstance(value, int):
        mode = value
    else:
        try:
            mode = int(str(value), 8)
        except ValueError:
            raise ItemError(f"params.mode {value!r} is not an octal file mode") from None
    if not 0 <= mode <= 0o7777:
        raise ItemError(f"params.mode {value!r} is out of range")
    return mode


def _owner_differs(wanted: str, actual: str | None) -> bool:
    if actual is None:
        return False  # ownership not tracked on this host
    want_user, _, want_group = wanted.partition(":")
    user, _, group = actual.partition(":")
    return want_user != user or (bool(want_group) and want_group != group)


async def _file(params: Mapping[str, Any], ctx: ExecContext) -> list[Action]:
    path = _required_str(params, "path")
    if "content" not in params or not isinstance(params["content"], str):
        raise ItemError("params.content must be a string")
    content = params["content"].encode()
    mode = _mode(params.get("mode"))
    owner = params.get("owner")
    host = ctx.host
    host.resolve(path)  # rejects relative or escaping paths before anything else
    current = host.read_file(path)
    actions: list[Action] = []
    if current != content:

        async def write() -> None:
            host.write_file(path, content, mode)

        actions.append(Action(f"write {path} ({len(content)} bytes, mode {mode:04o})", write))
    elif host.file_mode(path) != mode:

        async def chmod() -> None:
            host.set_mode(path, mode)

        actions.append(Action(f"chmod {mode:04o} {path}", chmod))
    if owner:
        owner_s = str(owner)
        if current != content or _owner_differs(owner_s, host.file_owner(path)):

            async def chown() -> None:
                host.set_owner(path, owner_s)

            if not host.emulated:
                actions.append(Action(f"chown {owner_s} {path}", chown))
    reload = params.get("reload")
    if reload is not None:
        actions.extend(_reload(host, _required_str(params, "reload"), path, content,
                               changed=current != content))
    return actions


RELOADED_DIR = "/var/lib/racksmith/reloaded"


def _reload(host: Host, service: str, path: str, content: bytes, *, changed: bool
            ) -> list[Action]:
    """A file item's ``reload``: ``systemctl reload-or-restart <service>``
    once the file holds new content. Level-based: after the reload the
    agent records the content's sha256 under ``RELOADED_DIR`` (one marker
    per file), so an agent killed between the write and the reload reloads
    on its next pass, and an unchanged file is never reloaded again."""
    digest = hashlib.sha256(content).hexdigest()
    marker = f"{RELOADED_DIR}/{hashlib.sha256(path.encode()).hexdigest()[:32]}"
    if not changed and host.read_file(marker) == digest.encode():
        return []

    async def reload() -> None:
        await host.change_service(service, "reload-or-restart")
        host.write_file(marker, digest.encode(), 0o600)

    return [Action(host.service_action(service, "reload-or-restart"), reload)]


# --- package ---------------------------------------------------------------------------


async def _package(params: Mapping[str, Any], ctx: ExecContext) -> list[Action]:
    name = _required_str(params, "name")
    version = params.get("version")
    version_s = str(version) if version not in (None, "") else None
    installed = await ctx.host.package_version(name)
    if installed is not None and (version_s is None or installed == version_s):
        return []

    async def install() -> None:
        await ctx.host.install_package(name, version_s)

    return [Action(ctx.host.install_package_argv(name, version_s), install)]


# --- service ---------------------------------------------------------------------------


async def _service(params: Mapping[str, Any], ctx: ExecContext) -> list[Action]:
    name = _required_str(params, "name")
    enabled = _bool(params, "enabled", True)
    running = _bool(params, "running", True)
    state = await ctx.host.service_state(name)
    verbs: list[str] = []
    if state.enabled != enabled:
        verbs.append("enable" if enabled else "disable")
    if state.running != running:
        verbs.append("start" if running else "stop")
    return [_service_action(ctx.host, name, verb) for verb in verbs]


def _service_action(host: Host, name: str, verb: str) -> Action:
    async def change() -> None:
        await host.change_service(name, verb)

    return Action(host.service_action(name, verb), change)


# --- command ---------------------------------------------------------------------------


def _argv(value: Any, node_name: str, field: str) -> list[str]:
    """``value`` as argv with ``$(NODE_NAME)`` replaced; a string runs through ``sh -c``."""
    if isinstance(value, str) and value.strip():
        return ["sh", "-c", value.replace(NODE_NAME_VAR, node_name)]
    if isinstance(value, list) and value and all(isinstance(a, str) for a in value):
        return [a.replace(NODE_NAME_VAR, node_name) for a in value]
    raise ItemError(f"params.{field} must be a non-empty argv list or command string")


def _builtin_kubectl(value: Any, node_name: str) -> tuple[str, str] | None:
    """``(verb, node)`` when the command is ``kubectl cordon|uncordon <node>``."""
    if isinstance(value, str):
        try:
            tokens = shlex.split(value.replace(NODE_NAME_VAR, node_name))
        except ValueError:
            return None
    elif isinstance(value, list) and all(isinstance(a, str) for a in value):
        tokens = [a.replace(NODE_NAME_VAR, node_name) for a in value]
    else:
        return None
    if len(tokens) == 3 and tokens[0] == "kubectl" and tokens[1] in ("cordon", "uncordon"):
        return tokens[1], tokens[2]
    return None


async def _command(params: Mapping[str, Any], ctx: ExecContext) -> list[Action]:
    host = ctx.host
    argv = _argv(params.get("command"), ctx.node_name, "command")
    creates = params.get("creates")
    if creates is not None:
        if not isinstance(creates, str):
            raise ItemError("params.creates must be a path")
        creates = creates.replace(NODE_NAME_VAR, ctx.node_name)
        if host.exists(creates):
            return []
    unless = params.get("unless")
    unless_argv = _argv(unless, ctx.node_name, "unless") if unless is not None else None
    # ``kubectl cordon|uncordon <node>`` is done through the agent's own API
    # access on every host (a real host need not hold a kubeconfig), and its
    # ``creates`` marks it done, so it runs once per host life and never
    # undoes a maintenance cordon on a later pass.
    builtin = _builtin_kubectl(params["command"], ctx.node_name)
    if builtin is not None:
        return await _kubectl_builtin(*builtin, ctx, creates)

    async def run() -> None:
        result = await host.run_command(argv)
        if result.returncode != 0:
            raise HostError(f"{render_argv(argv)}: {result.describe()}")
        if creates is not None and host.emulated:
            host.touch(creates)

    text = host.command_action(argv)
    if creates is not None and host.emulated:
        text += f", then create {creates}"
    if unless_argv is not None:
        if ctx.dry_run and not host.emulated:
            # A dry run starts no process, not even a guard.
            guarded = unless_argv

            async def guarded_run() -> None:
                if not await host.guard_passes(guarded, argv):
                    await run()

            return [Action(f"unless {render_argv(guarded)} exits 0: {text}", guarded_run)]
        if await host.guard_passes(unless_argv, argv):
            return []
    return [Action(text, run)]


async def _kubectl_builtin(verb: str, node: str, ctx: ExecContext,
                           creates: str | None = None) -> list[Action]:
    """The built-in ``kubectl cordon|uncordon <node>``: patch the Node through
    the API when it differs, then touch ``creates`` (if given) so the item
    runs once per host life, like any other guarded command."""
    if ctx.nodes is None:
        raise ItemError(f"kubectl {verb} needs the API, which this agent has not")
    nodes = ctx.nodes
    host = ctx.host
    want = verb == "cordon"
    text = f"patch Node {node} spec.unschedulable={str(want).lower()} (kubectl {verb})"
    current = await nodes.is_unschedulable(node)
    if current is None and not ctx.dry_run:
        raise HostError(f"kubectl {verb} {node}: Node {node} is not registered yet")
    actions: list[Action] = []
    if current != want:

        async def patch() -> None:
            await nodes.set_unschedulable(node, want)

        actions.append(Action(text, patch))
    if creates is not None:
        guard = creates

        async def touch() -> None:
            host.touch(guard)

        actions.append(Action(f"create {guard}", touch))
    return actions


# --- kubeadm ---------------------------------------------------------------------------


async def _kubeadm(params: Mapping[str, Any], ctx: ExecContext) -> list[Action]:
    host = ctx.host
    phase = params.get("phase")
    if phase not in kubeadm.KUBEADM_PHASES:
        raise ItemError(f"params.phase must be one of {', '.join(kubeadm.KUBEADM_PHASES)}")
    cluster = params.get("cluster")
    if not isinstance(cluster, dict):
        raise ItemError("params.cluster is missing (the planner fills it in)")
    configuration = params.get("configuration")
    if configuration is not None and not isinstance(configuration, dict):
        raise ItemError("params.configuration must be a mapping")
    control_plane = "master" in (cluster.get("roles") or [])
    if control_plane and cluster.get("initNode") == ctx.node_name:
        phase = "init"  # Cluster API's first control-plane machine initialises the cluster
    path = kubeadm.config_path(phase)
    try:
        # what the user data gave for joining (bootstrap token, CA pin,
        # certificate key), under what the release's configuration says
        joining = kubeadm.read_join(host, phase)
        if joining:
            configuration = kubeadm.merged(joining, dict(configuration or {}))
        content = kubeadm.render_config(phase, cluster, ctx.node_name, configuration).encode()
    except ValueError as exc:
        raise ItemError(str(exc)) from None
    actions: list[Action] = []
    if host.read_file(path) != content or host.file_mode(path) != 0o600:

        async def write_config() -> None:
            host.write_file(path, content, 0o600)

        actions.append(Action(f"write {path} ({len(content)} bytes, mode 0600)", write_config))
    if control_plane and host.emulated and ctx.network is not None:
        actions.extend(await _emulated_control_plane(cluster, ctx, ctx.network))
    if host.emulated:
        actions.extend(_emulated_kubelet_conf(cluster, ctx))
        return actions
    if host.exists(kubeadm.KUBELET_CONF):
        return actions
    argv = ["kubeadm", phase, "--config", str(host.resolve(path))]

    async def run_kubeadm() -> None:
        result = await host.run_command(argv)
        if result.returncode != 0:
            raise HostError(f"{render_argv(argv)}: {result.describe()}")

    actions.append(Action(host.command_action(argv), run_kubeadm))
    return actions


def _emulated_kubelet_conf(cluster: Mapping[str, Any], ctx: ExecContext) -> list[Action]:
    """The emulated kubeadm's kubelet.conf (``kubeadm.render_kubelet_conf``):
    written when missing; rewritten when the host has the kubelet's
    credentials and the file is not the one they make (an older one without
    credentials, or another endpoint); else left alone."""
    host = ctx.host
    credentials = kubeadm.has_kubelet_credentials(host)
    current = host.read_file(kubeadm.KUBELET_CONF)
    if current is not None and not credentials:
        return []
    conf = kubeadm.render_kubelet_conf(cluster, ctx.node_name, ctx.server,
                                       credentials=credentials).encode()
    if current == conf:
        return []

    async def write_kubelet_conf() -> None:
        host.write_file(kubeadm.KUBELET_CONF, conf, 0o600)
        if ctx.on_kubelet_conf is not None:
            await ctx.on_kubelet_conf()

    verb = "write" if current is None else "rewrite"
    what = " with the node's client certificate" if credentials else ""
    return [Action(
        f"{verb} {kubeadm.KUBELET_CONF}{what} ({len(conf)} bytes, mode 0600), "
        f"then {'start' if current is None else 'sync'} the emulated kubelet",
        write_kubelet_conf,
    )]


def control_plane_host(cluster: Mapping[str, Any], host: Host, node: str,
                       network: LoopbackMap) -> ControlPlaneHost:
    """This control-plane host's share of the emulated control plane, from the
    kubeadm item's cluster context and the host's netplan (its address in a
    control-plane network). Raises ``HostError`` when the host has none."""
    raw = host.read_file(NETPLAN_PATH)
    try:
        found = netplan_addresses(yaml.safe_load(raw)) if raw else []
    except yaml.YAMLError:
        found = []
    cidrs = cluster.get("controlPlaneCIDRs")
    address = internal_ip(found, cidrs if isinstance(cidrs, list) else [])
    if address is None:
        raise HostError(f"{NETPLAN_PATH} gives this host no control-plane address")
    return ControlPlaneHost(host, node, cluster, address, network)


async def _emulated_control_plane(cluster: Mapping[str, Any], ctx: ExecContext,
                                  network: LoopbackMap) -> list[Action]:
    """The emulated kubeadm's control-plane steps on this host (``clusterplane``)."""
    plane = control_plane_host(cluster, ctx.host, ctx.node_name, network)
    now = dt.datetime.now(dt.UTC)
    todo = await plane.plan(now)
    if not todo:
        return []

    async def run() -> None:
        await plane.apply(dt.datetime.now(dt.UTC))

    return [Action("emulated kubeadm control plane: " + "; ".join(todo), run)]


#: Item type → executor; a type missing here fails the item (never skipped).
EXECUTORS: dict[StateItemType, Executor] = {
    StateItemType.FILE: _file,
    StateItemType.PACKAGE: _package,
    StateItemType.SERVICE: _service,
    StateItemType.COMMAND: _command,
    StateItemType.KUBEADM: _kubeadm,
}


def _required_str(params: Mapping[str, Any], key: str) -> str:
    value = params.get(key)
    if not isinstance(value, str) or not value:
        raise ItemError(f"params.{key} must be a non-empty string")
    return value


def _bool(params: Mapping[str, Any], key: str, default: bool) -> bool:
    value = params.get(key, default)
    if not isinstance(value, bool):
        raise ItemError(f"params.{key} must be true or false")
    return value


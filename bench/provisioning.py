"""Benchmark of bare-metal provisioning: Racksmith against a plain script driving Ironic.

Owns: the second half of ``make bench``. In one run, for each scenario, it
measures Racksmith (the composition root of ``racksmith up``, started
in-process so the Ironic client's call counters can be read) and then a
plain asyncio script that drives a *fresh* Ironic (same settings, same
microversion) directly for the same number of hosts:

* **fake** (default 200 hosts): ``fake://`` BMCs, Ironic's fake-hardware
  driver (every step instant): the cost of the control loop itself.
* **redfish** (default 50 hosts): the virtual datacenter of
  ``--emulate-hosts`` (sushy-tools Redfish BMCs, the emulated ramdisk agent:
  metadata cleaning, images written to disk files).

Two phases each: *apply → available* (Racksmith: Secrets + BareMetalHosts
POSTed over HTTPS, until every host's ``status.provisioning.state`` is
``available``; direct: create node + port, manage, inspect, provide, until
every node is ``available``) and *image → provisioned* (Racksmith:
``spec.image`` merge-patched in; direct: ``instance_info`` patched and
``active`` requested, until every node is ``active``). Reported: wall times
and the ratio Racksmith ÷ direct (target ≤ 1.3, shown, not enforced), Ironic
API calls per host, CPU seconds of the benchmark process (Racksmith's API
server + controllers, or the direct script), of Ironic and of the emulator,
and of everything else on the machine (other load spoils a run).

Only 127.0.0.1 is contacted. Every phase has a timeout; every process a
scenario starts (Ironic's process group, the emulator, sushy-tools) carries
the scenario's temporary directory on its command line and is killed by it
at the end, whatever happened. Exit status 1 if a phase failed or timed out.

    .venv/bin/python bench/provisioning.py [--quick] [--fake-hosts N] [--redfish-hosts N]
        [--skip-fake] [--skip-redfish] [--direct-poll S] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import datetime as dt
import json
import logging
import os
import platform
import resource
import shutil
import signal
import ssl
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import ironic_log  # the sibling: Ironic's API requests by kind, from its log
import orjson

from racksmith.app.logs import configure_logging
from racksmith.app.runner import Racksmith
from racksmith.app.services import (
    EmulatorService,
    IronicProcess,
    StaticHTTP,
    ironic_settings,
)
from racksmith.app.settings import Settings
from racksmith.ironic.client import API_VERSION, API_VERSION_HEADER

Obj = dict[str, Any]
TARGET_RATIO = 1.3
BMH_PATH = "/apis/metal3.io/v1alpha1/namespaces/default/baremetalhosts"
SECRET_PATH = "/api/v1/namespaces/default/secrets"
IRONIC_FAILED = {"error", "deploy failed", "clean failed", "inspect failed", "adopt failed",
                 "enroll"}
"""Ironic states that end a direct-script wait with an error (``enroll``: verify failed)."""
FAKE_IMAGE = {"url": "http://127.0.0.1:9/images/bench-os.qcow2", "checksum": "ab" * 32,
              "checksumType": "sha256"}
"""Fake deploys do not download: any URL does."""


@dataclass
class Params:
    fake_hosts: int
    redfish_hosts: int
    skip_fake: bool
    skip_redfish: bool
    direct_poll: float
    concurrency: int
    workers: int
    phase_timeout: float
    quick: bool
    only: str = ""
    """"racksmith" or "direct": run one side only (investigations; no ratio)."""
    keep_logs: Path | None = None
    """Where each side's Ironic log is copied to at its end (investigations)."""


# --------------------------------------------------------------------------- CPU accounting


def _clk() -> int:
    return os.sysconf("SC_CLK_TCK")


def _processes() -> list[tuple[int, int, str, float]]:
    """(pid, session id, command line, CPU seconds incl. reaped children) of
    every process but this one."""
    out = []
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            rest = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            ticks = sum(int(x) for x in rest[11:15])  # utime stime cutime cstime
            out.append((int(entry.name), int(rest[3]), cmdline, ticks / _clk()))
        except (OSError, IndexError, ValueError):
            continue
    return out


def _scenario_processes(needle: str) -> list[tuple[int, int, str, float]]:
    """Processes of a scenario: every session (Ironic's, the emulator's, ...)
    one of whose processes names ``needle`` on its command line. Sessions, as
    Ironic's forked worker renames itself and no longer names its config."""
    procs = _processes()
    mine = os.getsid(0)
    sessions = {sid for _, sid, cmd, _ in procs if needle in cmd and sid != mine}
    return [p for p in procs if p[1] in sessions or (needle in p[2] and p[1] != mine)]


def processes_cpu(needle: str) -> dict[str, float]:
    """CPU seconds of the scenario's processes, split into ``ironic`` and
    ``emulator`` (the Redfish emulator, sushy-tools, the agent)."""
    procs = _scenario_processes(needle)
    ironic_sessions = {sid for _, sid, cmd, _ in procs
                       if cmd.startswith("ironic") or cmd.split(" ", 1)[0].endswith("/bin/ironic")}
    out = {"ironic": 0.0, "emulator": 0.0}
    for _, sid, _, cpu in procs:
        out["ironic" if sid in ironic_sessions else "emulator"] += cpu
    return out


def self_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def machine_busy_seconds() -> float:
    """CPU seconds all processes on the machine have used so far (``/proc/stat``)."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return 0.0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / _clk()


class Meter:
    """Wall time and CPU seconds of one phase: this process, the scenario's
    Ironic and emulator processes, and everything else on the machine."""

    def __init__(self, needle: str) -> None:
        self.needle = needle

    def __enter__(self) -> Meter:
        self.started = dt.datetime.now()  # local time, as Ironic's log
        self.t0 = time.perf_counter()
        self.s0 = self_cpu()
        self.p0 = processes_cpu(self.needle)
        self.m0 = machine_busy_seconds()
        return self

    def __exit__(self, *exc: object) -> None:
        self.ended = dt.datetime.now()
        self.seconds = time.perf_counter() - self.t0
        self.self_cpu = self_cpu() - self.s0
        p1 = processes_cpu(self.needle)
        self.ironic_cpu = max(0.0, p1["ironic"] - self.p0["ironic"])
        self.emulator_cpu = max(0.0, p1["emulator"] - self.p0["emulator"])
        self.other_cpu = max(0.0, machine_busy_seconds() - self.m0 - self.self_cpu
                             - self.ironic_cpu - self.emulator_cpu)

    def as_dict(self) -> Obj:
        return {"seconds": round(self.seconds, 2), "cpu_self_s": round(self.self_cpu, 2),
                "cpu_ironic_s": round(self.ironic_cpu, 2),
                "cpu_emulator_s": round(self.emulator_cpu, 2),
                "cpu_other_s": round(self.other_cpu, 2)}


def reap(needle: str) -> int:
    """SIGKILL every process of the scenario (see ``_scenario_processes``); how many."""
    killed = 0
    for pid, _, _, _ in _scenario_processes(needle):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
            killed += 1
    return killed


def quantile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, int(q * len(ordered) + 0.5) - 1))]


# --------------------------------------------------------------------------- hosts


@dataclass(frozen=True)
class BenchHost:
    """One host as both sides see it."""

    name: str
    address: str
    """BareMetalHost ``spec.bmc.address``."""
    mac: str
    username: str
    password: str
    driver: str
    interfaces: dict[str, str]
    driver_info: dict[str, Any]
    """Ironic driver_info including credentials (the direct script's node body)."""


def fake_hosts(n: int) -> list[BenchHost]:
    out = []
    for i in range(n):
        address = f"fake://bench/h{i:04d}"
        out.append(BenchHost(
            name=f"host-{i:04d}", address=address, mac=f"52:54:00:be:{i // 256:02x}:{i % 256:02x}",
            username="admin", password="bench-password", driver="fake-hardware",
            interfaces={k: "fake" for k in ("boot", "deploy", "inspect", "management",
                                            "power")},
            driver_info={"fake_address": address}))
    return out


def redfish_hosts(emulator: EmulatorService) -> list[BenchHost]:
    dc = emulator.dc
    out = []
    for h in dc.hosts:
        address = dc.bmc_address(h)
        out.append(BenchHost(
            name=h.name, address=address, mac=h.boot_mac, username=h.bmc_username,
            password=dc.password(h), driver="redfish",
            interfaces={"boot": "redfish-virtual-media", "deploy": "direct",
                        "inspect": "redfish", "management": "redfish", "power": "redfish"},
            driver_info={"redfish_address": dc.bmc_url,
                         "redfish_system_id": f"/redfish/v1/Systems/{h.uuid}",
                         "deploy_iso": dc.deploy_iso_url,
                         "redfish_username": h.bmc_username,
                         "redfish_password": dc.password(h)}))
    return out


def host_manifests(h: BenchHost) -> tuple[Obj, Obj]:
    secret = {"apiVersion": "v1", "kind": "Secret",
              "metadata": {"name": f"{h.name}-bmc-secret", "namespace": "default"},
              "type": "Opaque",
              "data": {"username": base64.b64encode(h.username.encode()).decode(),
                       "password": base64.b64encode(h.password.encode()).decode()}}
    bmh = {"apiVersion": "metal3.io/v1alpha1", "kind": "BareMetalHost",
           "metadata": {"name": h.name, "namespace": "default"},
           "spec": {"bmc": {"address": h.address, "credentialsName": f"{h.name}-bmc-secret"},
                    "bootMACAddress": h.mac, "bootMode": "UEFI", "online": False}}
    return secret, bmh


async def gather_limited(n: int, items: list[Any],
                         fn: Callable[[Any], Awaitable[None]]) -> None:
    """``fn(item)`` for every item, at most ``n`` at a time; the first error wins."""
    queue = iter(items)

    async def worker() -> None:
        for item in queue:
            await fn(item)

    await asyncio.gather(*(worker() for _ in range(max(1, min(n, len(items))))))


# --------------------------------------------------------------------------- Racksmith side


class HostWatch:
    """Every BareMetalHost's state through a watch (re-listing if the stream
    ends); when each host first reached each state, and host errors."""

    def __init__(self, session: aiohttp.ClientSession) -> None:
        self.session = session
        self.states: dict[str, str | None] = {}
        self.errors: dict[str, str] = {}
        self.reached: dict[str, dict[str, float]] = {}
        self.changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def _see(self, obj: Obj) -> None:
        name = obj["metadata"]["name"]
        status = obj.get("status") or {}
        state = (status.get("provisioning") or {}).get("state")
        self.states[name] = state
        if state is not None:
            self.reached.setdefault(state, {}).setdefault(name, time.perf_counter())
        if status.get("errorType"):
            self.errors[name] = f"{status['errorType']}: {status.get('errorMessage')}"
        else:
            self.errors.pop(name, None)
        self.changed.set()

    async def start(self) -> None:
        rv = await self._list()
        self._task = asyncio.create_task(self._run(rv))

    async def _list(self) -> str:
        async with self.session.get(BMH_PATH) as r:
            body = orjson.loads(await r.read())
        for obj in body.get("items", []):
            self._see(obj)
        return str(body["metadata"]["resourceVersion"])

    async def _run(self, rv: str) -> None:
        while True:
            try:
                async with self.session.get(
                        BMH_PATH, params={"watch": "true", "resourceVersion": rv,
                                          "allowWatchBookmarks": "true"},
                        timeout=aiohttp.ClientTimeout(total=None, sock_read=None)) as r:
                    async for line in r.content:
                        if not line.strip():
                            continue
                        ev = orjson.loads(line)
                        if ev.get("type") == "ERROR":
                            break
                        meta = ev["object"]["metadata"]
                        rv = str(meta.get("resourceVersion", rv))
                        if ev.get("type") in ("ADDED", "MODIFIED"):
                            self._see(ev["object"])
            except (aiohttp.ClientError, ValueError):
                await asyncio.sleep(0.5)
            rv = await self._list()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    async def wait_all(self, names: list[str], state: str, timeout: float) -> None:
        deadline = time.perf_counter() + timeout
        while not all(n in self.reached.get(state, {}) for n in names):
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                behind = Counter(str(self.states.get(n)) for n in names
                                 if n not in self.reached.get(state, {}))
                raise TimeoutError(f"not all hosts {state} in {timeout:.0f}s: {dict(behind)}; "
                                   f"errors: {dict(list(self.errors.items())[:5])}")
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), min(remaining, 5.0))


def kube_session(rs: Racksmith, pool: int) -> aiohttp.ClientSession:
    assert rs.server is not None and rs.server.ca_pem is not None
    ctx = ssl.create_default_context(cadata=rs.server.ca_pem.decode())
    return aiohttp.ClientSession(
        base_url=rs.server.url,
        connector=aiohttp.TCPConnector(ssl=ctx, limit=pool + 4),
        headers={"Authorization": f"Bearer {rs.server.token}",
                 "User-Agent": "racksmith-bench-provisioning"},
        timeout=aiohttp.ClientTimeout(total=60))


async def _checked(resp: aiohttp.ClientResponse, ok: tuple[int, ...]) -> None:
    body = await resp.read()
    if resp.status not in ok:
        raise RuntimeError(f"{resp.method} {resp.url.path}: HTTP {resp.status} {body[:300]!r}")


def ironic_counts(rs: Racksmith) -> tuple[int, Counter[str]]:
    assert rs.provisioner is not None
    client = rs.provisioner.client
    return client.total_calls, Counter(client.calls)


AfterHook = Callable[[Racksmith, Obj], Awaitable[None]]


async def run_racksmith(kind: str, n: int, data_dir: Path, needle: str, params: Params,
                        out: Obj, after: AfterHook | None = None) -> None:
    """Racksmith in-process: apply N hosts, wait available; set images, wait
    provisioned; then ``after`` (another benchmark's extra measurements)."""
    settings = Settings(data_dir=data_dir, port=0, ironic_port=0,
                        emulate_hosts=n if kind == "redfish" else 0,
                        controller_workers=params.workers)
    rs = Racksmith(settings)
    try:
        print(f"  [{kind}] Racksmith: starting (API server, Ironic"
              f"{', virtual datacenter' if kind == 'redfish' else ''}, controllers) ...",
              flush=True)
        await rs.start()
        if kind == "redfish":
            assert rs.emulator is not None
            hosts = redfish_hosts(rs.emulator)
            root = data_dir / "emulator" / "http" / "images"
            digest = (root / "sample-os.img.sha256sum").read_text().split()[0]
            image = {"url": rs.emulator.dc.image_url("sample-os.img"), "checksum": digest,
                     "checksumType": "sha256"}
        else:
            hosts = fake_hosts(n)
            image = dict(FAKE_IMAGE)
        names = [h.name for h in hosts]
        assert rs.ironic is not None and rs.ironic.pid is not None
        async with kube_session(rs, params.concurrency) as session:
            watch = HostWatch(session)
            await watch.start()
            try:
                # Phase 1: apply -> available.
                calls0, per0 = ironic_counts(rs)
                print(f"  [{kind}] Racksmith: applying {n} hosts, waiting for available ...",
                      flush=True)
                with Meter(needle) as m1:
                    t0 = time.perf_counter()

                    async def apply(h: BenchHost) -> None:
                        secret, bmh = host_manifests(h)
                        async with session.post(SECRET_PATH, json=secret) as r:
                            await _checked(r, (201,))
                        async with session.post(BMH_PATH, json=bmh) as r:
                            await _checked(r, (201,))

                    await gather_limited(params.concurrency, hosts, apply)
                    applied = time.perf_counter() - t0
                    await watch.wait_all(names, "available", params.phase_timeout)
                calls1, per1 = ironic_counts(rs)
                out["available"] = {
                    **m1.as_dict(), "apply_seconds": round(applied, 2),
                    **_per_host_times(watch, names, "available", t0),
                    **_calls(calls1 - calls0, per1 - per0, n)}
                print(f"  [{kind}] Racksmith: all available in {m1.seconds:.1f} s", flush=True)

                # Phase 2: image -> provisioned. spec.online matches the power state
                # Ironic leaves a deployed node in (fake deploy: unchanged, off; direct
                # deploy: on), so Racksmith makes no power change the script does not.
                online = kind == "redfish"
                print(f"  [{kind}] Racksmith: setting spec.image, waiting for provisioned ...",
                      flush=True)
                with Meter(needle) as m2:
                    t0 = time.perf_counter()

                    async def provision(h: BenchHost) -> None:
                        async with session.patch(
                                f"{BMH_PATH}/{h.name}",
                                data=orjson.dumps({"spec": {"image": image, "online": online}}),
                                headers={"Content-Type": "application/merge-patch+json"}) as r:
                            await _checked(r, (200,))

                    await gather_limited(params.concurrency, hosts, provision)
                    await watch.wait_all(names, "provisioned", params.phase_timeout)
                calls2, per2 = ironic_counts(rs)
                out["provisioned"] = {
                    **m2.as_dict(), **_per_host_times(watch, names, "provisioned", t0),
                    **_calls(calls2 - calls1, per2 - per1, n)}
                print(f"  [{kind}] Racksmith: all provisioned in {m2.seconds:.1f} s", flush=True)
                out["ironic_requests"] = ironic_log.read(
                    data_dir / "ironic" / "ironic.log",
                    [("available", m1.started, m1.ended), ("provisioned", m2.started, m2.ended)])
                out["host_errors_seen"] = len(watch.errors)
                if after is not None:
                    await after(rs, out)
            finally:
                await watch.stop()
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(rs.stop(), 90)
        reap(str(data_dir))
        keep_log(params, data_dir, f"{kind}-racksmith")


def keep_log(params: Params, data_dir: Path, name: str) -> None:
    """Copy the scenario side's Ironic log to ``--keep-ironic-logs`` (if given)."""
    log = data_dir / "ironic" / "ironic.log"
    if params.keep_logs is not None and log.exists():
        params.keep_logs.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(log, params.keep_logs / f"{name}.log")


def _per_host_times(watch: HostWatch, names: list[str], state: str, t0: float) -> Obj:
    times = [watch.reached[state][n] - t0 for n in names if n in watch.reached.get(state, {})]
    return {"per_host_p50_s": round(quantile(times, 0.5), 2),
            "per_host_max_s": round(max(times, default=0.0), 2)}


def _calls(total: int, per_host: Counter[str], n: int) -> Obj:
    counts = list(per_host.values())
    return {"ironic_calls": total, "ironic_calls_per_host": round(total / n, 2),
            "ironic_calls_per_host_max": max(counts, default=0)}


# --------------------------------------------------------------------------- direct script


class DirectScript:
    """A plain asyncio script driving Ironic's REST API: one coroutine per node
    doing create → port → manage → inspect → provide (→ deploy), and one
    poller listing all nodes every ``poll`` seconds that wakes the waiters.
    Locked nodes (409) and busy conductors (503) are retried after 0.5 s;
    every HTTP request is counted."""

    def __init__(self, url: str, poll: float, concurrency: int) -> None:
        self.url = url
        self.poll = poll
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=concurrency),
            headers={API_VERSION_HEADER: API_VERSION, "Accept": "application/json"},
            timeout=aiohttp.ClientTimeout(total=60))
        self.calls = 0
        self.retries = 0
        self.poll_errors: Counter[str] = Counter()
        self.nodes: dict[str, Obj] = {}
        self._listed_at = 0.0
        """perf_counter() when the latest listing in ``nodes`` was *requested*."""
        self._listed = asyncio.Event()
        self._poller: asyncio.Task[None] | None = None

    async def close(self) -> None:
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._poller
        await self.session.close()

    async def request(self, method: str, path: str, body: Any = None, *,
                      exists_ok: bool = False, done_ok: bool = False) -> Any:
        """One call, retried while the node is locked, the conductor busy or
        the request timed out (a saturated Ironic at 300+ nodes). A request
        retried after a timeout may have been carried out: ``exists_ok``
        turns the 409 "already exists" of a create into None (the caller
        reads what exists), ``done_ok`` the 400 refusing a provision action
        for the state the first attempt already moved the node to (the
        caller waits for the state it wanted)."""
        timed_out = False
        for attempt in range(120):
            self.calls += 1
            try:
                async with self.session.request(method, f"{self.url}{path}", json=body) as r:
                    text = await r.text()
                    status = r.status
            except (TimeoutError, aiohttp.ClientConnectionError):
                self.retries += 1
                timed_out = True
                await asyncio.sleep(1.0)
                continue
            if status in (409, 503) and (status == 503 or "locked" in text.lower()):
                self.retries += 1
                await asyncio.sleep(0.5 if attempt < 20 else 2.0)
                continue
            if status == 409 and exists_ok and "already exists" in text.lower():
                return None
            if (status == 400 and done_ok and timed_out
                    and "can not be performed" in text.lower()):
                return None
            if status >= 400:
                raise RuntimeError(f"{method} {path}: HTTP {status} {text[:300]}")
            return json.loads(text) if text else None
        raise RuntimeError(f"{method} {path}: still locked/busy after 120 attempts")

    def start_poller(self) -> None:
        self._poller = asyncio.create_task(self._poll_loop())

    async def _poll_loop(self) -> None:
        fields = "uuid,name,provision_state,target_provision_state,last_error"
        while True:
            started = time.perf_counter()
            try:
                nodes: dict[str, Obj] = {}
                marker = ""
                while True:  # pages of 1000 (Ironic's max_limit)
                    body = await self.request(
                        "GET", f"/v1/nodes?fields={fields}&limit=1000{marker}")
                    page = body.get("nodes", [])
                    nodes.update((node["name"], node) for node in page)
                    if len(page) < 1000:
                        break
                    marker = f"&marker={page[-1]['uuid']}"
            except (RuntimeError, aiohttp.ClientError, TimeoutError) as exc:
                self.poll_errors[f"{type(exc).__name__}: {str(exc)[:200]}"] += 1
            else:
                self.nodes = nodes
                self._listed_at = started
                self._listed.set()
                self._listed.clear()
            await asyncio.sleep(max(0.0, self.poll - (time.perf_counter() - started)))

    async def wait_state(self, name: str, state: str, since: float) -> None:
        """Until a listing requested after ``since`` shows the node settled in ``state``."""
        while True:
            if self._listed_at > since:
                node = self.nodes.get(name) or {}
                current = node.get("provision_state")
                if current == state and not node.get("target_provision_state"):
                    return
                if current in IRONIC_FAILED and current != state and \
                        not node.get("target_provision_state"):
                    raise RuntimeError(f"{name}: {current}: {node.get('last_error')}")
            await self._listed.wait()

    async def action(self, name: str, target: str, settled: str) -> None:
        await self.request("PUT", f"/v1/nodes/{name}/states/provision", {"target": target},
                           done_ok=True)
        await self.wait_state(name, settled, time.perf_counter())

    async def enrol(self, h: BenchHost) -> None:
        node = await self.request("POST", "/v1/nodes", {
            "name": h.name, "driver": h.driver, "driver_info": h.driver_info,
            "properties": {"capabilities": "boot_mode:uefi"},
            **{f"{k}_interface": v for k, v in h.interfaces.items()}}, exists_ok=True)
        if node is None:  # made by an attempt that timed out
            node = await self.request("GET", f"/v1/nodes/{h.name}")
        await self.request("POST", "/v1/ports", {"node_uuid": node["uuid"], "address": h.mac},
                           exists_ok=True)
        await self.action(h.name, "manage", "manageable")
        await self.action(h.name, "inspect", "manageable")
        await self.action(h.name, "provide", "available")

    async def deploy(self, h: BenchHost, image: Obj) -> None:
        info = {"image_source": image["url"], "image_os_hash_algo": image["checksumType"],
                "image_os_hash_value": image["checksum"],
                "capabilities": {"boot_mode": "uefi"}}
        await self.request("PATCH", f"/v1/nodes/{h.name}", [
            {"op": "add", "path": f"/instance_info/{k}", "value": v} for k, v in info.items()])
        await self.action(h.name, "active", "active")


async def run_direct(kind: str, n: int, data_dir: Path, needle: str, params: Params,
                     out: Obj) -> None:
    """A fresh Ironic (same settings as ``racksmith up`` gives it), driven directly."""
    emulator: EmulatorService | None = None
    http: StaticHTTP | None = None
    ironic: IronicProcess | None = None
    direct: DirectScript | None = None
    try:
        print(f"  [{kind}] direct: starting a fresh Ironic"
              f"{' and virtual datacenter' if kind == 'redfish' else ''} ...", flush=True)
        # Every port is bound by its user: the datacenter's listeners now,
        # Ironic's at its start (port 0: it picks one and proves it is its own).
        if kind == "redfish":
            emulator = EmulatorService(data_dir, n)
            await emulator.prepare()
            settings = ironic_settings(data_dir, 0, emulator.dc.http_url,
                                       emulator.dc.http_root, emulator.dc.deploy_iso_url)
        else:
            http = StaticHTTP(data_dir / "ironic" / "http", 0)
            await http.start()
            settings = ironic_settings(data_dir, 0, http.url, http.root, None)
        ironic = IronicProcess(settings)
        await ironic.start()
        url = ironic.url
        if emulator is not None:
            await emulator.start(url)
            hosts = redfish_hosts(emulator)
            root = data_dir / "emulator" / "http" / "images"
            digest = (root / "sample-os.img.sha256sum").read_text().split()[0]
            image = {"url": emulator.dc.image_url("sample-os.img"), "checksum": digest,
                     "checksumType": "sha256"}
        else:
            hosts = fake_hosts(n)
            image = dict(FAKE_IMAGE)
        direct = DirectScript(url, params.direct_poll, params.concurrency)
        d = direct
        d.start_poller()
        print(f"  [{kind}] direct: enrolling {n} nodes, waiting for available ...", flush=True)
        with Meter(needle) as m1:
            await asyncio.wait_for(asyncio.gather(*(d.enrol(h) for h in hosts)),
                                   params.phase_timeout)
        calls1, retries1 = d.calls, d.retries
        out["available"] = {**m1.as_dict(), "ironic_calls": calls1,
                            "ironic_calls_per_host": round(calls1 / n, 2),
                            "retries": retries1}
        print(f"  [{kind}] direct: all available in {m1.seconds:.1f} s", flush=True)
        print(f"  [{kind}] direct: deploying {n} nodes, waiting for active ...", flush=True)
        with Meter(needle) as m2:
            await asyncio.wait_for(asyncio.gather(*(d.deploy(h, image) for h in hosts)),
                                   params.phase_timeout)
        out["provisioned"] = {**m2.as_dict(), "ironic_calls": d.calls - calls1,
                              "ironic_calls_per_host": round((d.calls - calls1) / n, 2),
                              "retries": d.retries - retries1}
        out["poll_errors"] = dict(d.poll_errors)
        print(f"  [{kind}] direct: all active in {m2.seconds:.1f} s", flush=True)
        out["ironic_requests"] = ironic_log.read(
            data_dir / "ironic" / "ironic.log",
            [("available", m1.started, m1.ended), ("provisioned", m2.started, m2.ended)])
    finally:
        if direct is not None:
            await direct.close()
        if ironic is not None:
            with contextlib.suppress(Exception):
                await ironic.stop()
        if emulator is not None:
            with contextlib.suppress(Exception):
                await emulator.stop()
        if http is not None:
            await http.stop()
        reap(str(data_dir))
        keep_log(params, data_dir, f"{kind}-direct")


# --------------------------------------------------------------------------- run + report


async def run_scenario(kind: str, n: int, tmp: Path, params: Params,
                       after: AfterHook | None = None) -> Obj:
    res: Obj = {"hosts": n, "racksmith": {}, "direct": {}}
    base = tmp / kind
    if params.only != "direct":
        try:
            await run_racksmith(kind, n, base / "racksmith", str(base / "racksmith"), params,
                                res["racksmith"], after)
        except Exception as exc:  # reported, and the direct side still runs
            res["racksmith"]["error"] = f"{type(exc).__name__}: {exc}"
            print(f"  [{kind}] Racksmith FAILED: {res['racksmith']['error']}", flush=True)
    if params.only != "racksmith":
        try:
            await run_direct(kind, n, base / "direct", str(base / "direct"), params,
                             res["direct"])
        except Exception as exc:
            res["direct"]["error"] = f"{type(exc).__name__}: {exc}"
            print(f"  [{kind}] direct FAILED: {res['direct']['error']}", flush=True)
    for phase in ("available", "provisioned"):
        r, d = res["racksmith"].get(phase), res["direct"].get(phase)
        if r and d and d["seconds"] > 0:
            res.setdefault("ratio", {})[phase] = round(r["seconds"] / d["seconds"], 2)
    r_total = sum(res["racksmith"].get(p, {}).get("seconds", 0) for p in ("available",
                                                                          "provisioned"))
    d_total = sum(res["direct"].get(p, {}).get("seconds", 0) for p in ("available",
                                                                       "provisioned"))
    if len(res.get("ratio", {})) == 2 and d_total > 0:
        res["ratio"]["total"] = round(r_total / d_total, 2)
    return res


def build_rows(kind: str, s: Obj) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    r, d, ratio = s["racksmith"], s["direct"], s.get("ratio", {})
    label = {"fake": "fake-hardware", "redfish": "Redfish + agent"}[kind]
    for phase, title in (("available", "apply → available"),
                         ("provisioned", "image → provisioned")):
        rp, dp = r.get(phase), d.get(phase)
        if not rp and not dp:
            continue
        rs_ = f"{rp['seconds']:.1f} s" if rp else "—"
        ds_ = f"{dp['seconds']:.1f} s" if dp else "—"
        ra = ratio.get(phase)
        status = "" if ra is None else ("PASS" if ra <= TARGET_RATIO else "FAIL")
        rows.append((f"{label}, {s['hosts']} hosts: {title}", rs_, ds_,
                     f"{ra:.2f}" if ra is not None else "—", f"≤ {TARGET_RATIO}", status))
        if rp:
            rows.append(("  per host p50 / max (Racksmith)",
                         f"{rp['per_host_p50_s']:.1f} / {rp['per_host_max_s']:.1f} s",
                         "", "", "", ""))
        rows.append(("  Ironic API calls per host",
                     f"{rp['ironic_calls_per_host']:.1f}" if rp else "—",
                     f"{dp['ironic_calls_per_host']:.1f}" if dp else "—", "", "", ""))
        rows.append(("  CPU s: bench process (Racksmith / script)",
                     f"{rp['cpu_self_s']:.1f}" if rp else "—",
                     f"{dp['cpu_self_s']:.1f}" if dp else "—", "", "", ""))
        rows.append(("  CPU s: Ironic", f"{rp['cpu_ironic_s']:.1f}" if rp else "—",
                     f"{dp['cpu_ironic_s']:.1f}" if dp else "—", "", "", ""))
        if kind == "redfish":
            rows.append(("  CPU s: emulator (sushy-tools, agent)",
                         f"{rp['cpu_emulator_s']:.1f}" if rp else "—",
                         f"{dp['cpu_emulator_s']:.1f}" if dp else "—", "", "", ""))
        rows.append(("  CPU s: other processes on the machine",
                     f"{rp['cpu_other_s']:.1f}" if rp else "—",
                     f"{dp['cpu_other_s']:.1f}" if dp else "—", "", "", ""))
    if "total" in ratio:
        rows.append((f"{label}, {s['hosts']} hosts: both phases", "", "",
                     f"{ratio['total']:.2f}", f"≤ {TARGET_RATIO}",
                     "PASS" if ratio["total"] <= TARGET_RATIO else "FAIL"))
    return rows


def print_table(rows: list[tuple[str, ...]], title: str) -> None:
    head = ("metric", "Racksmith", "direct script", "ratio", "target", "status")
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        print(title)
        for row in (head, *rows):
            print(f"{row[0]:<52}{row[1]:>14}{row[2]:>16}{row[3]:>7}  {row[4]:<7}{row[5]}")
        return
    table = Table(title=title)
    for i, name in enumerate(head):
        table.add_column(name, justify="right" if 0 < i < 4 else "left")
    for row in rows:
        style = {"PASS": "green", "FAIL": "red"}.get(row[5], "")
        table.add_row(*row[:5], f"[{style}]{row[5]}[/]" if style else row[5])
    Console(width=130).print(table)


def print_requests(results: Obj) -> None:
    """Per scenario and phase: Ironic's API requests by kind, both sides."""
    for kind, s in results["scenarios"].items():
        for phase in ("available", "provisioned"):
            sides = {side: s[side]["ironic_requests"][phase] for side in ("racksmith", "direct")
                     if "ironic_requests" in s.get(side, {})}
            if sides:
                print(f"\nIronic API requests, {kind} hosts, phase -> {phase} "
                      "(per host; summed answer seconds):")
                print("\n".join(ironic_log.table(sides, s["hosts"])))


def parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, Params]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true",
                   help="small sizes (20 fake, 4 redfish hosts): a smoke run in a few minutes")
    p.add_argument("--fake-hosts", type=int, help="fake-hardware hosts (default 200)")
    p.add_argument("--redfish-hosts", type=int, help="emulated Redfish hosts (default 50)")
    p.add_argument("--skip-fake", action="store_true")
    p.add_argument("--skip-redfish", action="store_true")
    p.add_argument("--direct-poll", type=float, default=1.0,
                   help="the direct script lists all nodes this often (s, default 1)")
    p.add_argument("--concurrency", type=int, default=16,
                   help="concurrent API requests of either client (default 16)")
    p.add_argument("--workers", type=int, default=Settings().controller_workers,
                   help="BareMetalHost controller workers (default: racksmith up's)")
    p.add_argument("--phase-timeout", type=float, help="seconds per phase (default 900)")
    p.add_argument("--only", choices=("racksmith", "direct"), default="",
                   help="run one side only (for investigations: no ratio)")
    p.add_argument("--ironic-requests", action="store_true",
                   help="also print, per phase, Ironic's API requests by kind for both sides "
                        "(count per host, summed answer time; from Ironic's log)")
    p.add_argument("--keep-ironic-logs", type=Path, metavar="DIR",
                   help="copy each side's ironic.log to DIR/<kind>-<side>.log")
    p.add_argument("--json", type=Path, metavar="PATH", help="write the results as JSON")
    p.add_argument("--tmpdir", type=Path, help="where the data dirs go (default $TMPDIR)")
    a = p.parse_args(argv)
    params = Params(fake_hosts=20 if a.quick else 200, redfish_hosts=4 if a.quick else 50,
                    skip_fake=a.skip_fake, skip_redfish=a.skip_redfish,
                    direct_poll=max(0.05, a.direct_poll), concurrency=max(1, a.concurrency),
                    workers=max(1, a.workers),
                    phase_timeout=a.phase_timeout or (300.0 if a.quick else 900.0),
                    quick=a.quick, only=a.only, keep_logs=a.keep_ironic_logs)
    if a.fake_hosts is not None:
        params.fake_hosts = max(1, a.fake_hosts)
    if a.redfish_hosts is not None:
        params.redfish_hosts = max(1, a.redfish_hosts)
    return a, params


def _sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


async def run_all(tmp: Path, params: Params, results: Obj) -> None:
    if not params.skip_fake:
        print(f"scenario fake-hardware: {params.fake_hosts} hosts", flush=True)
        results["scenarios"]["fake"] = await run_scenario("fake", params.fake_hosts, tmp, params)
    if not params.skip_redfish:
        print(f"scenario Redfish: {params.redfish_hosts} hosts", flush=True)
        results["scenarios"]["redfish"] = await run_scenario(
            "redfish", params.redfish_hosts, tmp, params)


def main(argv: list[str] | None = None) -> int:
    args, params = parse_args(argv)
    signal.signal(signal.SIGTERM, _sigterm)
    configure_logging("warning")
    logging.getLogger().setLevel(logging.ERROR)
    results: Obj = {
        "benchmark": "racksmith provisioning", "date": dt.datetime.now(dt.UTC).isoformat(),
        "machine": {"nproc": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform(), "loadavg_start": os.getloadavg()},
        "params": dict(params.__dict__), "scenarios": {}}
    with tempfile.TemporaryDirectory(prefix="racksmith-bench-prov-", dir=args.tmpdir) as d:
        tmp = Path(d)
        try:
            asyncio.run(run_all(tmp, params, results))
        finally:
            reap(str(tmp))
    results["machine"]["loadavg_end"] = os.getloadavg()
    rows: list[tuple[str, ...]] = []
    problems: list[str] = []
    for kind, s in results["scenarios"].items():
        rows += build_rows(kind, s)
        for side in ("racksmith", "direct"):
            if "error" in s[side]:
                problems.append(f"{kind} {side}: {s[side]['error']}")
    title = (f"Racksmith vs a plain script driving Ironic — {os.cpu_count()} cores, Python "
             f"{platform.python_version()}{' (quick)' if params.quick else ''}")
    print_table(rows, title)
    print(f"direct script: all nodes listed every {params.direct_poll:g} s, "
          f"{params.concurrency} concurrent requests; Racksmith: {params.workers} controller "
          f"workers. Load average before/after: {results['machine']['loadavg_start'][0]:.2f} / "
          f"{results['machine']['loadavg_end'][0]:.2f}")
    if args.ironic_requests:
        print_requests(results)
    for prob in problems:
        print(f"PROBLEM: {prob}")
    results["problems"] = problems
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
        print(f"results written to {args.json}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

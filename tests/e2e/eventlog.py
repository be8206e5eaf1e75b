"""An event log of a managed cluster, recorded with kubectl through its own
API, and the replay that checks the maintenance invariants against it.

Per kind, ``kubectl get --raw <list path>`` lists every object (kept as ADDED
events at their own resourceVersion), then ``kubectl get --raw
<list path>?watch=1&resourceVersion=<the listing's>`` streams every change
from that exact point in the background (list-then-watch, as an informer:
no change between the listing and the watch is missed). The API server
stamps every write (deletions included) with one global, strictly
increasing resourceVersion, so sorting the events of all kinds by it gives
the exact order in which the server committed them — the replay walks that
order and checks, after every event, what must hold at every moment.

A watch that the server or the cluster's endpoint proxy ends (a member's
API server or HAProxy restarting) is resumed at once from the last
resourceVersion it told, as an informer resumes: nothing is missed.

Restarting the log (around the kill -9 test) restarts the watches. The
restarted control plane writes while the watches are off (a machine
finished, its request deleted; the next one started): the new listing
records, at its resourceVersion, a DELETED event for every object the log
knew and the listing no longer holds. When those deletions really happened
is unknown, so the span from the last event seen before the stop to the
last listing's resourceVersion is *blind* (``EventLog.blind``): the replay
applies its events but checks nothing in it (a deletion recorded late would
make two maintenances look concurrent). From its end on the log is exact
again.
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.harness.process import kubectl_path

KINDS = ("nodes", "nodemaintenancerequests", "nodeworkloadlocks", "pods",
         "poddisruptionbudgets", "clustermaintenancerequests")
"""The kinds logged: a managed cluster's, all in its own API (one
resourceVersion sequence)."""
PATHS = {"nodes": "/api/v1/nodes", "pods": "/api/v1/pods",
         "nodemaintenancerequests": "/apis/lcm.racksmith.io/v1alpha1/nodemaintenancerequests",
         "nodeworkloadlocks": "/apis/lcm.racksmith.io/v1alpha1/nodeworkloadlocks",
         "clustermaintenancerequests":
             "/apis/lcm.racksmith.io/v1alpha1/clustermaintenancerequests",
         "poddisruptionbudgets": "/apis/policy/v1/poddisruptionbudgets"}
"""Where each kind is listed across namespaces (the listing's resourceVersion
is the server's, which ``kubectl get -o json`` does not keep)."""

Obj = dict[str, Any]


@dataclass(order=True)
class Event:
    rv: int
    kind: str = field(compare=False)
    type: str = field(compare=False)
    obj: Obj = field(compare=False, repr=False)

    @property
    def key(self) -> tuple[str, str, str]:
        md = self.obj.get("metadata", {})
        return self.kind, md.get("namespace", ""), md.get("name", "")


class EventLog:
    """Background watches of ``KINDS``; ``events()`` in commit order."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self._events: list[Event] = []
        self._lock = threading.Lock()
        self._procs: list[subprocess.Popen[str]] = []
        self._threads: list[threading.Thread] = []
        self.blind: list[tuple[int, int]] = []
        """(after, up to]: resourceVersions the watches were off for (see the module docstring)."""
        self.errors: list[Obj] = []
        """Watch ERROR events (a watch that could not go on): the log is incomplete."""
        self._stopping = threading.Event()

    def start(self, kubeconfig: Path) -> None:
        """List every kind and watch it from its listing (see the module docstring)."""
        known = World()
        so_far = self.events()
        for ev in so_far:
            known.apply(ev)
        last_seen = max((ev.rv for ev in so_far), default=0)
        listed = 0
        self._stopping.clear()
        for kind in KINDS:
            rv = self._list(kubeconfig, kind, known)
            listed = max(listed, rv)
            thread = threading.Thread(target=self._follow, args=(kind, kubeconfig, rv),
                                      daemon=True)
            thread.start()
            self._threads.append(thread)
        if known.objects:
            self.blind.append((last_seen, listed))

    def _follow(self, kind: str, kubeconfig: Path, rv: int) -> None:
        """Watch ``kind`` from ``rv``; a watch the server (or the cluster's
        endpoint proxy) ends is resumed from the last resourceVersion it
        told, as an informer does: no event is missed."""
        while not self._stopping.is_set():
            proc = subprocess.Popen(
                [str(kubectl_path(33)), "get", "--raw",
                 f"{PATHS[kind]}?watch=1&resourceVersion={rv}", "--request-timeout=0"],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                env=self._env(kubeconfig))
            with self._lock:
                self._procs.append(proc)
            if self._stopping.is_set():  # stop() may have missed this one
                proc.terminate()
            rv = max(rv, self._read(kind, proc))
            proc.wait()
            with self._lock:
                self._procs.remove(proc)
            self._stopping.wait(0.5)

    def _env(self, kubeconfig: Path) -> dict[str, str]:
        return {"KUBECONFIG": str(kubeconfig), "HOME": str(self.home), "PATH": "/usr/bin:/bin"}

    def _list(self, kubeconfig: Path, kind: str, known: World) -> int:
        """List ``kind``: its objects as ADDED events, a DELETED event at the
        listing's resourceVersion for every object ``known`` holds that it does
        not; the listing's resourceVersion."""
        res = subprocess.run([str(kubectl_path(33)), "get", "--raw", PATHS[kind]],
                             capture_output=True, text=True, timeout=60,
                             env=self._env(kubeconfig), check=True)
        listing = json.loads(res.stdout)
        rv = int(listing["metadata"]["resourceVersion"])
        items = listing.get("items") or []
        present = set()
        with self._lock:
            for obj in items:
                md = obj.get("metadata") or {}
                present.add((kind, md.get("namespace", ""), md.get("name", "")))
                self._events.append(Event(int(md.get("resourceVersion") or 0), kind, "ADDED",
                                          obj))
            for key, obj in known.objects.items():
                if key[0] == kind and key not in present:
                    self._events.append(Event(rv, kind, "DELETED", obj))
        return rv

    def stop(self) -> None:
        self._stopping.set()
        with self._lock:
            procs = list(self._procs)
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for thread in self._threads:
            thread.join(10)
        self._procs.clear()
        self._threads.clear()

    def _read(self, kind: str, proc: subprocess.Popen[str]) -> int:
        """Log the events of one watch; the last resourceVersion it told."""
        assert proc.stdout is not None
        decoder = json.JSONDecoder()
        buf = ""
        last = 0
        for chunk in iter(lambda: proc.stdout.readline() if proc.stdout else "", ""):
            buf += chunk
            while True:
                stripped = buf.lstrip()
                if not stripped:
                    buf = ""
                    break
                try:
                    doc, end = decoder.raw_decode(stripped)
                except json.JSONDecodeError:
                    buf = stripped
                    break
                buf = stripped[end:]
                obj = doc.get("object") or {}
                kind_of_event = str(doc.get("type"))
                with self._lock:
                    if kind_of_event not in ("ADDED", "MODIFIED", "DELETED"):
                        self.errors.append(obj)
                        continue
                    rv = int(obj.get("metadata", {}).get("resourceVersion") or 0)
                    self._events.append(Event(rv, kind, kind_of_event, obj))
                    last = max(last, rv)
        return last

    def events(self) -> list[Event]:
        with self._lock:
            return sorted(self._events)


# --- replay --------------------------------------------------------------------------


def _ready(node: Obj) -> bool:
    for c in (node.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return bool(c.get("status") == "True")
    return False


def _pod_ready(pod: Obj) -> bool:
    if pod["metadata"].get("deletionTimestamp"):
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def _matches(selector: Obj, labels: dict[str, str]) -> bool:
    want = selector.get("matchLabels") or {}
    return bool(want) and all(labels.get(k) == v for k, v in want.items())


@dataclass
class World:
    """The state after a prefix of the log."""

    objects: dict[tuple[str, str, str], Obj] = field(default_factory=dict)

    def apply(self, ev: Event) -> None:
        if ev.type == "DELETED":
            self.objects.pop(ev.key, None)
        else:
            self.objects[ev.key] = ev.obj

    def of(self, kind: str) -> list[Obj]:
        return [o for (k, _, _), o in self.objects.items() if k == kind]


Check = Callable[[World, Event, World], list[str]]


def replay(events: list[Event], checks: list[Check], start_rv: int = 0,
           blind: list[tuple[int, int]] | None = None) -> list[str]:
    """Run every check after every event newer than ``start_rv`` and outside the
    ``blind`` spans ((after, up to]: ``EventLog.blind``); the problems found."""
    world = World()
    problems: list[str] = []
    for ev in events:
        before = World(dict(world.objects))
        world.apply(ev)
        if ev.rv <= start_rv or any(after < ev.rv <= upto for after, upto in blind or ()):
            continue
        for check in checks:
            problems.extend(f"rv {ev.rv} ({ev.type} {ev.kind} {ev.key[2]}): {p}"
                            for p in check(before, ev, world))
    return list(dict.fromkeys(problems))


def in_maintenance(world: World) -> set[str]:
    return {o["spec"]["nodeName"] for o in world.of("nodemaintenancerequests")}


def etcd_at_most_one_down(etcd_nodes: set[str]) -> Check:
    """Never two etcd members in maintenance, nor two of them cordoned or NotReady."""
    def check(_: World, __: Event, w: World) -> list[str]:
        out = []
        maint = in_maintenance(w) & etcd_nodes
        if len(maint) > 1:
            out.append(f"etcd members {sorted(maint)} in maintenance together")
        down = {n["metadata"]["name"] for n in w.of("nodes")
                if n["metadata"]["name"] in etcd_nodes
                and (n["spec"].get("unschedulable") or not _ready(n))}
        if len(down) > 1:
            out.append(f"etcd members {sorted(down)} down together")
        return out
    return check


def group_limits(groups: dict[str, str], limits: dict[str, int]) -> Check:
    """At most ``limits[g]`` machines of update group ``g`` in maintenance at once."""
    def check(_: World, __: Event, w: World) -> list[str]:
        out = []
        count: dict[str, list[str]] = {}
        for node in in_maintenance(w):
            g = groups.get(node)
            if g is not None:
                count.setdefault(g, []).append(node)
        for g, nodes in count.items():
            if len(nodes) > limits[g]:
                out.append(f"group {g} has {sorted(nodes)} in maintenance (limit {limits[g]})")
        return out
    return check


def pdbs_hold(minimum: dict[str, int]) -> Check:
    """For PDB ``ns/name`` the Ready pods it selects never drop below ``minimum``
    once they reached it (the budget is counted only after the workload is up)."""
    reached: set[str] = set()

    def check(_: World, __: Event, w: World) -> list[str]:
        out = []
        pdbs = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p
                for p in w.of("poddisruptionbudgets")}
        for key, want in minimum.items():
            pdb = pdbs.get(key)
            if pdb is None:
                continue
            ns = pdb["metadata"]["namespace"]
            ready = sum(1 for p in w.of("pods") if p["metadata"].get("namespace") == ns
                        and _matches(pdb["spec"].get("selector") or {},
                                     p["metadata"].get("labels") or {}) and _pod_ready(p))
            if ready >= want:
                reached.add(key)
            elif key in reached:
                out.append(f"PDB {key}: {ready} Ready pods, fewer than {want}")
        return out
    return check


def drained_only_when_unlocked(exempt: Callable[[Obj], bool]) -> Check:
    """A pod leaving a node in maintenance (not one its own controller moves,
    ``exempt``) leaves only when the node is cordoned and every
    NodeWorkloadLock of the node is inactive."""
    def check(before: World, ev: Event, w: World) -> list[str]:
        if ev.kind != "pods" or ev.type != "DELETED":
            return []
        pod = before.objects.get(ev.key) or ev.obj
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or node not in in_maintenance(before) or exempt(pod):
            return []
        out = []
        locks = [lk for lk in before.of("nodeworkloadlocks") if lk["spec"]["nodeName"] == node]
        active = [lk["metadata"]["name"] for lk in locks
                  if (lk.get("status") or {}).get("state", "active") != "inactive"]
        if active:
            out.append(f"pod {ev.key[1]}/{ev.key[2]} left {node} while locks {active} "
                       "were not inactive")
        nodes = {n["metadata"]["name"]: n for n in before.of("nodes")}
        if node in nodes and not nodes[node]["spec"].get("unschedulable"):
            out.append(f"pod {ev.key[1]}/{ev.key[2]} left {node} before it was cordoned")
        return out
    return check


def timeline(events: list[Event], first_rv: int, last_rv: int) -> list[str]:
    """One line per event of pods, nodes, requests and locks in [first_rv, last_rv]:
    what a failed invariant needs to be understood."""
    lines: list[str] = []
    for ev in events:
        if not first_rv <= ev.rv <= last_rv:
            continue
        o = ev.obj
        md = o.get("metadata", {})
        name = md.get("name", "")
        if ev.kind == "pods":
            node = (o.get("spec") or {}).get("nodeName")
            detail = f"node={node} ready={_pod_ready(o)}" + (
                " deleting" if md.get("deletionTimestamp") else "")
        elif ev.kind == "nodes":
            detail = (f"ready={_ready(o)} unschedulable="
                      f"{bool((o.get('spec') or {}).get('unschedulable'))}")
        elif ev.kind == "nodeworkloadlocks":
            st = o.get("status") or {}
            detail = f"state={st.get('state', 'active')} {st.get('inactivationProgress', '')}"
        else:
            detail = ""
        lines.append(f"{ev.rv} {ev.type} {ev.kind}/{name} {detail}".rstrip())
    return lines

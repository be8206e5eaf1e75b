"""Benchmark of the web console: the hosts page with 1,000 BareMetalHosts in headless chromium.

Owns the console part of ``make bench``. The budget: with 1,000
BareMetalHost objects, the hosts page (``/console/#/hosts``) shows its first
screen of rows in under 2 s in Debian's headless chromium.

One run:

* the server: a real ``racksmith up --no-ironic`` process (port 0, a
  temporary data dir; the API server, the console and the controllers, but
  no Ironic and so no BareMetalHost controller: the hosts keep the status
  written here), stopped by PID (SIGTERM, then SIGKILL) in every case and
  killed with us (PR_SET_PDEATHSIG);
* N BareMetalHosts (default 1,000; C concurrent creates over HTTPS with the
  admin token), each with a realistic status written through the status
  subresource: provisioned (with a consumer Machine), available,
  inspecting / provisioning / deprovisioning (an operation running since a
  moment ago), registration or provisioning errors (errorType and
  errorMessage), power, operation history and the inspected hardware;
* Playwright on ``/usr/bin/chromium`` (1440x900, the same flags as the
  browser tests): log in with the token (the **API token** field and the
  **Log in** button), then R fresh loads of ``/console/#/hosts`` (from
  ``about:blank`` each time, so the modules, the informer's LIST and the
  table all start from nothing). A script installed before the page's own
  records ``performance.now()`` — milliseconds since the navigation started
  — when the Hosts table (``[role=table][aria-label=Hosts]``) holds a first
  screen of visible data rows (``[role=row][data-name]``): at least
  min(15, N) of them inside the window and the table's viewport, or every
  row that fits when fewer than 15 do;
* live update: a host in view gets a new provisioning state (status merge
  patch from this process); the time until its ``[data-col=state]`` cell
  shows it, read in the page (same clock as this process, epoch ms);
* the references, in the same run: the browser fetching the full LIST of
  the N hosts (one unpaged request with the token, JSON parsed, from the
  page's own context) and ``kubectl get baremetalhosts -A`` wall time
  (kubectl 1.33, warm discovery cache).

It prints a table (metric, median, max, budget, median ÷ budget, PASS/FAIL):
the budget is information, not enforced; the exit status is 1 only if the
harness failed (server did not start, creates failed, no rows appeared).

    .venv/bin/python bench/console.py [--quick] [--hosts N] [--runs R] [--json PATH]
        [--screenshot PNG]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp
import orjson
from apiserver import Server, server_log_problems, start_server

if TYPE_CHECKING:
    from playwright.sync_api import ViewportSize

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
KUBECTL = "/usr/lib/google-cloud-sdk/bin/kubectl.1.33"
VIEWPORT: ViewportSize = {"width": 1440, "height": 900}
BUDGET_S = 2.0
FIRST_SCREEN_ROWS = 15
PAGE_TIMEOUT_MS = 60_000
NAMESPACE = "default"
BMH = "/apis/metal3.io/v1alpha1"

Obj = dict[str, Any]


# --------------------------------------------------------------------------- server


def start_racksmith(data_dir: Path) -> Server:
    """``racksmith up --no-ironic`` on port 0; wait until /readyz answers 200."""
    return start_server(data_dir, command=("up", "--no-ironic", "--log-level", "warning"))


# --------------------------------------------------------------------------- the hosts

VENDORS = [("Dell Inc.", "PowerEdge R650", "Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz", 2000),
           ("HPE", "ProLiant DL380 Gen10 Plus", "AMD EPYC 7302 16-Core Processor", 3000),
           ("Supermicro", "SYS-1029P-WTR", "Intel(R) Xeon(R) Silver 4214 CPU @ 2.20GHz", 2200)]
ERRORS = [("registration error", "registering",
           "BMC at {bmc} unreachable: HTTPConnectionPool(host='10.20.{r}.{i}', port=443): "
           "Max retries exceeded (connect timeout=10)"),
          ("provisioning error", "provisioning",
           "Deploy step deploy.write_image failed: image checksum mismatch (expected "
           "sha256 b2e3b31e…, got 9f1c07aa…)"),
          ("inspection error", "inspecting",
           "Timeout reached while inspecting the node; the ramdisk did not call back")]


def _ts(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def host_name(i: int) -> str:
    return f"host-{i:04d}"


def host_kind(i: int) -> str:
    """Deterministic mix: 60% provisioned, 20% available, 5% inspecting,
    4% provisioning, 2% deprovisioning, 1% preparing, 5% error, 3% powered-off spare."""
    r = (i * 7919) % 100
    for limit, kind in ((60, "provisioned"), (80, "available"), (85, "inspecting"),
                        (89, "provisioning"), (91, "deprovisioning"), (92, "preparing"),
                        (97, "error")):
        if r < limit:
            return kind
    return "spare"


def host_object(i: int) -> Obj:
    vendor, product, _cpu, _mhz = VENDORS[i % len(VENDORS)]
    rack = f"rack-{i // 40 + 1}"
    kind = host_kind(i)
    spec: Obj = {
        "bmc": {"address": f"redfish-virtualmedia+https://10.20.{i // 250}.{i % 250 + 1}"
                           f"/redfish/v1/Systems/1",
                "credentialsName": f"{host_name(i)}-bmc-secret",
                "disableCertificateVerification": True},
        "bootMACAddress": f"0c:c4:7a:{i >> 8 & 0xff:02x}:{i & 0xff:02x}:00",
        "bootMode": "UEFI",
        "online": kind not in ("spare",),
        "description": f"{vendor} {product} in {rack}, slot {i % 40 + 1}",
    }
    if kind in ("provisioned", "deprovisioning"):
        spec["consumerRef"] = {"apiVersion": "cluster.racksmith.io/v1alpha1", "kind": "Machine",
                               "name": f"prod-{'master' if i % 50 == 0 else 'worker'}-{i}",
                               "namespace": NAMESPACE}
        spec["image"] = {"url": "http://images.example/ubuntu-22.04.img",
                         "checksum": "b2e3b31e8dfad2deab0378731c1350864503aca10c681a27ad4674"
                                     "18745dc30a", "checksumType": "sha256"}
    return {"apiVersion": "metal3.io/v1alpha1", "kind": "BareMetalHost",
            "metadata": {"name": host_name(i), "namespace": NAMESPACE,
                         "labels": {"metal.racksmith.io/rack": rack,
                                    "metal.racksmith.io/vendor": vendor.split()[0]}},
            "spec": spec}


def hardware(i: int) -> Obj:
    vendor, product, cpu, mhz = VENDORS[i % len(VENDORS)]
    return {
        "systemVendor": {"manufacturer": vendor, "productName": product,
                         "serialNumber": f"SN{i:08d}"},
        "cpu": {"arch": "x86_64", "model": cpu, "clockMegahertz": mhz, "count": 32,
                "flags": []},
        "ramMebibytes": 196608 if i % 3 else 393216,
        "nics": [{"name": f"eno{n + 1}", "mac": f"0c:c4:7a:{i >> 8 & 0xff:02x}:{i & 0xff:02x}:"
                  f"{n:02x}", "speedGbps": 25, "pxe": n == 0, "vlans": []} for n in range(2)],
        "storage": [{"name": "/dev/nvme0n1", "model": "SSDPE2KX040T8", "vendor": "INTEL",
                     "serialNumber": f"S{i:010d}", "sizeBytes": 4_000_000_000_000,
                     "rotational": False, "type": "NVME", "alternateNames": []},
                    {"name": "/dev/sda", "model": "MZ7LH480", "vendor": "SAMSUNG",
                     "serialNumber": f"X{i:010d}", "sizeBytes": 480_103_981_056,
                     "rotational": False, "type": "SSD", "alternateNames": []}],
    }


def host_status(i: int, now: float, state: str | None = None) -> Obj:
    kind = host_kind(i) if state is None else state
    t0 = now - 86400 * 3 - i * 13
    hist: Obj = {"register": {"start": _ts(t0), "end": _ts(t0 + 22)},
                 "inspect": {"start": _ts(t0 + 22), "end": _ts(t0 + 31)}}
    status: Obj = {"operationalStatus": "OK", "errorCount": 0, "poweredOn": True,
                   "lastUpdated": _ts(now - i % 600), "hardware": hardware(i),
                   "operationHistory": hist,
                   "goodCredentials": {"credentials": {"name": f"{host_name(i)}-bmc-secret"},
                                       "credentialsVersion": "1"}}
    prov: Obj = {"state": kind, "ID": f"00000000-0000-4000-8000-{i:012d}"}
    if kind == "provisioned":
        hist["provision"] = {"start": _ts(t0 + 3600), "end": _ts(t0 + 3690)}
    elif kind == "available":
        status["poweredOn"] = False
    elif kind == "inspecting":
        hist["inspect"] = {"start": _ts(now - 40 - i % 60)}
    elif kind == "provisioning":
        hist["provision"] = {"start": _ts(now - 60 - i % 120)}
    elif kind == "deprovisioning":
        hist["provision"] = {"start": _ts(t0 + 3600), "end": _ts(t0 + 3690)}
        hist["deprovision"] = {"start": _ts(now - 30 - i % 60)}
    elif kind == "preparing":
        status["poweredOn"] = True
    elif kind == "error":
        etype, estate, msg = ERRORS[i % len(ERRORS)]
        prov["state"] = estate
        status.update(operationalStatus="error", errorType=etype, errorCount=3 + i % 5,
                      errorMessage=msg.format(bmc=f"10.20.{i // 250}.{i % 250 + 1}",
                                              r=i // 250, i=i % 250 + 1))
        if estate == "registering":
            status["poweredOn"] = None
            hist.pop("inspect")
            hist["register"] = {"start": _ts(now - 900)}
    elif kind == "spare":
        prov["state"] = "available"
        status["poweredOn"] = False
    status["provisioning"] = prov
    return status


async def create_hosts(server: Server, n: int, concurrency: int) -> Obj:
    """Create the hosts and write their status; returns counts and timings."""
    ctx = ssl.create_default_context(cafile=str(server.ca_path))
    connector = aiohttp.TCPConnector(ssl=ctx, limit=concurrency)
    headers = {"Authorization": f"Bearer {server.token}", "User-Agent": "racksmith-bench"}
    errors: list[str] = []
    now = time.time()
    async with aiohttp.ClientSession(base_url=server.url, connector=connector, headers=headers,
                                     timeout=aiohttp.ClientTimeout(total=60)) as http:
        todo = iter(range(n))

        async def worker() -> None:
            for i in todo:
                if len(errors) > 20:
                    return
                base = f"{BMH}/namespaces/{NAMESPACE}/baremetalhosts"
                async with http.post(base, data=orjson.dumps(host_object(i)),
                                     headers={"Content-Type": "application/json"}) as r:
                    if r.status != 201:
                        errors.append(f"create {host_name(i)}: HTTP {r.status} "
                                      f"{(await r.text())[:300]}")
                        continue
                async with http.patch(f"{base}/{host_name(i)}/status",
                                      data=orjson.dumps({"status": host_status(i, now)}),
                                      headers={"Content-Type":
                                               "application/merge-patch+json"}) as r:
                    if r.status != 200:
                        errors.append(f"status {host_name(i)}: HTTP {r.status} "
                                      f"{(await r.text())[:300]}")

        t = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        seconds = time.perf_counter() - t
        async with http.get(f"{BMH}/baremetalhosts") as r:
            body = await r.read()
        items = orjson.loads(body)["items"]
    if errors:
        raise RuntimeError("creating hosts failed:\n" + "\n".join(errors[:10]))
    states: dict[str, int] = {}
    for item in items:
        st = ((item.get("status") or {}).get("provisioning") or {}).get("state") or "unknown"
        states[st] = states.get(st, 0) + 1
    return {"hosts": len(items), "seconds": round(seconds, 2),
            "list_bytes": len(body), "states": dict(sorted(states.items()))}


def patch_status(server: Server, name: str, status: Obj) -> None:
    ctx = ssl.create_default_context(cafile=str(server.ca_path))
    req = urllib.request.Request(
        f"{server.url}{BMH}/namespaces/{NAMESPACE}/baremetalhosts/{name}/status",
        data=orjson.dumps({"status": status}), method="PATCH",
        headers={"Authorization": f"Bearer {server.token}",
                 "Content-Type": "application/merge-patch+json"})
    with urllib.request.urlopen(req, timeout=30, context=ctx) as resp:
        if resp.status != 200:
            raise RuntimeError(f"status patch of {name}: HTTP {resp.status}")


# --------------------------------------------------------------------------- the browser

# Installed before the page's own scripts on every navigation: records when the
# Hosts table first holds a screen of visible data rows (ms since navigation start).
FIRST_SCREEN_JS = """
(() => {
  if (!location.pathname.startsWith("/console")) return;
  const want = %d, total = %d;
  const rowsSel = '[role=table][aria-label=Hosts] [role=row][data-name]';
  const check = () => {
    const rows = document.querySelectorAll(rowsSel);
    if (!rows.length) return false;
    const vh = window.innerHeight;
    let visible = 0;
    for (const r of rows) {
      const clip = (r.closest('.vt-viewport') || r.closest('[role=table]')).getBoundingClientRect();
      const b = r.getBoundingClientRect();
      const top = Math.max(0, clip.top), bottom = Math.min(vh, clip.bottom);
      if (b.height > 0 && b.top < bottom && b.bottom > top && r.checkVisibility()) visible++;
    }
    if (visible >= want || (visible > 0 && rows.length > visible)) {
      const mark = { ms: performance.now(), visible, inDom: rows.length };
      window.__firstScreen = mark;
      requestAnimationFrame(() => { mark.frameMs = performance.now(); });
      return true;
    }
    return false;
  };
  const all = () => {
    const table = document.querySelector('[role=table][aria-label=Hosts]');
    if (table && Number(table.getAttribute('aria-rowcount')) >= total + 1) {
      window.__allRows = performance.now();
      return true;
    }
    return false;
  };
  let first = false;
  const obs = new MutationObserver(() => {
    first = first || check();
    if (first && all()) obs.disconnect();
  });
  obs.observe(document, { childList: true, subtree: true, attributes: true,
                          attributeFilter: ['hidden', 'aria-rowcount'] });
})();
"""

# Sets window.__live: a promise of the epoch ms (the same clock as time.time())
# when the state cell of host `name` contains `state`.
WAIT_STATE_JS = """
([name, state]) => { window.__live = new Promise((resolve) => {
  const sel = `[role=table][aria-label=Hosts] [role=row][data-name="${name}"] [data-col=state]`;
  const done = () => {
    const cell = document.querySelector(sel);
    if (cell && cell.textContent.includes(state)) {
      resolve(performance.timeOrigin + performance.now());
      return true;
    }
    return false;
  };
  if (done()) return;
  const obs = new MutationObserver(() => { if (done()) obs.disconnect(); });
  obs.observe(document.body, { childList: true, subtree: true, characterData: true });
}); }
"""

FETCH_LIST_JS = """
async (path) => {
  const token = sessionStorage.getItem("racksmith.token");
  const t = performance.now();
  const resp = await fetch(path, { headers: { Authorization: `Bearer ${token}`,
                                              Accept: "application/json" },
                                   cache: "no-store" });
  const body = await resp.json();
  return { ms: performance.now() - t, status: resp.status, items: (body.items || []).length };
}
"""


def browser_phase(server: Server, n: int, runs: int, live_runs: int, out: Obj,
                  screenshot: Path | None = None) -> None:
    from playwright.sync_api import sync_playwright

    console_url = f"{server.url}/console/"
    problems: list[str] = out.setdefault("problems", [])
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            ctx = browser.new_context(ignore_https_errors=True, viewport=VIEWPORT)
            ctx.add_init_script(FIRST_SCREEN_JS % (min(FIRST_SCREEN_ROWS, n), n))
            page = ctx.new_page()
            page.set_default_timeout(PAGE_TIMEOUT_MS)
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}")
                    if m.type == "error" else None)

            page.goto(console_url)
            page.get_by_label("API token").fill(server.token)
            page.get_by_role("button", name="Log in").click()
            page.wait_for_url("**#/overview")

            loads: list[Obj] = []
            for k in range(runs + 1):  # the first load warms the server's caches
                page.goto("about:blank")
                page.goto(f"{console_url}#/hosts", wait_until="commit")
                page.wait_for_function("() => window.__firstScreen && window.__firstScreen.frameMs")
                mark = page.evaluate("() => window.__firstScreen")
                if k == runs and screenshot is not None:
                    page.screenshot(path=str(screenshot))
                page.wait_for_function("() => window.__allRows")
                all_rows = page.evaluate("() => window.__allRows")
                nav = page.evaluate("""() => {
                  const n = performance.getEntriesByType('navigation')[0] || {};
                  const lists = performance.getEntriesByType('resource')
                    .filter((e) => e.name.includes('/baremetalhosts') && !e.name.includes('watch'));
                  return { dcl: n.domContentLoadedEventEnd || 0,
                           firstList: lists.length ? lists[0].responseEnd : 0,
                           listRequests: lists.length };
                }""")
                run = {"first_screen_ms": mark["ms"], "frame_ms": mark["frameMs"],
                       "rows_visible": mark["visible"], "rows_in_dom": mark["inDom"],
                       "dom_content_loaded_ms": nav["dcl"], "first_list_page_ms": nav["firstList"],
                       "all_rows_ms": all_rows, "list_requests": nav["listRequests"]}
                if k:
                    loads.append(run)
                print(f"  load {k}{' (warm-up)' if not k else ''}: first screen "
                      f"{mark['ms']:.0f} ms ({mark['visible']} rows visible, {mark['inDom']} in "
                      f"the DOM); first LIST page {nav['firstList']:.0f} ms; all {n} rows "
                      f"{all_rows:.0f} ms", flush=True)
            out["loads"] = loads
            title = page.locator("h1").first.inner_text()
            if title != "Hosts":
                problems.append(f"hosts page h1 is {title!r}")

            # live updates: a host in view changes state
            visible_names = page.eval_on_selector_all(
                "[role=table][aria-label=Hosts] [role=row][data-name]",
                "rows => rows.map((r) => r.dataset.name)")
            name = visible_names[0]
            i = int(name.rsplit("-", 1)[1])
            live: list[float] = []
            now = time.time()
            cell = (f'[role=table][aria-label=Hosts] [role=row][data-name="{name}"] '
                    '[data-col=state]')
            for _ in range(live_runs):
                shown = page.locator(cell).inner_text()
                state = "available" if "inspecting" in shown else "inspecting"
                page.evaluate(WAIT_STATE_JS, [name, state])  # observer first, then the patch
                t0 = time.time() * 1000
                patch_status(server, name, host_status(i, now, state))
                seen = page.evaluate(
                    "(ms) => Promise.race([window.__live, new Promise((r) => "
                    "setTimeout(() => r(null), ms))])", PAGE_TIMEOUT_MS)
                if seen is None:
                    raise RuntimeError(f"{name}'s state cell never showed {state!r}")
                live.append(seen - t0)
                time.sleep(0.3)
            out["live_update_ms"] = live

            lists: list[Obj] = []
            for _ in range(runs + 1):
                lists.append(page.evaluate(FETCH_LIST_JS, f"{BMH}/baremetalhosts"))
            for r in lists:
                if r["status"] != 200 or r["items"] != n:
                    problems.append(f"browser LIST: HTTP {r['status']}, {r['items']} items")
            out["browser_list_ms"] = [r["ms"] for r in lists[1:]]
            out["chromium"] = browser.version
        finally:
            browser.close()


def kubectl_phase(server: Server, runs: int, cache: Path, out: Obj) -> None:
    env = dict(os.environ, KUBECONFIG=str(server.data_dir / "kubeconfig"))
    cmd = [KUBECTL, "get", "baremetalhosts", "-A", "--cache-dir", str(cache)]
    times: list[float] = []
    lines = 0
    for k in range(runs + 1):  # the first run fills the discovery cache
        t = time.perf_counter()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        took = time.perf_counter() - t
        if proc.returncode != 0:
            raise RuntimeError(f"kubectl failed: {proc.stderr[-1000:]}")
        lines = len(proc.stdout.splitlines())
        if k:
            times.append(took * 1000)
    out["kubectl_ms"] = times
    out["kubectl_lines"] = lines


# --------------------------------------------------------------------------- report


def med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def build_rows(r: Obj, n: int) -> list[tuple[str, str, str, str, str, str]]:
    loads = r.get("loads", [])
    rows: list[tuple[str, str, str, str, str, str]] = []

    def ms(xs: list[float]) -> tuple[str, str]:
        if not xs:
            return "—", "—"
        return f"{med(xs):.0f} ms", f"{max(xs):.0f} ms"

    first = [x["first_screen_ms"] for x in loads]
    if first:
        ratio = med(first) / 1000 / BUDGET_S
        verdict = "PASS" if max(first) / 1000 < BUDGET_S else "FAIL"
        rows.append((f"hosts page: first screen of rows, {n} hosts, fresh load",
                     *ms(first), f"{BUDGET_S:.0f} s", f"{ratio:.2f}", verdict))
        rows.append(("  the frame after it (painted)",
                     *ms([x["frame_ms"] for x in loads]), "", "", ""))
        rows.append(("  of which: page loaded (DOMContentLoaded)",
                     *ms([x["dom_content_loaded_ms"] for x in loads]), "", "", ""))
        rows.append(("  of which: first informer LIST page received",
                     *ms([x["first_list_page_ms"] for x in loads]), "", "", ""))
        rows.append((f"hosts page: all {n} rows in the table (aria-rowcount)",
                     *ms([x["all_rows_ms"] for x in loads]), "", "", ""))
    else:
        rows.append((f"hosts page: first screen of rows, {n} hosts", "—", "—",
                     f"{BUDGET_S:.0f} s", "—", "FAIL"))
    live = r.get("live_update_ms", [])
    rows.append(("live update: status patch → the row's state cell shows it", *ms(live),
                 "", "", ""))
    blist = r.get("browser_list_ms", [])
    rows.append((f"reference: browser fetch of the full LIST ({n} hosts, JSON parsed)",
                 *ms(blist), "reference", "", ""))
    kc = r.get("kubectl_ms", [])
    rows.append(("reference: kubectl get baremetalhosts -A (wall)", *ms(kc), "reference",
                 "", ""))
    if first and blist:
        rows.append(("first screen ÷ browser full LIST (medians)",
                     f"{med(first) / med(blist):.2f}", "", "", "", ""))
    if first and kc:
        rows.append(("first screen ÷ kubectl get (medians)",
                     f"{med(first) / med(kc):.2f}", "", "", "", ""))
    return rows


def print_table(rows: list[tuple[str, str, str, str, str, str]], title: str) -> None:
    heads = ("metric", "median", "max", "budget", "median/budget", "result")
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        print(title)
        for row in (heads, *rows):
            print(f"{row[0]:<70}{row[1]:>10}{row[2]:>10}  {row[3]:<10}{row[4]:>14}  {row[5]}")
        return
    table = Table(title=title)
    for h in heads:
        table.add_column(h, justify="left" if h in ("metric", "budget", "result") else "right")
    for row in rows:
        style = {"PASS": "green", "FAIL": "red"}.get(row[5], "")
        table.add_row(*row[:5], f"[{style}]{row[5]}[/]" if style else row[5])
    Console(width=140).print(table)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="200 hosts, 3 loads")
    p.add_argument("--hosts", type=int, help="BareMetalHosts to create (default 1000)")
    p.add_argument("--runs", type=int, help="timed page loads (default 5)")
    p.add_argument("--concurrency", type=int, default=32, help="concurrent creates")
    p.add_argument("--json", type=Path, metavar="PATH", help="write the results as JSON")
    p.add_argument("--screenshot", type=Path, metavar="PNG",
                   help="save the hosts page as the last timed load shows its first screen")
    p.add_argument("--tmpdir", type=Path, help="where the data dir goes (default $TMPDIR)")
    a = p.parse_args(argv)
    a.hosts = max(1, a.hosts if a.hosts is not None else (200 if a.quick else 1000))
    a.runs = max(1, a.runs if a.runs is not None else (3 if a.quick else 5))
    return a


def _sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _sigterm)
    results: Obj = {
        "benchmark": "racksmith console hosts page",
        "date": dt.datetime.now(dt.UTC).isoformat(),
        "machine": {"nproc": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform(), "loadavg_start": os.getloadavg()},
        "params": {"hosts": args.hosts, "runs": args.runs, "viewport": VIEWPORT,
                   "budget_s": BUDGET_S, "quick": args.quick},
        "problems": []}
    failed = ""
    with tempfile.TemporaryDirectory(prefix="racksmith-bench-console-", dir=args.tmpdir) as d:
        tmp = Path(d)
        print("starting racksmith up --no-ironic ...", flush=True)
        server = start_racksmith(tmp / "data")
        try:
            print(f"server {server.url} (pid {server.proc.pid}); creating {args.hosts} "
                  "BareMetalHosts with status ...", flush=True)
            results["create"] = asyncio.run(create_hosts(server, args.hosts, args.concurrency))
            print(f"  {results['create']['hosts']} hosts in {results['create']['seconds']} s: "
                  f"{results['create']['states']}", flush=True)
            print(f"chromium: {args.runs} fresh loads of #/hosts ...", flush=True)
            browser_phase(server, args.hosts, args.runs, args.runs, results, args.screenshot)
            print(f"kubectl get baremetalhosts -A x {args.runs} ...", flush=True)
            kubectl_phase(server, args.runs, tmp / "kube-cache", results)
        except Exception as exc:
            failed = f"{type(exc).__name__}: {exc}"
        finally:
            rc = server.stop()
            results["machine"]["loadavg_end"] = os.getloadavg()
            results["server"] = {"exit_code": rc,
                                 "log_errors": server_log_problems(server.log())[:20]}
    if failed:
        results["problems"].append(f"harness: {failed}")
    results["problems"] += [f"server log: {ln}" for ln in results["server"]["log_errors"]]
    title = (f"racksmith console, hosts page in headless chromium "
             f"{results.get('chromium', '')} — {os.cpu_count()} cores"
             f"{' (quick)' if args.quick else ''}")
    print_table(build_rows(results, args.hosts), title)
    la = results["machine"]
    print(f"viewport {VIEWPORT['width']}x{VIEWPORT['height']}; {args.runs} timed loads after "
          f"one warm-up; load average before/after: {la['loadavg_start'][0]:.2f} / "
          f"{la['loadavg_end'][0]:.2f}; times are ms from navigation start (performance.now())")
    for prob in results["problems"]:
        print(f"PROBLEM: {prob}")
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
        print(f"results written to {args.json}")
    return 1 if failed or not results.get("loads") else 0


if __name__ == "__main__":
    sys.exit(main())

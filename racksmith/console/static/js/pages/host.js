// Owns: the host page (#/hosts/<ns>/<name>) — one BareMetalHost live: its
// status (with a moving bar during a long operation), the inspected
// inventory (its BareMetalHostInventory: same name, spec.hostRef, owned by
// the host; else status.hardware), its profile and the disk layout rendered for it, the
// operation history, conditions and events, and the Power on/off action
// (a merge patch of spec.online). Never shows BMC credentials.

import { ApiError, R, get, inNamespace, mergePatch, objectPath } from "../api.js";
import {
  age, badge, bytes, condition, duration, facts, fill, h, link, progress, section, table, time, uid,
} from "../dom.js";
import { follow, informer } from "../informer.js";
import {
  eventTime, eventsNewestFirst, hostError, hostOperation, hostPower, hostState,
} from "../model.js";

const MAX_EVENTS = 200;
const OPERATIONS = [["register", "Register"], ["inspect", "Inspect"],
                    ["provision", "Provision"], ["deprovision", "Deprovision"]];
// Power changes wait while the host's disks are being written or wiped.
const POWER_LOCKED = ["provisioning", "deprovisioning", "powering off before delete", "deleting"];

const muted = (text) => h("span", { class: "muted" }, text);
const ago = (ts) => (ts ? h("span", { title: time(ts) }, `${age(ts)} ago`) : muted("—"));
const val = (col, v) => h("span", { "data-col": col }, v === undefined || v === null || v === "" ? "—" : v);

/** A BMC URL without any user:password@ part. */
const bmcAddress = (addr) => (addr ? String(addr).replace(/^([a-z0-9+.-]+:\/\/)[^/@]*@/i, "$1") : "");

function powerBlocker(host) {
  if ((host.metadata || {}).deletionTimestamp) return `Host ${host.metadata.name} is being deleted.`;
  const st = hostState(host);
  if (POWER_LOCKED.includes(st)) {
    return `Host ${host.metadata.name} is ${st}: power changes wait until it finishes.`;
  }
  return "";
}

// --- sections ---------------------------------------------------------------

function statusFacts(host) {
  const s = host.status || {};
  const spec = host.spec || {};
  const ref = spec.consumerRef;
  const ns = host.metadata.namespace;
  const consumer = !ref || !ref.name ? null : ref.kind === "Machine"
    ? link(`#/machines/${ref.namespace || ns}/${ref.name}`, ref.name)
    : `${ref.kind || ""}/${ref.name}`;
  const err = hostError(host);
  const prov = s.provisioning || {};
  return h("div", { class: "cols-2" },
    facts([
      ["Provisioning state", val("state", hostState(host) ? badge(hostState(host)) : "")],
      ["Operational status", val("operationalStatus", s.operationalStatus ? badge(s.operationalStatus) : "")],
      ["Powered on", val("power", hostPower(host))],
      ["Online (desired)", val("online", spec.online ? "on" : "off")],
      ["Consumer", val("consumer", consumer)],
      ["Error", val("error", err ? h("span", { class: "tone-err" }, err) : muted("none"))],
      ["Error count", val("errorCount", String(s.errorCount || 0))],
      ["Last updated", ago(s.lastUpdated)],
    ]),
    facts([
      ["BMC address", val("bmc", spec.bmc ? h("code", {}, bmcAddress(spec.bmc.address)) : "")],
      ["Boot MAC", val("bootMAC", spec.bootMACAddress ? h("code", {}, spec.bootMACAddress) : "")],
      ["Boot mode", val("bootMode", prov.bootMode || spec.bootMode)],
      ["Profile", val("profile", hostProfile(host))],
      ["Image", val("image", (prov.image || spec.image || {}).url)],
      ["Rack", val("rack", (host.metadata.labels || {})["metal.racksmith.io/rack"])],
      ["Description", spec.description],
    ]));
}

function inventory(host, inv) {
  const hw = (inv && (inv.status || {}).hardware) || ((host.status || {}).hardware);
  if (!hw) return [muted("Not inspected yet: the inventory appears after inspection.")];
  const sys = hw.systemVendor || {};
  const bios = (hw.firmware || {}).bios || {};
  const cpu = hw.cpu || {};
  const from = inv && (inv.status || {}).hardware
    ? h("p", { class: "hint inv-source" }, `BareMetalHostInventory ${inv.metadata.name}`,
        inv.status.inspectedAt ? `, inspected ${age(inv.status.inspectedAt)} ago` : "",
        inv.status.source ? ` by ${inv.status.source}` : "", ".")
    : h("p", { class: "hint inv-source" }, "From the host's status.hardware (no BareMetalHostInventory).");
  const cpuText = [cpu.count ? `${cpu.count} × ` : "", cpu.model || "",
    cpu.arch ? ` (${cpu.arch}` : "", cpu.clockMegahertz ? `, ${cpu.clockMegahertz} MHz` : "",
    cpu.arch ? ")" : ""].join("");
  return [
    from,
    h("div", { class: "cols-2" },
      facts([
        ["System vendor", val("vendor", sys.manufacturer)],
        ["Model", val("model", sys.productName)],
        ["Serial number", val("serial", sys.serialNumber)],
        ["BIOS", [bios.vendor, bios.version, bios.date].filter(Boolean).join(" ")],
      ]),
      facts([
        ["CPU", val("cpu", cpuText)],
        ["RAM", val("ram", hw.ramMebibytes ? bytes(hw.ramMebibytes * 1024 * 1024) : "")],
        ["Hostname", hw.hostname],
      ])),
    h("h3", {}, "NICs"),
    table({ label: "NICs", rows: hw.nics || [], rowKey: (n) => n.name || n.mac, empty: "No NIC found.",
      columns: [
        { key: "name", title: "Name", render: (n) => n.name || "" },
        { key: "mac", title: "MAC", render: (n) => (n.mac ? h("code", {}, n.mac) : "") },
        { key: "model", title: "Model", render: (n) => n.model || "" },
        { key: "ip", title: "IP", render: (n) => n.ip || "" },
        { key: "speed", title: "Speed", render: (n) => (n.speedGbps ? `${n.speedGbps} Gbit/s` : "") },
        { key: "vlans", title: "VLANs", render: (n) => [
          n.vlanId !== undefined && n.vlanId !== null ? `native ${n.vlanId}` : "",
          ...(n.vlans || []).map((v) => (v.name ? `${v.id} (${v.name})` : String(v.id)))]
          .filter(Boolean).join(", ") },
        { key: "pxe", title: "PXE", render: (n) => (n.pxe ? "yes" : "") },
      ] }),
    h("h3", {}, "Disks"),
    table({ label: "Disks", rows: hw.storage || [], rowKey: (d) => d.name || d.serialNumber,
      empty: "No disk found.",
      columns: [
        { key: "name", title: "Device", render: (d) => (d.name ? h("code", {}, d.name) : "") },
        { key: "type", title: "Type", render: (d) => d.type || "" },
        { key: "size", title: "Size", render: (d) => bytes(d.sizeBytes) },
        { key: "vendor", title: "Vendor", render: (d) => d.vendor || "" },
        { key: "model", title: "Model", render: (d) => d.model || "" },
        { key: "serial", title: "Serial", render: (d) => d.serialNumber || "" },
        { key: "wwn", title: "WWN", render: (d) => d.wwnWithExtension || d.wwn || "" },
      ] }),
  ];
}

// Racksmith's profile annotation (Metal3's kind carries Metal3's fields only).
const PROFILE_ANNOTATION = "baremetalhost.metal.racksmith.io/profile";

function hostProfile(host) {
  return ((host.metadata || {}).annotations || {})[PROFILE_ANNOTATION];
}

function profileSummary(host, fetchedProfile) {
  const name = hostProfile(host);
  const hostCond = condition(host, "ProfileValid");
  const out = [];
  if (!name) {
    out.push(h("p", { class: "muted" }, "No profile: no baremetalhost.metal.racksmith.io/profile annotation, the image is written " +
      "without a custom disk layout."));
  } else {
    const prof = fetchedProfile.value;
    const spec = (prof && prof.spec) || {};
    const valid = prof ? condition(prof, "Valid") : null;
    const kp = spec.kernelParameters || {};
    const count = (xs, word) => `${(xs || []).length} ${word}`;
    out.push(facts([
      ["Profile", val("profileName", name)],
      ["Found", fetchedProfile.error ? h("span", { class: "tone-err" }, `Could not read it: ${fetchedProfile.error}`)
        : prof === undefined ? muted("Loading…")
        : prof ? "yes" : h("span", { class: "tone-err" },
          `BareMetalHostProfile ${host.metadata.namespace}/${name} not found`)],
      prof && ["Valid", valid ? h("span", {}, badge(valid.status), " ", valid.message || valid.reason || "")
        : muted("not checked yet")],
      prof && ["Layout", [count(spec.devices, "devices"),
        count((spec.devices || []).flatMap((d) => d.partitions || []), "partitions"),
        count(spec.softRaidDevices, "RAID arrays"), count(spec.volumeGroups, "volume groups"),
        count(spec.logicalVolumes, "logical volumes"), count(spec.fileSystems, "file systems")].join(", ")],
      prof && ["Mounts", (spec.fileSystems || []).map((f) => `${f.mountPoint || f.fileSystem} (${f.fileSystem} on ${f.source})`).join(", ")],
      prof && ["Kernel", [(kp.cmdline || []).join(" "),
        Object.entries(kp.sysctl || {}).map(([k, v]) => `${k}=${v}`).join(" "),
        (kp.modules || []).length ? `modules ${(kp.modules || []).join(", ")}` : ""].filter(Boolean).join("; ")],
      prof && ["Huge pages", (spec.hugePages || []).map((p) => `${p.count} × ${p.size}`).join(", ")],
      hostCond && ["Fits this host", h("span", { "data-col": "profileValid" }, badge(hostCond.status),
        " ", hostCond.message || hostCond.reason || "")],
    ]));
  }
  const layout = ((host.status || {}).provisioning || {}).diskLayout;
  out.push(h("h3", {}, "Rendered disk layout"));
  if (!layout) {
    out.push(muted("None: the layout is rendered from the profile when the host is provisioned."));
    return out;
  }
  out.push(renderLayout(layout));
  return out;
}

function renderLayout(layout) {
  const size = (x) => bytes(x.sizeBytes);
  const list = (xs) => (xs || []).join(", ");
  const part = (label, rows, columns) => (rows && rows.length
    ? [h("h3", {}, label), table({ label: `Layout ${label.toLowerCase()}`, rows, columns,
                                   rowKey: (r) => r.name || r.source })] : null);
  const kernel = layout.kernel || {};
  return h("div", { class: "layout-tables" },
    part("Disks", layout.devices, [
      { key: "name", title: "Device", render: (d) => h("code", {}, d.name) },
      { key: "type", title: "Type", render: (d) => d.type || "" },
      { key: "size", title: "Size", render: size },
      { key: "wipe", title: "Wipe", render: (d) => (d.wipe ? "yes" : "no") }]),
    part("Partitions", layout.partitions, [
      { key: "name", title: "Name", render: (p) => p.name },
      { key: "device", title: "On", render: (p) => h("code", {}, `${p.device} #${p.number}`) },
      { key: "start", title: "Start", render: (p) => bytes(p.startBytes) },
      { key: "size", title: "Size", render: size },
      { key: "flags", title: "Flags", render: (p) => list(p.flags) }]),
    part("Software RAID", layout.softRaidDevices, [
      { key: "name", title: "Name", render: (r) => r.name },
      { key: "level", title: "Level", render: (r) => r.level },
      { key: "devices", title: "Members", render: (r) => list(r.devices) },
      { key: "size", title: "Size", render: size }]),
    part("Volume groups", layout.volumeGroups, [
      { key: "name", title: "Name", render: (v) => v.name },
      { key: "devices", title: "Physical volumes", render: (v) => list(v.devices) },
      { key: "size", title: "Size", render: size }]),
    part("Logical volumes", layout.logicalVolumes, [
      { key: "name", title: "Name", render: (v) => v.name },
      { key: "vg", title: "Volume group", render: (v) => v.vg },
      { key: "size", title: "Size", render: size }]),
    part("File systems", layout.fileSystems, [
      { key: "mountPoint", title: "Mount point", render: (f) => f.mountPoint || muted("—") },
      { key: "fileSystem", title: "Type", render: (f) => f.fileSystem },
      { key: "source", title: "On", render: (f) => f.source },
      { key: "size", title: "Size", render: size },
      { key: "mountOpts", title: "Options", render: (f) => f.mountOpts || "" }]),
    (kernel.cmdline || []).length || Object.keys(kernel.sysctl || {}).length
      || (kernel.modules || []).length || (layout.hugePages || []).length
      ? [h("h3", {}, "Kernel"), facts([
        ["Command line", (kernel.cmdline || []).join(" ")],
        ["sysctl", Object.entries(kernel.sysctl || {}).map(([k, v]) => `${k}=${v}`).join(", ")],
        ["Modules", (kernel.modules || []).join(", ")],
        ["Huge pages", (layout.hugePages || []).map((p) => `${p.count} × ${p.size}`).join(", ")]])]
      : null);
}

function operationHistory(host) {
  const hist = (host.status || {}).operationHistory || {};
  const now = Date.now();
  const running = hostOperation(host);
  return table({
    label: "Operation history", rowKey: (r) => r[0],
    rows: OPERATIONS.map(([key, title]) => [key, title, hist[key] || {}]),
    columns: [
      { key: "operation", title: "Operation", render: (r) => r[1] },
      { key: "start", title: "Start", render: (r) => (r[2].start ? time(r[2].start) : muted("—")) },
      { key: "end", title: "End", render: (r) => (r[2].end ? time(r[2].end)
        : r[2].start && running && running.since === r[2].start ? badge("running", "busy") : muted("—")) },
      { key: "duration", title: "Duration", render: (r) => (!r[2].start ? ""
        : duration((r[2].end ? Date.parse(r[2].end) : now) - Date.parse(r[2].start))
          + (r[2].end ? "" : " so far")) },
    ],
  });
}

function conditionsTable(host) {
  return table({
    label: "Conditions", rows: (host.status || {}).conditions || [], rowKey: (c) => c.type,
    empty: "No condition reported yet.",
    columns: [
      { key: "type", title: "Type", render: (c) => c.type },
      { key: "status", title: "Status", render: (c) => badge(c.status) },
      { key: "reason", title: "Reason", render: (c) => c.reason || "" },
      { key: "message", title: "Message", render: (c) => c.message || "" },
      { key: "since", title: "Since", render: (c) => ago(c.lastTransitionTime) },
    ],
  });
}

function eventsTable(events) {
  const rows = eventsNewestFirst(events);
  return [
    rows.length > MAX_EVENTS ? h("p", { class: "hint" }, `The newest ${MAX_EVENTS} of ${rows.length}.`) : null,
    table({
      label: "Events", rows: rows.slice(0, MAX_EVENTS), rowKey: (e) => e.metadata.name,
      empty: "No event for this host.",
      columns: [
        { key: "type", title: "Type", render: (e) => badge(e.type, e.type === "Warning" ? "err" : "plain") },
        { key: "reason", title: "Reason", render: (e) => e.reason || "" },
        { key: "message", title: "Message", render: (e) => e.message || "" },
        { key: "count", title: "Count", render: (e) => String(e.count || 1) },
        { key: "lastSeen", title: "Last seen", render: (e) => ago(eventTime(e)) },
      ],
    }),
  ];
}

// --- page -------------------------------------------------------------------

export function mount(el, params, ctx) {
  const [ns, name] = params;
  const key = `${ns}/${name}`;
  // Two watches only (the browser has 6 connections per server over
  // HTTP/1.1): the hosts (shared with the list) and this host's events.
  // The inventory and the profile are read again when the host says they
  // may have changed (inspection ended, profile or its check changed).
  const hostInf = informer(R.hosts);
  const evInf = informer(R.events, { fieldSelector: `involvedObject.name=${name}` });
  const inv = fetched(() => [R.inventories, name]);
  const prof = fetched(() => [R.profiles, hostProfile(current)]);

  // The action area is built once (focus and a pending request survive renders).
  const reasonId = uid("power-reason");
  const errId = uid("power-error");
  const powerBtn = h("button", { type: "button", class: "secondary",
                                 "aria-describedby": `${reasonId} ${errId}` }, "Power off");
  const powerReason = h("span", { id: reasonId, class: "muted" });
  const powerErr = h("div", { id: errId, class: "form-error" });
  let pending = false;
  let current = null;
  powerBtn.addEventListener("click", async () => {
    if (!current || pending) return;
    const want = !(current.spec || {}).online;
    pending = true;
    render();
    try {
      await mergePatch(objectPath(R.hosts, ns, name), { spec: { online: want } });
      powerErr.removeAttribute("role");
      powerErr.textContent = "";
      ctx.notify(`${want ? "Powering on" : "Powering off"} host ${name}.`, "ok");
    } catch (e) {
      powerErr.setAttribute("role", "alert");
      powerErr.textContent = `Could not power ${want ? "on" : "off"} ${name}: ` +
        (e instanceof ApiError ? e.describe() : String(e.message || e));
    } finally {
      pending = false;
      render();
    }
  });

  const notice = h("div");
  const subtitle = h("p", { class: "muted subtitle" }, `BareMetalHost in namespace ${ns}`);
  const actions = h("div", { class: "power-actions" }, powerBtn, powerReason);
  const statusBox = h("div");
  const opBox = h("div", { class: "op-progress" });
  const invBox = h("div");
  const profBox = h("div");
  const histBox = h("div");
  const condBox = h("div");
  const evBox = h("div");
  const body = h("div", { hidden: true },
    actions, powerErr,
    section("Status", statusBox, opBox),
    section("Inventory", invBox),
    section("Profile", profBox),
    section("Operation history", histBox),
    section("Conditions", condBox),
    section("Events", evBox));
  el.append(h("h1", {}, name), subtitle, notice, body);

  // The operation bar is kept across renders so its animation runs smoothly.
  let opBar = null;
  let opText = null;
  let opState = "";
  const renderOp = (host) => {
    const op = hostOperation(host);
    if (!op) { fill(opBox); opBar = null; opState = ""; opBox.hidden = true; return; }
    const label = op.since ? `${op.state} since ${age(op.since)}` : op.state;
    opBox.hidden = false;
    if (!opBar || opState !== op.state) {
      opState = op.state;
      opBar = progress(null, label);
      opText = h("span", {}, label);
      fill(opBox, opBar, opText);
    } else {
      opBar.setAttribute("aria-label", label);
      opText.textContent = label;
    }
  };

  const render = () => {
    const host = hostInf.get(key);
    current = host || null;
    const errors = [hostInf, evInf].filter((i) => i.error).map((i) => i.error);
    if (!host) {
      body.hidden = true;
      fill(notice, errors.length ? h("p", { role: "alert", class: "form-error" }, errors[0])
        : !hostInf.synced ? muted("Loading…")
        : h("p", { role: "status" }, `Host ${ns}/${name} not found (it may have been deleted). `,
            link("#/hosts", "All hosts")));
      return;
    }
    fill(notice, errors.length ? h("p", { role: "alert", class: "form-error" },
                                   `Live updates interrupted: ${errors[0]}`) : null);
    body.hidden = false;
    const online = !!(host.spec || {}).online;
    const blocker = powerBlocker(host);
    powerBtn.textContent = pending ? (online ? "Powering off…" : "Powering on…")
      : online ? "Power off" : "Power on";
    powerBtn.disabled = pending || !!blocker;
    if (blocker) powerBtn.setAttribute("title", blocker); else powerBtn.removeAttribute("title");
    const power = hostPower(host);
    powerReason.textContent = blocker
      || (power && power !== (online ? "on" : "off")
        ? `Asked to be ${online ? "on" : "off"}; the BMC still reports ${power}.` : "");

    fill(statusBox, statusFacts(host));
    renderOp(host);
    const hist = (host.status || {}).operationHistory || {};
    inv.want(`${host.metadata.uid} ${JSON.stringify(hist.inspect || {})} ${hostState(host)}`);
    const pname = hostProfile(host);
    prof.want(pname ? `${pname} ${JSON.stringify(condition(host, "ProfileValid") || {})} ${hostState(host)}` : "");
    fill(invBox, inventory(host, inv.value));
    fill(profBox, profileSummary(host, prof));
    fill(histBox, operationHistory(host));
    fill(condBox, conditionsTable(host));
    // This host's events (not those of a Machine of the same name, nor of
    // an earlier host of this name: the uid must match when recorded).
    const events = evInf.list().filter((e) => {
      const o = e.involvedObject || {};
      return o.kind === "BareMetalHost" && (o.namespace || e.metadata.namespace) === ns
        && (!o.uid || o.uid === host.metadata.uid);
    });
    fill(evBox, !evInf.synced && !events.length ? muted("Loading…") : eventsTable(events));
  };

  const unfollow = follow([hostInf, evInf], render);
  const ticker = setInterval(() => { if (current) renderOp(current); }, 5000);
  return () => { clearInterval(ticker); unfollow(); inv.stop(); prof.stop(); };

  /**
   * One object read with GET: want(key) reads it again when `key` changes
   * ("" = nothing to read); .value is the object, null when absent,
   * undefined while loading; .error the last failure. Renders on arrival.
   * Read as a list by metadata.name, so an absent object is not a 404
   * (which the browser would log as an error).
   */
  function fetched(pathFn) {
    const f = { key: null, value: undefined, error: "", seq: 0, stopped: false };
    f.want = (k) => {
      if (k === f.key) return;
      f.key = k;
      const seq = ++f.seq;
      if (!k) { f.value = null; f.error = ""; return; }
      const [collection, objName] = pathFn();
      const q = new URLSearchParams({ fieldSelector: `metadata.name=${objName}` });
      get(`${inNamespace(collection, ns)}?${q}`).then((list) => {
        if (seq !== f.seq || f.stopped) return;
        f.value = (list.items || [])[0] || null;
        f.error = "";
        render();
      }, (e) => {
        if (seq !== f.seq || f.stopped) return;
        f.error = String(e.message || e);
        render();
      });
    };
    f.stop = () => { f.stopped = true; };
    return f;
  }
}

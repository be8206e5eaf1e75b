// Owns: the machine detail page (#/machines/<ns>/<name>[/volumes|/events]):
// tabs Overview (phase, live deploy progress — the host's state while
// Provisioning, the LCMMachine's state items while Deploying —, facts,
// conditions, state items, recent events, "Delete machine"), Volumes (the
// node's volumes: volumes-tab.js) and Events (every event of the machine).

import { ApiError, N, clusterKeyOf, objectPath, R, remove } from "../api.js";
import { denied } from "../permissions.js";
import { age, badge, condition, facts, h, link, progress, section, table, tabs, time } from "../dom.js";
import { clusterInformer, follow, informer } from "../informer.js";
import { machineProgress } from "../model.js";
import { hostOf, machinePhase, morph, nodeBadge } from "./machines.js";
import { mountVolumes } from "./volumes-tab.js";

const RECENT_EVENTS = 8;

const evTime = (e) => e.lastTimestamp || e.eventTime || (e.series || {}).lastObservedTime ||
  e.firstTimestamp || e.metadata.creationTimestamp;

/** Events of the machine (and of its same-named Node, IpamHost, LCMMachine), newest first. */
function machineEvents(inf, ns) {
  return inf.list().filter((e) => {
    const o = e.involvedObject || {};
    return !o.namespace || o.namespace === ns;
  }).sort((a, b) => String(evTime(b)).localeCompare(String(evTime(a))) ||
    Number(b.metadata.resourceVersion || 0) - Number(a.metadata.resourceVersion || 0));
}

function eventsTable(events, empty) {
  return table({
    label: "Events", rowKey: (e) => e.metadata.name, rows: events, empty,
    columns: [
      { key: "time", title: "Last seen", render: (e) => h("time", { class: "nowrap", datetime: evTime(e), title: time(evTime(e)) },
                                                            `${age(evTime(e))} ago`) },
      { key: "type", title: "Type", render: (e) => badge(e.type, e.type === "Warning" ? "err" : "plain") },
      { key: "reason", title: "Reason", render: (e) => e.reason || "" },
      { key: "object", title: "Object", render: (e) => h("span", { class: "nowrap" },
        `${((e.involvedObject || {}).kind || "").toLowerCase()}/${(e.involvedObject || {}).name || ""}`) },
      { key: "message", title: "Message", render: (e) => e.message || "" },
      { key: "count", title: "Count", render: (e) => String(e.count || (e.series || {}).count || 1) },
    ],
  });
}

function stateItemsTable(lcm) {
  const spec = ((lcm.spec || {}).stateItems) || [];
  const st = new Map((((lcm.status || {}).items) || []).map((i) => [i.name, i]));
  return table({
    label: "State items", rowKey: (i) => i.name, rows: spec,
    empty: "The release gives this machine no state item.",
    columns: [
      { key: "name", title: "Item", render: (i) => h("span", {}, i.name,
        i.requiresReboot ? h("span", { class: "hint" }, " (reboot)") : null) },
      { key: "phase", title: "Phase", render: (i) => i.phase },
      { key: "state", title: "State", render: (i) => badge((st.get(i.name) || {}).state || "Pending") },
      { key: "changed", title: "Changed", render: (i) => {
        const c = (st.get(i.name) || {}).changed;
        return c === true ? "yes" : c === false ? "no" : "";
      } },
      { key: "error", title: "Error", render: (i) => {
        const e = (st.get(i.name) || {}).error;
        return e ? h("span", { class: "tone-err" }, e) : "";
      } },
      { key: "finished", title: "Finished at", render: (i) => time((st.get(i.name) || {}).finishedAt) },
    ],
  });
}

function conditionsTable(m) {
  const conds = ((m.status || {}).conditions) || [];
  return table({
    label: "Conditions", rowKey: (c) => c.type, rows: conds, empty: "No condition reported yet.",
    columns: [
      { key: "type", title: "Condition", render: (c) => c.type },
      { key: "status", title: "Status", render: (c) => badge(c.status) },
      { key: "reason", title: "Reason", render: (c) => c.reason || "" },
      { key: "message", title: "Message", render: (c) => c.message || "" },
      { key: "since", title: "Since", render: (c) => h("span", { title: time(c.lastTransitionTime) },
                                                       age(c.lastTransitionTime)) },
    ],
  });
}

export function mount(el, params, ctx) {
  const [ns, name, tab] = params;
  const base = `#/machines/${encodeURIComponent(ns)}/${encodeURIComponent(name)}`;
  const current = tab ? `${base}/${tab}` : base;
  el.append(
    h("h1", {}, name),
    h("p", { class: "muted" }, `Machine in namespace ${ns}. `, link("#/machines", "All machines")),
    tabs("Machine sections", [
      { hash: base, title: "Overview" },
      { hash: `${base}/volumes`, title: "Volumes" },
      { hash: `${base}/events`, title: "Events" },
    ], current));
  const body = h("div");
  el.append(body);
  if (tab === "volumes") return mountVolumes(body, ns, name, ctx);

  const key = `${ns}/${name}`;
  const machines = informer(R.machines);
  const events = informer(R.events, { fieldSelector: `involvedObject.name=${name}` });

  if (tab === "events") {
    const box = h("div");
    body.append(section("Events", h("p", { class: "hint" },
      "Events of the machine and of its Node, IpamHost and LCMMachine (same name), newest first."), box));
    return follow([events], () => morph(box, !events.synced && !events.items.size
      ? h("p", { class: "muted" }, "Loading…")
      : eventsTable(machineEvents(events, ns), "No event for this machine.")));
  }

  // --- overview ---
  const infs = [machines, events, informer(R.hosts), informer(R.lcmMachines)];
  const [, , hosts, lcms] = infs;
  // The Node lives in the machine's cluster's own API: followed once the
  // machine (and so its cluster) is known.
  let nodes = null;
  let unfollowNodes = () => {};
  const phaseBox = h("span");
  const progressBox = h("div", { class: "deploy deploy-big" });
  const progressLabel = h("p", { class: "deploy-label", role: "status", "aria-live": "polite" });
  const deleteWhy = h("span", { id: "machine-delete-why", class: "hint" });
  const deleteErr = h("div", { class: "form-error", id: "machine-delete-error" });
  const deleteBtn = h("button", { type: "button", class: "danger" }, "Delete machine");
  const gone = h("div");
  const factsBox = h("div");
  const condBox = h("div");
  const itemsBox = h("div");
  const eventsBox = h("div");

  deleteBtn.addEventListener("click", async () => {
    const m = machines.get(key);
    if (!m || m.metadata.deletionTimestamp) return;
    const ok = window.confirm(`Delete machine ${name}?\n\nThe node is cordoned and drained, then removed ` +
      "from the cluster; its host is deprovisioned and released.");
    if (!ok) return;
    deleteBtn.disabled = true;
    deleteErr.textContent = "";
    try {
      await remove(objectPath(R.machines, ns, name));
      ctx.notify(`Deleting machine ${ns}/${name}: draining the node, then releasing the host.`);
    } catch (e) {
      deleteErr.setAttribute("role", "alert");
      deleteErr.textContent = `Could not delete the machine: ${e instanceof ApiError ? e.describe() : e.message || e}`;
      deleteBtn.disabled = false;
    }
  });

  body.append(
    gone,
    h("section", { class: "card", "aria-labelledby": "machine-status-title" },
      h("div", { class: "page-head" }, h("h2", { id: "machine-status-title" }, "Status"), phaseBox,
        h("span", { class: "spacer" }), deleteWhy, deleteBtn),
      deleteErr,
      h("h3", { id: "deploy-title" }, "Deploy progress"), progressBox, progressLabel,
      factsBox),
    section("State items", itemsBox),
    section("Recent events", eventsBox,
      h("p", {}, link(`${base}/events`, "All events of this machine"))),
    section("Conditions", condBox));

  const render = () => {
    const m = machines.get(key);
    if (!m) {
      const msg = machines.synced
        ? h("p", { role: "alert" }, `Machine ${key} does not exist (or was just deleted). `,
            link("#/machines", "Back to the machine list"))
        : h("p", { class: "muted" }, "Loading…");
      morph(gone, msg);
      body.querySelectorAll("section").forEach((s) => { s.hidden = true; });
      return;
    }
    morph(gone);
    body.querySelectorAll("section").forEach((s) => { s.hidden = false; });
    const st = m.status || {};
    const host = hostOf(m, hosts);
    const lcm = lcms.get(key);
    if (!nodes && clusterKeyOf(m)) {
      nodes = clusterInformer(clusterKeyOf(m), N.nodes);
      unfollowNodes = follow([nodes], render);
    }
    const node = nodes ? nodes.get((st.nodeRef || {}).name || name) : undefined;
    const p = machineProgress(m, host, lcm);
    morph(phaseBox, h("span", { "data-col": "phase" }, badge(machinePhase(m))));
    morph(progressBox, progress(p.percent, "Deploy progress"));
    if (progressLabel.textContent !== p.label) progressLabel.textContent = p.label;

    const deleting = !!m.metadata.deletionTimestamp;
    const why = deleting ? "Already being deleted"
      : denied("delete", "cluster.racksmith.io", "machines", ns, () => render());
    deleteBtn.disabled = !!why;
    if (why) {
      deleteBtn.title = why;
      deleteBtn.setAttribute("aria-describedby", deleteWhy.id);
      if (deleteWhy.textContent !== why) deleteWhy.textContent = why;
    } else {
      deleteBtn.removeAttribute("title");
      deleteBtn.removeAttribute("aria-describedby");
      deleteWhy.textContent = "";
    }

    const ref = st.hostRef;
    const ready = condition(m, "Ready");
    morph(factsBox, facts([
      ["Cluster", `${ns}/${m.spec.clusterName}`],
      ["Roles", (m.spec.roles || []).join(", ")],
      ["Host", ref ? link(`#/hosts/${encodeURIComponent(ref.namespace || ns)}/${encodeURIComponent(ref.name)}`,
                          ref.name) : h("span", { class: "muted" }, "none claimed yet")],
      ["Host state", host ? badge(((host.status || {}).provisioning || {}).state) : null],
      ["Node", h("span", {}, (st.nodeRef || {}).name || name, " ", nodeBadge(node, !!nodes && nodes.synced))],
      ["Addresses", (st.addresses || []).length
        ? h("ul", { class: "plain" }, st.addresses.map((a) => h("li", {}, `${a.type}: ${a.address}`)))
        : null],
      ["Release", st.release && st.release !== (lcm && lcm.spec.release)
        ? `${st.release} (rendering ${lcm ? lcm.spec.release : "?"})`
        : st.release || (lcm ? `${lcm.spec.release} (deploying)` : null)],
      ["Agent", lcm && lcm.status ? `${lcm.status.phase || "Pending"}` +
        (lcm.status.heartbeat ? `, last heartbeat ${age(lcm.status.heartbeat)} ago` : "") : null],
      ["Ready", ready ? `${ready.status}: ${ready.message || ready.reason || ""}` : null],
      ["Created", h("span", { title: time(m.metadata.creationTimestamp) },
                    `${age(m.metadata.creationTimestamp)} ago`)],
    ]));
    morph(condBox, conditionsTable(m));
    morph(itemsBox, lcm ? stateItemsTable(lcm)
      : h("p", { class: "muted" }, lcms.synced
        ? "No LCMMachine yet: the state items are rendered once the machine has claimed a host."
        : "Loading…"));
    morph(eventsBox, !events.synced && !events.items.size ? h("p", { class: "muted" }, "Loading…")
      : eventsTable(machineEvents(events, ns).slice(0, RECENT_EVENTS), "No event for this machine yet."));
  };
  const unfollow = follow(infs, render);
  const tick = setInterval(render, 10000); // ages
  return () => { clearInterval(tick); unfollow(); unfollowNodes(); };
}

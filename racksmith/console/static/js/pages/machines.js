// Owns: the Machine list (#/machines) — every machine with its cluster,
// roles, phase, live deploy progress (host state while Provisioning, state
// items while Deploying), node readiness, host, release and age — and the
// small DOM "morph" the machine pages share: it updates what is on screen
// in place (rows keyed by data-name) so focus, scroll and progress-bar
// transitions survive live updates. Event handlers of morphed elements must
// depend only on stable keys (names), never on the object they were built from.

import { N, R, clusterKeyOf } from "../api.js";
import { age, badge, h, link, progress, table } from "../dom.js";
import { PerCluster, follow, informer } from "../informer.js";
import { machineProgress, nodeReady } from "../model.js";

// --- morph --------------------------------------------------------------------

const keyOfNode = (n) => (n.nodeType === 1 ? n.getAttribute("data-name") : null);

function compatible(a, b) {
  if (a.nodeType !== b.nodeType) return false;
  return a.nodeType !== 1 || a.tagName === b.tagName;
}

function patchNode(a, b) {
  if (a.nodeType !== 1) {
    if (a.nodeValue !== b.nodeValue) a.nodeValue = b.nodeValue;
    return;
  }
  for (const { name } of Array.from(a.attributes)) if (!b.hasAttribute(name)) a.removeAttribute(name);
  for (const { name, value } of Array.from(b.attributes)) {
    if (a.getAttribute(name) === value) continue;
    // CSP forbids inline style attributes; the CSSOM is allowed.
    if (name === "style") a.style.cssText = b.style.cssText;
    else a.setAttribute(name, value);
  }
  if ("disabled" in a && a.disabled !== b.disabled) a.disabled = b.disabled;
  morphChildren(a, Array.from(b.childNodes));
}

function morphChildren(parent, next) {
  const old = Array.from(parent.childNodes);
  const byKey = new Map();
  for (const n of old) { const k = keyOfNode(n); if (k !== null) byKey.set(k, n); }
  const used = new Set();
  let cursor = parent.firstChild;
  for (const nn of next) {
    const k = keyOfNode(nn);
    let match = null;
    if (k !== null) {
      const c = byKey.get(k);
      if (c && !used.has(c) && compatible(c, nn)) match = c;
    } else if (cursor && !used.has(cursor) && keyOfNode(cursor) === null && compatible(cursor, nn)) {
      match = cursor;
    }
    if (match) {
      used.add(match);
      if (match === cursor) cursor = cursor.nextSibling;
      else parent.insertBefore(match, cursor);
      patchNode(match, nn);
    } else {
      parent.insertBefore(nn, cursor);
    }
  }
  for (const n of old) if (!used.has(n)) n.remove();
}

/** Make `box`'s children look like `children`, changing only what differs. */
export function morph(box, ...children) {
  const tmp = h("div", {}, ...children);
  morphChildren(box, Array.from(tmp.childNodes));
  return box;
}

// --- shared bits of the machine pages -------------------------------------------

/** Phase of a machine as shown ("Pending" before the controller wrote one). */
export const machinePhase = (m) => ((m.status || {}).phase) || "Pending";

/** Ready / NotReady / — for a Node (or its absence; `synced` false: not known yet). */
export function nodeBadge(node, synced = true) {
  if (!node) return h("span", { class: "muted" }, synced ? "no node" : "…");
  const r = nodeReady(node);
  return badge(r === true ? "Ready" : r === false ? "NotReady" : "Unknown",
               r === true ? "ok" : r === false ? "err" : "plain");
}

/** A machine's BareMetalHost from the hosts informer (or undefined). */
export function hostOf(machine, hostsInf) {
  const ref = (machine.status || {}).hostRef;
  return ref ? hostsInf.get(`${ref.namespace || machine.metadata.namespace}/${ref.name}`) : undefined;
}

/** Deploy progress bar + its label text. */
export function progressCell(machine, host, lcm, label) {
  const p = machineProgress(machine, host, lcm);
  return h("div", { class: "deploy" }, progress(p.percent, label),
           h("span", { class: "hint" }, p.label));
}

// --- the list page -------------------------------------------------------------

export function mount(el, _params, _ctx) {
  const infs = { machines: informer(R.machines), hosts: informer(R.hosts),
                 lcm: informer(R.lcmMachines) };
  const nodes = new PerCluster(N.nodes); // each in its cluster's own API
  const summary = h("p", { class: "muted", role: "status", "aria-live": "polite" });
  const box = h("div");
  el.append(
    h("div", { class: "page-head" }, h("h1", {}, "Machines"), h("span", { class: "spacer" }),
      link("#/machines/new", "Create machine", { class: "button" })),
    summary,
    h("section", { class: "card", "aria-label": "Machine list" }, box));

  const render = () => {
    const machines = infs.machines.list().sort((a, b) =>
      a.metadata.namespace.localeCompare(b.metadata.namespace) ||
      a.metadata.name.localeCompare(b.metadata.name));
    const errors = Object.values(infs).map((i) => i.error).filter(Boolean);
    const ready = machines.filter((m) => machinePhase(m) === "Ready").length;
    morph(summary, !infs.machines.synced ? "Loading…"
      : `${machines.length} machine${machines.length === 1 ? "" : "s"}, ${ready} Ready` +
        (errors.length ? ` — live updates interrupted: ${errors[0]}` : ""));
    if (!infs.machines.synced && !machines.length) { morph(box, h("p", { class: "muted" }, "Loading…")); return; }
    morph(box, table({
      label: "Machines", rowKey: (m) => m.metadata.name, rows: machines,
      empty: "No machine yet: create one.",
      columns: [
        { key: "name", title: "Name", render: (m) =>
          link(`#/machines/${encodeURIComponent(m.metadata.namespace)}/${encodeURIComponent(m.metadata.name)}`,
               m.metadata.name) },
        { key: "cluster", title: "Cluster", render: (m) => m.spec.clusterName },
        { key: "roles", title: "Roles", render: (m) => (m.spec.roles || []).join(", ") },
        { key: "phase", title: "Phase", render: (m) => badge(machinePhase(m)) },
        { key: "progress", title: "Deploy progress", render: (m) => progressCell(m,
          hostOf(m, infs.hosts), infs.lcm.get(`${m.metadata.namespace}/${m.metadata.name}`),
          `Deploy progress of ${m.metadata.name}`) },
        { key: "node", title: "Node", render: (m) => {
          const inCluster = nodes.of(clusterKeyOf(m));
          return nodeBadge(inCluster && inCluster.get(((m.status || {}).nodeRef || {}).name || m.metadata.name),
                           nodes.syncedIn(clusterKeyOf(m)));
        } },
        { key: "host", title: "Host", render: (m) => {
          const ref = (m.status || {}).hostRef;
          if (!ref) return h("span", { class: "muted" }, "none yet");
          const ns = ref.namespace || m.metadata.namespace;
          return link(`#/hosts/${encodeURIComponent(ns)}/${encodeURIComponent(ref.name)}`, ref.name);
        } },
        { key: "release", title: "Release", render: (m) => (m.status || {}).release || "" },
        { key: "age", title: "Age", render: (m) => age(m.metadata.creationTimestamp) },
      ],
    }));
  };
  const unfollow = follow([...Object.values(infs), nodes], render);
  const tick = setInterval(render, 10000); // ages
  return () => { clearInterval(tick); unfollow(); };
}

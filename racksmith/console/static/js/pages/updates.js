// Owns: the Updates page. `#/updates`: every ClusterUpdatePlan (table
// "Update plans") and, below it, the newest plan not Completed expanded.
// `#/updates/<ns>/<name>`: one plan — header facts and firing alerts, the
// steps as a timeline with Commence/Pause buttons (JSON patches of
// spec.steps[i].commence, each guarded by a `test` of the step's id), the
// per-machine progress, the locks holding the update back, the
// NodeMaintenanceRequests and the plan's conditions. All live (informers;
// the locks and maintenance requests from the plan's cluster's own API,
// through the cluster proxy);
// each render is morphed into the page (nodes reused), and buttons carry
// data only (one delegated click handler), so a click, the focus and the
// progress transitions survive the plan's frequent status updates.

import { ApiError, N, jsonPatch, objectPath, R } from "../api.js";
import { denied } from "../permissions.js";
import { age, badge, duration, facts, fill, h, link, progress, section, table, time } from "../dom.js";
import { PerCluster, follow, informer } from "../informer.js";
import {
  blockingLocks, commenceableStepIds, commenceOps, pausableStepIds, planDone, planProgress,
  stepStarted, stepStatuses,
} from "../model.js";

const OWNER_LABEL = "lcm.racksmith.io/owner";

/** Tone of a plan, step or machine phase. */
const PHASE_TONE = { Completed: "ok", InProgress: "busy", Scheduled: "busy", Stuck: "err",
                     AutoPaused: "err", Failed: "err", NotStarted: "plain" };
const phaseBadge = (p) => badge(p || "NotStarted", PHASE_TONE[p || "NotStarted"] || "plain");

/** Tone of a node-flow state (Machine progress "state" column). */
const STATE_TONE = { Done: "ok", Blocked: "err", LockFailed: "err", WaitingForOther: "plain",
                     Requested: "busy", WaitingForLocks: "busy", Draining: "busy",
                     Applying: "busy", Rebooting: "busy", WaitingForNode: "busy",
                     Uncordoning: "busy" };
const stateBadge = (s) => badge(s, s ? STATE_TONE[s] || "plain" : undefined);

const planKey = (p) => `${p.metadata.namespace}/${p.metadata.name}`;
const planHash = (p) => `#/updates/${encodeURIComponent(p.metadata.namespace)}/${encodeURIComponent(p.metadata.name)}`;
const created = (p) => Date.parse(p.metadata.creationTimestamp || 0) || 0;

/** "21:03:04 (5m ago)" / "22:20:00 (in 12m)"; the date too when not today. */
function when(ts, now = Date.now()) {
  if (!ts) return "";
  const t = Date.parse(ts);
  const delta = t - now;
  const rel = delta >= 0 ? `in ${duration(delta)}` : `${duration(-delta)} ago`;
  const today = new Date(t).toDateString() === new Date(now).toDateString();
  const abs = today ? new Date(t).toLocaleTimeString(undefined, { hour12: false }) : time(ts);
  return h("span", { class: "when" }, h("time", { datetime: ts, title: time(ts) }, abs), " ",
           h("span", { class: "muted" }, `(${rel})`));
}

/** Why commencing is pointless now (alerts fire), or undefined. */
function firingReason(plan) {
  const alerts = ((plan.status || {}).firingAlerts) || [];
  return alerts.length ? `Alerts fire (${alerts.join(", ")}): the update controller would ` +
    "take the go-ahead back; resolve them first." : undefined;
}

function releaseNotes(text) {
  if (!text) return "";
  return /^https?:\/\//.test(text) ? h("a", { href: text, rel: "noopener noreferrer", target: "_blank" }, text)
    : h("span", { class: "pre-wrap" }, text);
}

/** Message of a failed write, with a hint when the plan changed meanwhile. */
function describeError(e) {
  if (!(e instanceof ApiError)) return `Request failed: ${e.message || e}`;
  const text = e.describe();
  if (e.code === 409 || (e.code === 422 && /test failed/.test(text))) {
    return `The plan changed since this page showed it (its steps were regenerated or edited); ` +
      `nothing was changed — check the steps below and try again.\n${text}`;
  }
  if (e.code === 404) return `The plan no longer exists.\n${text}`;
  return text;
}

export function mount(el, params, ctx) {
  const [ns, name] = params;
  const infs = {
    plans: informer(R.plans), clusterLocks: new PerCluster(N.clusterLocks),
    nodeLocks: new PerCluster(N.nodeLocks), nodeMaintenance: new PerCluster(N.nodeMaintenance),
    machines: informer(R.machines), // roles shown under each machine's name
  };
  // Write state survives re-renders: the request running per plan, errors
  // per "<plan>|<step id or 'plan'>", the button to give focus back to.
  const busy = new Map();
  const errors = new Map();
  let lastFocus = null; // data-focus of the last clicked action
  let focusUntil = 0; // ...given back (if focus fell to <body>) until then
  let stopped = false;

  const body = h("div");
  el.append(h("h1", {}, "Updates"), body);

  // --- writes -----------------------------------------------------------------

  async function setCommence(plan, ids, value, errKey, what) {
    // `plan` is the informer's current object: the ops' `test`s check that
    // the server still has these step ids at these indices.
    const key = planKey(plan);
    if (busy.has(key) || !ids.length) return;
    busy.set(key, errKey);
    errors.delete(errKey);
    render();
    try {
      await jsonPatch(objectPath(R.plans, plan.metadata.namespace, plan.metadata.name),
                      commenceOps(plan, ids, value));
      if (!stopped) ctx.notify(what);
    } catch (e) {
      errors.set(errKey, describeError(e));
    } finally {
      focusUntil = Date.now() + 3000; // the watch event of our write may follow
      busy.delete(key);
      if (!stopped) render();
    }
  }

  /**
   * What a button does, decided at click time from the plan as the
   * informer has it now (buttons carry data only: the DOM is morphed, so a
   * button element may outlive the render that made it).
   */
  function onAction(ev) {
    const btn = ev.target.closest("button[data-action]");
    if (!btn || btn.disabled || !body.contains(btn)) return;
    const plan = infs.plans.get(btn.getAttribute("data-plan"));
    if (!plan) return;
    lastFocus = btn.getAttribute("data-focus");
    const key = planKey(plan);
    const pname = plan.metadata.name;
    const stepId = btn.getAttribute("data-step");
    const step = (plan.spec.steps || []).find((x) => x.id === stepId);
    switch (btn.getAttribute("data-action")) {
      case "commence-all": {
        const ids = commenceableStepIds(plan);
        return setCommence(plan, ids, true, `${key}|plan`, `Commenced ${ids.length} step(s) of ${pname}.`);
      }
      case "pause-all": {
        const ids = pausableStepIds(plan);
        return setCommence(plan, ids, false, `${key}|plan`,
          `Paused ${pname}: ${ids.length} step(s) will not start; running steps finish.`);
      }
      case "commence":
        return step && setCommence(plan, [step.id], true, `${key}|${step.id}`,
          `Commenced step "${step.name}" of ${pname}.`);
      case "pause":
        return step && setCommence(plan, [step.id], false, `${key}|${step.id}`,
          `Paused step "${step.name}" of ${pname}: it will not start.`);
      default:
        return undefined;
    }
  }
  body.addEventListener("click", onAction);

  /** A button plus, when disabled, its reason (title + visible text). */
  function action({ focusKey, label, reason, act, plan, step, secondary }) {
    reason = denied("patch", "lcm.racksmith.io", "clusterupdateplans", plan.metadata.namespace,
                    () => { if (!stopped) render(); }) || reason;
    const reasonId = reason ? `why-${focusKey.replace(/[^A-Za-z0-9_-]/g, "_")}` : undefined;
    return h("span", { class: "action" },
      h("button", { type: "button", class: secondary ? "secondary" : "primary",
                    "data-focus": focusKey, "data-action": act, "data-plan": planKey(plan),
                    "data-step": step, disabled: !!reason, title: reason,
                    "aria-describedby": reasonId }, label),
      reason ? h("span", { id: reasonId, class: "hint" }, ` ${reason}`) : null);
  }

  const errorBox = (k) => (errors.has(k)
    ? h("div", { role: "alert", class: "form-error" }, errors.get(k)) : null);

  // --- views ------------------------------------------------------------------

  function header(plan, now) {
    const s = plan.status || {};
    const key = planKey(plan);
    const running = busy.get(key);
    const busyReason = running ? "Saving a change to this plan…" : undefined;
    const pausable = pausableStepIds(plan);
    const commenceable = commenceableStepIds(plan);
    const alerts = s.firingAlerts || [];
    const done = planDone(plan);
    const sec = section(`Update plan ${key}`,
      facts([
        ["Cluster", plan.spec.cluster],
        ["Release", h("span", { "data-col": "release" }, `${plan.spec.source} → ${plan.spec.target}`)],
        ["Phase", h("span", { "data-col": "phase" }, phaseBadge(s.phase))],
        ["Progress", h("div", { class: "plan-progress" },
          progress(planProgress(plan), `Progress of update ${plan.metadata.name}`))],
        ["Started", s.startedAt ? when(s.startedAt, now) : "not yet"],
        ["ETA", s.eta ? when(s.eta, now) : done ? "done" : "not estimated yet"],
        plan.spec.releaseNotes ? ["Release notes", releaseNotes(plan.spec.releaseNotes)] : null,
      ]),
      s.phase === "AutoPaused" || alerts.length ? h("div", { role: "alert", class: "alert-box" },
        h("b", {}, "Update paused automatically: "),
        alerts.length ? `alert${alerts.length > 1 ? "s" : ""} firing: ${alerts.join(", ")}. `
          : "an UpdateAutoPause alert fires. ",
        "Steps that had not started lost their go-ahead; machines already in progress finish. ",
        "Once the alerts are resolved, commence the steps again.") : null,
      done ? h("p", { class: "muted" }, "Every step is completed.") : h("div", { class: "row upd-actions" },
        action({ focusKey: `${key}|all`, label: "Commence all", act: "commence-all", plan,
          reason: busyReason || (commenceable.length ? firingReason(plan)
            : "Every step that is not completed is already commenced.") }),
        action({ focusKey: `${key}|pause`, label: "Pause update", act: "pause-all", plan,
          secondary: true,
          reason: busyReason || (pausable.length ? undefined
            : "No commenced step is waiting to start (steps already running finish).") })),
      errorBox(`${key}|plan`));
    // Where focus goes when the clicked action vanished and no other is enabled.
    const title = sec.querySelector("h2");
    title.setAttribute("tabindex", "-1");
    title.setAttribute("data-focus", `${key}|heading`);
    return sec;
  }

  function steps(plan, now) {
    const key = planKey(plan);
    const st = stepStatuses(plan);
    const running = busy.get(key);
    const items = (plan.spec.steps || []).map((step) => {
      const s = st.get(step.id) || {};
      const phase = s.phase || "NotStarted";
      const impact = step.impact || {};
      const dur = step.duration || {};
      const started = stepStarted(plan, step.id);
      const errKey = `${key}|${step.id}`;
      const focusKey = `${key}|step|${step.id}`;
      const reason = running ? "Saving a change to this plan…" : undefined;
      let control = null;
      if (!step.commence && phase !== "Completed") {
        control = action({ focusKey, label: `Commence ${step.name}`, act: "commence",
                           reason: reason || firingReason(plan),
                           plan, step: step.id });
      } else if (step.commence && !started) {
        control = action({ focusKey, label: `Pause ${step.name}`, reason, act: "pause",
                           plan, step: step.id, secondary: true });
      } else if (step.commence && phase !== "Completed") {
        control = h("span", { class: "hint" }, "Commenced and running: a started step finishes.");
      }
      const tone = PHASE_TONE[phase] || "plain";
      return h("li", { "data-name": step.id, class: `tone-${tone}` },
        h("div", { class: "row" },
          h("h3", {}, step.name),
          h("span", { "data-col": "phase" }, phaseBadge(phase)),
          h("span", { class: "muted", "data-col": "commence" },
            step.commence ? "commenced" : phase === "Completed" ? "" : "waiting for your go-ahead")),
        step.description ? h("p", { class: "step-desc" }, step.description) : null,
        facts([
          step.constraints ? ["Constraints", step.constraints] : null,
          ["Impact", `users: ${impact.users || "none"}, workloads: ${impact.workloads || "none"}` +
            (impact.info ? ` — ${impact.info}` : "")],
          ["Estimated duration", [dur.estimated || "unknown",
            dur.info ? h("span", { class: "muted" }, ` (${dur.info})`) : null]],
          ["Granularity", step.granularity || "cluster"],
          s.startedAt ? ["Started", when(s.startedAt, now)] : null,
          s.finishedAt ? ["Finished", when(s.finishedAt, now)] : null,
        ]),
        h("div", { class: "step-progress" },
          progress(typeof s.progress === "number" ? s.progress : phase === "Completed" ? 100 : 0,
                   `Progress of step ${step.name}`),
          s.message ? h("span", { "data-col": "message" }, s.message) : null),
        control ? h("div", { class: "row upd-actions" }, control) : null,
        errorBox(errKey));
    });
    return section("Steps", items.length
      ? h("ol", { class: "timeline", "aria-label": "Steps" }, items)
      : h("p", { class: "muted" }, "This plan has no steps."));
  }

  function machineProgress(plan, now) {
    const ns = plan.metadata.namespace;
    const stepName = new Map((plan.spec.steps || []).map((s) => [s.id, s.name]));
    const machineObjs = new Map(infs.machines.list()
      .filter((m) => m.metadata.namespace === ns).map((m) => [m.metadata.name, m]));
    return section("Machine progress", table({
      label: "Machine progress", rowKey: (m) => m.name,
      rows: ((plan.status || {}).machines) || [],
      empty: "The update controller has not scheduled any machine yet.",
      columns: [
        { key: "machine", title: "Machine", render: (m) => {
          const obj = machineObjs.get(m.name);
          return h("span", {}, link(`#/machines/${encodeURIComponent(ns)}/${encodeURIComponent(m.name)}`, m.name),
            obj ? h("div", { class: "hint" }, ((obj.spec || {}).roles || []).join(", ")) : null);
        } },
        { key: "step", title: "Step", render: (m) => stepName.get(m.stepId) || m.stepId || "" },
        { key: "phase", title: "Phase", render: (m) => phaseBadge(m.phase) },
        { key: "state", title: "State", render: (m) => stateBadge(m.state) },
        { key: "progress", title: "Progress", render: (m) =>
          progress(typeof m.progress === "number" ? m.progress : 0, `Update progress of ${m.name}`) },
        { key: "message", title: "Message", render: (m) => m.message || "" },
        { key: "started", title: "Started", render: (m) => (m.startedAt ? when(m.startedAt, now) : "") },
        { key: "finished", title: "Finished", render: (m) => (m.finishedAt ? when(m.finishedAt, now) : "") },
      ],
    }));
  }

  function locks(plan, now) {
    const ns = plan.metadata.namespace;
    const inCluster = `${ns}/${plan.spec.cluster}`;
    const nmrs = infs.nodeMaintenance.listIn(inCluster);
    const clusterLocks = infs.clusterLocks.listIn(inCluster);
    const nodeLocks = infs.nodeLocks.listIn(inCluster);
    const inMaintenance = new Set(nmrs.map((r) => (r.spec || {}).nodeName || r.metadata.name));
    for (const m of ((plan.status || {}).machines) || []) {
      if (m.phase === "InProgress" || m.phase === "Stuck") inMaintenance.add(m.name);
    }
    const lockObjs = new Map([
      ...clusterLocks.map((l) => [`ClusterWorkloadLock/${l.metadata.name}`, l]),
      ...nodeLocks.map((l) => [`NodeWorkloadLock/${l.metadata.name}`, l])]);
    const rows = planDone(plan) ? []
      : blockingLocks(clusterLocks, nodeLocks, inMaintenance);
    const lockMessage = (r) => {
      if (r.message) return r.message;
      const ip = (((lockObjs.get(`${r.kind}/${r.name}`) || {}).status) || {}).inactivationProgress;
      if (!ip) return "";
      return [ip.description, typeof ip.percentage === "number" ? `${ip.percentage}%` : ""]
        .filter(Boolean).join(" — ");
    };
    const owner = (r) => (r.metadata.labels || {})[OWNER_LABEL] || "";
    return section("Blocking locks",
      h("p", { class: "hint" }, "Workload locks not inactive: the cluster's locks gate the start of " +
        "the update, a node's locks gate its drain (only nodes in maintenance are shown)."),
      table({
        label: "Blocking locks", rowKey: (r) => r.name,
        rows, empty: "No lock is holding the update back.",
        columns: [
          { key: "kind", title: "Kind", render: (r) => r.kind },
          { key: "name", title: "Name", render: (r) => r.name },
          { key: "node", title: "Node", render: (r) => (r.node
            ? link(`#/machines/${encodeURIComponent(ns)}/${encodeURIComponent(r.node)}`, r.node) : "") },
          { key: "controller", title: "Controller", render: (r) => r.controller },
          { key: "state", title: "State", render: (r) => badge(r.state, r.state === "failed" ? "err" : "busy") },
          { key: "message", title: "Message", render: lockMessage },
        ],
      }),
      h("h3", {}, "Maintenance requests"),
      table({
        label: "Maintenance requests", rowKey: (r) => r.metadata.name,
        rows: nmrs.slice().sort((a, b) => a.metadata.name.localeCompare(b.metadata.name)),
        empty: "No node is in maintenance.",
        columns: [
          { key: "node", title: "Node", render: (r) => (r.spec || {}).nodeName || r.metadata.name },
          { key: "scope", title: "Scope", render: (r) => (r.spec || {}).scope || "" },
          { key: "release", title: "Release", render: (r) => (r.spec || {}).release || "" },
          { key: "owner", title: "Requested by", render: owner },
          { key: "age", title: "Age", render: (r) => age(r.metadata.creationTimestamp, now) },
        ],
      }));
  }

  function conditions(plan, now) {
    return section("Conditions", table({
      label: "Conditions", rowKey: (c) => c.type,
      rows: ((plan.status || {}).conditions) || [],
      empty: "No condition reported yet.",
      columns: [
        { key: "type", title: "Type", render: (c) => c.type },
        { key: "status", title: "Status", render: (c) => badge(c.status,
          c.status === "True" ? "err" : c.status === "False" ? "ok" : "plain") },
        { key: "reason", title: "Reason", render: (c) => c.reason || "" },
        { key: "message", title: "Message", render: (c) => c.message || "" },
        { key: "since", title: "Since", render: (c) => (c.lastTransitionTime
          ? `${age(c.lastTransitionTime, now)} ago` : "") },
      ],
    }));
  }

  const detail = (plan, now) => [header(plan, now), steps(plan, now), machineProgress(plan, now),
                                 locks(plan, now), conditions(plan, now)];

  function listView(plans, now) {
    const sorted = plans.slice().sort((a, b) => created(b) - created(a));
    const open = sorted.find((p) => !planDone(p));
    return [
      section("Update plans", !infs.plans.synced && !plans.length ? h("p", { class: "muted" }, "Loading…")
        : table({
          label: "Update plans", rowKey: (p) => p.metadata.name, rows: sorted,
          empty: "No update plan yet: publish a new ClusterRelease and point the cluster at it " +
            "(docs/maintenance.md).",
          columns: [
            { key: "name", title: "Plan", render: (p) => link(planHash(p), planKey(p)) },
            { key: "cluster", title: "Cluster", render: (p) => p.spec.cluster },
            { key: "release", title: "Source → target", render: (p) => `${p.spec.source} → ${p.spec.target}` },
            { key: "phase", title: "Phase", render: (p) => phaseBadge((p.status || {}).phase) },
            { key: "progress", title: "Progress", render: (p) =>
              progress(planProgress(p), `Progress of update ${p.metadata.name}`) },
            { key: "started", title: "Started", render: (p) => {
              const t = (p.status || {}).startedAt;
              return t ? when(t, now) : "";
            } },
            { key: "eta", title: "ETA", render: (p) => {
              const t = (p.status || {}).eta;
              return t ? when(t, now) : "";
            } },
          ],
        })),
      open ? h("h2", { class: "expanded-title" }, "Open update: ", link(planHash(open), planKey(open))) : null,
      open ? detail(open, now) : null,
    ];
  }

  // --- render -----------------------------------------------------------------

  /**
   * Make `to`'s children look like `from`'s, reusing the nodes that match
   * (same tag, same data-name): a click, the focus or a progress bar's
   * transition survive a live update. Inline styles go through CSSOM (CSP).
   */
  function morph(to, from) {
    const next = Array.from(from.childNodes);
    next.forEach((n, i) => {
      const o = to.childNodes[i];
      if (!o) { to.appendChild(n); return; }
      if (o.nodeType !== n.nodeType || o.nodeName !== n.nodeName ||
          (o.nodeType === 1 && o.getAttribute("data-name") !== n.getAttribute("data-name"))) {
        to.replaceChild(n, o);
        return;
      }
      if (o.nodeType !== 1) { if (o.data !== n.data) o.data = n.data; return; }
      for (const a of Array.from(o.attributes)) if (!n.hasAttribute(a.name)) o.removeAttribute(a.name);
      for (const a of Array.from(n.attributes)) {
        if (a.name === "style") { if (o.style.cssText !== n.style.cssText) o.style.cssText = n.style.cssText; }
        else if (o.getAttribute(a.name) !== a.value) o.setAttribute(a.name, a.value);
      }
      if ("disabled" in o && o.disabled !== n.disabled) o.disabled = n.disabled;
      morph(o, n);
    });
    while (to.childNodes.length > next.length) to.removeChild(to.lastChild);
  }

  const focusKeyOf = (node) => (node && node.getAttribute && node.getAttribute("data-focus"))
    || (node && node.tagName === "A" ? `href:${node.getAttribute("href")}` : null);

  function render() {
    if (stopped) return;
    const active = document.activeElement;
    const inside = active && el.contains(active);
    const focus = inside ? focusKeyOf(active)
      : (!active || active === document.body) && (busy.size || Date.now() < focusUntil) ? lastFocus
        : null;
    const now = Date.now();
    const err = infs.plans.error ? h("p", { role: "alert" },
      `Update plans are not live: ${infs.plans.error} (retrying).`) : null;
    const next = h("div");
    if (!ns) {
      fill(next, err, listView(infs.plans.list(), now));
    } else {
      const plan = infs.plans.get(`${ns}/${name}`);
      if (!plan) {
        fill(next, err, infs.plans.synced
          ? h("div", { class: "card" }, h("p", {}, `Update plan ${ns}/${name} not found.`),
              h("p", {}, link("#/updates", "All update plans")))
          : h("p", { class: "muted" }, "Loading…"));
      } else {
        fill(next, err, h("p", {}, link("#/updates", "← All update plans")), detail(plan, now));
      }
    }
    morph(body, next);
    if (focus) {
      const all = Array.from(body.querySelectorAll("[data-focus], a[href]"));
      let target = all.find((n) => focusKeyOf(n) === focus && !n.disabled);
      // The clicked button is gone or disabled now ("Pause update" with
      // nothing left to pause): give focus to an action of the same plan.
      const plan = !focus.startsWith("href:") && focus.split("|")[0];
      const ofPlan = (n) => !n.disabled && (n.getAttribute("data-focus") || "").startsWith(`${plan}|`);
      if (!target && plan && !busy.size) target = all.find((n) => n.tagName === "BUTTON" && ofPlan(n))
        || all.find((n) => n.tagName === "H2" && ofPlan(n));
      if (target && document.activeElement !== target) target.focus({ preventScroll: true });
    }
  }

  const unfollow = follow(Object.values(infs), render);
  const ticker = setInterval(render, 30000); // relative times ("in 12m")
  return () => { stopped = true; clearInterval(ticker); unfollow(); body.removeEventListener("click", onAction); };
}

// Owns: the console's pure rules — no DOM, no I/O, so node tests them
// (tests/unit/console/*.test.mjs): host activity, machine deploy progress,
// the volume deletion criteria (same rule as racksmith/planners/volumes.py),
// counts by state, control-plane health, plan summaries and blocking locks.

export const HOST_BUSY = ["registering", "inspecting", "preparing", "provisioning",
  "deprovisioning", "powering off before delete", "deleting"];

/** Provisioning state of a BareMetalHost ("" if none yet). */
export function hostState(host) {
  return (((host.status || {}).provisioning || {}).state) || "";
}

/** Power as shown: "on", "off" or "" (unknown). */
export function hostPower(host) {
  const p = (host.status || {}).poweredOn;
  return p === true ? "on" : p === false ? "off" : "";
}

/** The host's error ("" if none): "<errorType>: <errorMessage>". */
export function hostError(host) {
  const s = host.status || {};
  if (!s.errorType && !s.errorMessage) return "";
  return [s.errorType, s.errorMessage].filter(Boolean).join(": ");
}

/** The long operation running on a host and when it started, or null. */
export function hostOperation(host) {
  const state = hostState(host);
  if (!HOST_BUSY.includes(state)) return null;
  const hist = (host.status || {}).operationHistory || {};
  const op = { registering: "register", inspecting: "inspect", provisioning: "provision",
               deprovisioning: "deprovision" }[state];
  const metric = op ? hist[op] : null;
  return { state, since: metric && !metric.end ? metric.start : null };
}

/** {key: count} of `items` by `keyFn` (missing key → "unknown"), sorted by key. */
export function countBy(items, keyFn) {
  const out = {};
  for (const i of items) {
    const k = keyFn(i) || "unknown";
    out[k] = (out[k] || 0) + 1;
  }
  return Object.fromEntries(Object.entries(out).sort(([a], [b]) => a.localeCompare(b)));
}

/**
 * How far a Machine's deployment is: {percent, label}.
 * Pending 0; Provisioning 5..40 by its host's state; Deploying 40..100 by
 * the share of the LCMMachine's state items Applied; Ready 100.
 */
export function machineProgress(machine, host, lcm) {
  const phase = ((machine.status || {}).phase) || "Pending";
  if (phase === "Ready") return { percent: 100, label: "Ready" };
  if (phase === "Pending") return { percent: 0, label: "Waiting for an available host" };
  if (phase === "Deleting") return { percent: null, label: "Removing the node, releasing the host" };
  const hs = host ? hostState(host) : "";
  if (phase === "Provisioning" || (phase === "Failed" && !lcm)) {
    const byState = { available: 5, preparing: 10, provisioning: 20, provisioned: 40 };
    return { percent: byState[hs] ?? 5, label: hs ? `Host ${hs}` : "Claiming a host" };
  }
  const total = lcm ? ((lcm.spec || {}).stateItems || []).length : 0;
  const items = lcm ? ((lcm.status || {}).items || []) : [];
  const applied = items.filter((i) => i.state === "Applied").length;
  const failed = items.find((i) => i.state === "Failed");
  const running = items.find((i) => i.state === "Running");
  const share = total ? Math.min(applied, total) / total : 0;
  let label = `${applied}/${total} state items applied`;
  if (failed) label += ` — ${failed.name} failed`;
  else if (running) label += ` — applying ${running.name}`;
  return { percent: 40 + 60 * share, label };
}

/**
 * Why a Volume must not be deleted now (null if it may): its PV is Bound,
 * or it is already being deleted.
 */
export function volumeDeletionBlocker(volume, pv) {
  if ((volume.metadata || {}).deletionTimestamp) return "already being deleted";
  if (!pv || ((pv.status || {}).phase) !== "Bound") return null;
  const ref = ((pv.spec || {}).claimRef) || {};
  const claim = [ref.namespace, ref.name].filter(Boolean).join("/") || "a claim";
  const name = (volume.metadata || {}).name;
  return `volume ${name} is in use: its PersistentVolume ${(pv.metadata || {}).name || name} ` +
    `is bound to claim ${claim}; delete the claim (and the pods using it) first`;
}

/** Ready condition status of a Node: true, false or null (unknown). */
export function nodeReady(node) {
  const c = (((node || {}).status || {}).conditions || []).find((x) => x.type === "Ready");
  return c ? c.status === "True" : null;
}

/**
 * Control-plane health of a cluster: every machine with role master or
 * etcd, its Node's readiness. {healthy, members: [{name, roles, ready}]}.
 */
export function controlPlaneHealth(clusterName, machines, nodesByName) {
  const members = machines
    .filter((m) => (m.spec || {}).clusterName === clusterName)
    .filter((m) => ((m.spec || {}).roles || []).some((r) => r === "master" || r === "etcd"))
    .map((m) => ({ name: m.metadata.name, roles: m.spec.roles,
                   ready: nodeReady(nodesByName.get(m.metadata.name)) === true }))
    .sort((a, b) => a.name.localeCompare(b.name));
  const ready = members.filter((m) => m.ready).length;
  const etcd = members.filter((m) => m.roles.includes("etcd"));
  const etcdReady = etcd.filter((m) => m.ready).length;
  const quorum = etcd.length === 0 || etcdReady > etcd.length / 2;
  return { healthy: members.length > 0 && ready === members.length, quorum, ready,
           total: members.length, members };
}

/** Step status by id of a ClusterUpdatePlan. */
export function stepStatuses(plan) {
  return new Map((((plan.status || {}).steps) || []).map((s) => [s.id, s]));
}

/** Whether a plan is finished (Completed). */
export const planDone = (plan) => ((plan.status || {}).phase) === "Completed";

/**
 * Locks that hold maintenance back: workload locks not `inactive`
 * (node locks only for nodes in `nodes` when given). [{kind, name, node, state, message}].
 */
export function blockingLocks(clusterLocks, nodeLocks, nodes) {
  const out = [];
  for (const l of clusterLocks) {
    const st = ((l.status || {}).state) || "active";
    if (st !== "inactive") out.push({ kind: "ClusterWorkloadLock", name: l.metadata.name, node: "",
      controller: (l.spec || {}).controllerName || "", state: st,
      message: (l.status || {}).errorMessage || "" });
  }
  for (const l of nodeLocks) {
    const st = ((l.status || {}).state) || "active";
    const node = (l.spec || {}).nodeName || "";
    if (st === "inactive" || (nodes && !nodes.has(node))) continue;
    out.push({ kind: "NodeWorkloadLock", name: l.metadata.name, node,
      controller: (l.spec || {}).controllerName || "", state: st,
      message: (l.status || {}).errorMessage || "" });
  }
  return out;
}

// --- update plans (pages/updates.js) ---------------------------------------

/** Phase of step `id` of a plan ("NotStarted" when the status has none). */
export function stepPhase(plan, id) {
  const s = stepStatuses(plan).get(id);
  return (s && s.phase) || "NotStarted";
}

/** Whether step `id` has started (or finished). */
export function stepStarted(plan, id) {
  const s = stepStatuses(plan).get(id);
  return !!(s && (s.startedAt || ["InProgress", "Stuck", "Completed"].includes(s.phase)));
}

/**
 * Percent done of a plan: the mean of its steps' progress (a Completed step
 * counts 100), else the share of Completed steps; 100 when Completed.
 */
export function planProgress(plan) {
  if (planDone(plan)) return 100;
  const steps = ((plan.spec || {}).steps) || [];
  if (!steps.length) return 0;
  const st = stepStatuses(plan);
  const known = steps.some((s) => st.has(s.id) && typeof st.get(s.id).progress === "number");
  const each = steps.map((s) => {
    const x = st.get(s.id) || {};
    if (x.phase === "Completed") return 100;
    return known ? (x.progress || 0) : 0;
  });
  return each.reduce((a, b) => a + b, 0) / steps.length;
}

/** Ids of the steps "Pause update" un-commences: commenced, NotStarted or Scheduled. */
export function pausableStepIds(plan) {
  return (((plan.spec || {}).steps) || [])
    .filter((s) => s.commence && ["NotStarted", "Scheduled"].includes(stepPhase(plan, s.id)))
    .map((s) => s.id);
}

/** Ids of the steps "Commence all" commences: not commenced, not Completed. */
export function commenceableStepIds(plan) {
  return (((plan.spec || {}).steps) || [])
    .filter((s) => !s.commence && stepPhase(plan, s.id) !== "Completed")
    .map((s) => s.id);
}

/**
 * JSON patch setting spec.steps[i].commence = value for the steps `ids`,
 * each `replace` guarded by a `test` of the step's id at that index (so a
 * plan whose steps changed meanwhile is refused, not patched blindly).
 */
export function commenceOps(plan, ids, value) {
  const ops = [];
  (((plan.spec || {}).steps) || []).forEach((s, i) => {
    if (!ids.includes(s.id)) return;
    ops.push({ op: "test", path: `/spec/steps/${i}/id`, value: s.id },
             { op: "replace", path: `/spec/steps/${i}/commence`, value: !!value });
  });
  return ops;
}

// --- events (helper A: hosts/host/events pages) ------------------------------

/** When an Event last happened (ISO string, "" if unknown). */
export function eventTime(ev) {
  return ev.lastTimestamp || ((ev.series || {}).lastObservedTime) || ev.eventTime
    || ((ev.metadata || {}).creationTimestamp) || "";
}

/** Events newest first (a new array); ties: the later write (resourceVersion) first. */
export function eventsNewestFirst(events) {
  const keyed = events.map((ev) => [Date.parse(eventTime(ev)) || 0,
                                    Number(((ev.metadata || {}).resourceVersion)) || 0, ev]);
  keyed.sort((a, b) => b[0] - a[0] || b[1] - a[1]);
  return keyed.map((k) => k[2]);
}

/** The console route of an Event's object (a BareMetalHost or a Machine), or "". */
export function eventObjectRoute(ev) {
  const o = ev.involvedObject || {};
  const ns = o.namespace || ((ev.metadata || {}).namespace) || "";
  if (!o.name || !ns) return "";
  if (o.kind === "BareMetalHost") return `#/hosts/${ns}/${o.name}`;
  if (o.kind === "Machine") return `#/machines/${ns}/${o.name}`;
  return "";
}

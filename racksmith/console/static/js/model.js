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

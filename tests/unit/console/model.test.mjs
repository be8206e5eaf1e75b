// Tests of racksmith/console/static/js/model.js, the console's pure rules
// (no DOM, no I/O). Run: node --test tests/unit/console/
// (tests/unit/test_console_model.py runs it under pytest).

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import * as model from "../../../racksmith/console/static/js/model.js";
import {
  HOST_BUSY, blockingLocks, commenceOps, commenceableStepIds, controlPlaneHealth, countBy,
  eventObjectRoute, eventTime, eventsNewestFirst, hostError, hostOperation, hostPower, hostState,
  machineProgress, nodeReady, pausableStepIds, planDone, planProgress, stepPhase, stepStarted,
  stepStatuses, volumeDeletionBlocker,
} from "../../../racksmith/console/static/js/model.js";

// Every export of model.js has tests here: add a describe block and the name.
const TESTED = ["HOST_BUSY", "hostState", "hostPower", "hostError", "hostOperation", "countBy",
  "machineProgress", "volumeDeletionBlocker", "nodeReady", "controlPlaneHealth", "stepStatuses",
  "planDone", "blockingLocks", "stepPhase", "stepStarted", "planProgress", "pausableStepIds",
  "commenceableStepIds", "commenceOps", "eventTime", "eventsNewestFirst", "eventObjectRoute"];

test("every export of model.js is tested", () => {
  const untested = Object.keys(model).filter((k) => !TESTED.includes(k));
  assert.deepEqual(untested, [], `add tests for: ${untested.join(", ")}`);
});

// --- builders ---------------------------------------------------------------

const host = (state, extra = {}) => ({
  metadata: { name: "host-000", namespace: "default" },
  status: state === undefined ? undefined : { provisioning: { state }, ...extra },
});
const machine = (name, phase, { roles = ["worker"], cluster = "demo" } = {}) => ({
  metadata: { name, namespace: "default" },
  spec: { clusterName: cluster, roles },
  status: phase === undefined ? undefined : { phase },
});
const lcm = (names, states = {}) => ({
  spec: { stateItems: names.map((name) => ({ name })) },
  status: { items: Object.entries(states).map(([name, state]) => ({ name, state })) },
});
const node = (ready) => ({
  status: { conditions: [{ type: "MemoryPressure", status: "False" },
                         ...(ready === undefined ? [] : [{ type: "Ready", status: ready }])] },
});
const pv = (phase, claimRef, name = "vol-a") => ({
  metadata: { name }, spec: claimRef ? { claimRef } : {}, status: { phase },
});
const lock = (name, state, spec = {}) => ({
  metadata: { name }, spec, status: state === undefined ? undefined : { state },
});

// --- hosts ------------------------------------------------------------------

describe("hostState", () => {
  test("reads status.provisioning.state", () => {
    assert.equal(hostState(host("provisioned")), "provisioned");
    assert.equal(hostState(host("powering off before delete")), "powering off before delete");
  });
  test("is empty before the controller wrote a status", () => {
    assert.equal(hostState({ metadata: { name: "x" } }), "");
    assert.equal(hostState({ status: {} }), "");
    assert.equal(hostState({ status: { provisioning: {} } }), "");
    assert.equal(hostState({ status: { provisioning: { state: null } } }), "");
  });
});

describe("hostPower", () => {
  test("on, off or unknown", () => {
    assert.equal(hostPower({ status: { poweredOn: true } }), "on");
    assert.equal(hostPower({ status: { poweredOn: false } }), "off");
    assert.equal(hostPower({ status: {} }), "");
    assert.equal(hostPower({ status: { poweredOn: null } }), "");
    assert.equal(hostPower({}), "");
  });
  test("only booleans count (no truthiness)", () => {
    assert.equal(hostPower({ status: { poweredOn: "true" } }), "");
    assert.equal(hostPower({ status: { poweredOn: 0 } }), "");
  });
});

describe("hostError", () => {
  test("type and message", () => {
    const h = { status: { errorType: "registration error",
                          errorMessage: "BMC unreachable: connection refused" } };
    assert.equal(hostError(h), "registration error: BMC unreachable: connection refused");
  });
  test("either part alone", () => {
    assert.equal(hostError({ status: { errorMessage: "disk not found" } }), "disk not found");
    assert.equal(hostError({ status: { errorType: "inspection error" } }), "inspection error");
  });
  test("none", () => {
    assert.equal(hostError({}), "");
    assert.equal(hostError({ status: { errorType: "", errorMessage: "", errorCount: 0 } }), "");
    assert.equal(hostError({ status: { errorType: null, errorMessage: null } }), "");
  });
});

describe("hostOperation", () => {
  test("idle states have no operation", () => {
    for (const s of ["", "available", "provisioned", "externally provisioned", "unmanaged"]) {
      assert.equal(hostOperation(host(s)), null, s);
    }
    assert.equal(hostOperation({}), null);
  });
  test("every busy state is an operation", () => {
    for (const s of HOST_BUSY) assert.equal(hostOperation(host(s)).state, s);
  });
  test("the running metric's start (register_ is 'register' in JSON)", () => {
    const start = "2026-12-01T21:15:58Z";
    const op = hostOperation(host("registering", { operationHistory: { register: { start } } }));
    assert.deepEqual(op, { state: "registering", since: start });
    assert.deepEqual(
      hostOperation(host("provisioning", { operationHistory: {
        inspect: { start: "2026-12-01T21:16:21Z", end: "2026-12-01T21:16:29Z" },
        provision: { start: "2026-12-01T21:18:09Z" } } })),
      { state: "provisioning", since: "2026-12-01T21:18:09Z" });
    assert.deepEqual(
      hostOperation(host("deprovisioning", { operationHistory: {
        deprovision: { start: "2026-12-01T22:00:00Z", end: null } } })),
      { state: "deprovisioning", since: "2026-12-01T22:00:00Z" });
  });
  test("a finished metric (a previous run) gives no start", () => {
    const op = hostOperation(host("inspecting", { operationHistory: {
      inspect: { start: "2026-12-01T21:16:21Z", end: "2026-12-01T21:16:29Z" } } }));
    assert.deepEqual(op, { state: "inspecting", since: null });
  });
  test("states without a metric, or no history", () => {
    assert.deepEqual(hostOperation(host("preparing", { operationHistory: {
      provision: { start: "2026-12-01T21:18:09Z" } } })), { state: "preparing", since: null });
    assert.deepEqual(hostOperation(host("deleting")), { state: "deleting", since: null });
    assert.deepEqual(hostOperation(host("inspecting")), { state: "inspecting", since: null });
  });
});

describe("countBy", () => {
  test("counts, sorted by key", () => {
    const hosts = ["provisioned", "available", "provisioned", "error", "available",
                   "provisioned"].map((s) => host(s));
    const out = countBy(hosts, hostState);
    assert.deepEqual(out, { available: 2, error: 1, provisioned: 3 });
    assert.deepEqual(Object.keys(out), ["available", "error", "provisioned"]);
  });
  test("missing keys count as unknown", () => {
    assert.deepEqual(countBy([host(undefined), host(""), host("available")], hostState),
                     { available: 1, unknown: 2 });
  });
  test("keys with spaces and an empty list", () => {
    assert.deepEqual(countBy([host("externally provisioned")], hostState),
                     { "externally provisioned": 1 });
    assert.deepEqual(countBy([], hostState), {});
  });
});

// --- machines -----------------------------------------------------------------

describe("machineProgress", () => {
  const items = ["checks", "packages", "kubeadm-join", "uncordon"];

  test("Pending, Ready and Deleting", () => {
    assert.deepEqual(machineProgress(machine("m", "Pending"), null, null),
                     { percent: 0, label: "Waiting for an available host" });
    assert.deepEqual(machineProgress(machine("m", undefined), null, null),
                     { percent: 0, label: "Waiting for an available host" });
    assert.equal(machineProgress(machine("m", "Ready"), host("provisioned"), lcm(items))
      .percent, 100);
    const del = machineProgress(machine("m", "Deleting"), host("deprovisioning"), null);
    assert.equal(del.percent, null);
    assert.match(del.label, /releasing the host/);
  });

  test("Provisioning follows the host's state", () => {
    const p = (hs) => machineProgress(machine("m", "Provisioning"), hs === null ? null : host(hs),
                                      null);
    assert.deepEqual(p(null), { percent: 5, label: "Claiming a host" });
    assert.deepEqual(p("available"), { percent: 5, label: "Host available" });
    assert.deepEqual(p("preparing"), { percent: 10, label: "Host preparing" });
    assert.deepEqual(p("provisioning"), { percent: 20, label: "Host provisioning" });
    assert.deepEqual(p("provisioned"), { percent: 40, label: "Host provisioned" });
    assert.deepEqual(p("inspecting"), { percent: 5, label: "Host inspecting" });
  });

  test("Deploying counts Applied state items", () => {
    const m = machine("m", "Deploying");
    const hs = host("provisioned");
    assert.deepEqual(machineProgress(m, hs, lcm(items)),
                     { percent: 40, label: "0/4 state items applied" });
    assert.deepEqual(machineProgress(m, hs, lcm(items, { checks: "Applied",
                                                         packages: "Running" })),
                     { percent: 55, label: "1/4 state items applied — applying packages" });
    assert.deepEqual(machineProgress(m, hs, lcm(items, { checks: "Applied", packages: "Applied",
                                                         "kubeadm-join": "Failed",
                                                         uncordon: "Running" })),
                     { percent: 70, label: "2/4 state items applied — kubeadm-join failed" });
    assert.equal(machineProgress(m, hs, lcm(items, Object.fromEntries(
      items.map((i) => [i, "Applied"])))).percent, 100);
  });

  test("Deploying edge cases: no LCMMachine, no items, stale extra items", () => {
    const m = machine("m", "Deploying");
    assert.deepEqual(machineProgress(m, host("provisioned"), null),
                     { percent: 40, label: "0/0 state items applied" });
    assert.equal(machineProgress(m, null, { spec: {}, status: {} }).percent, 40);
    // status lists more Applied items than the spec has (an old release): capped at 100
    const stale = lcm(["a"], { a: "Applied", b: "Applied", c: "Applied" });
    assert.equal(machineProgress(m, null, stale).percent, 100);
  });

  test("Failed: by the host before the agent reported, else by the state items", () => {
    assert.deepEqual(machineProgress(machine("m", "Failed"), host("provisioning"), null),
                     { percent: 20, label: "Host provisioning" });
    const p = machineProgress(machine("m", "Failed"), host("provisioned"),
                              lcm(["a", "b"], { a: "Applied", b: "Failed" }));
    assert.deepEqual(p, { percent: 70, label: "1/2 state items applied — b failed" });
  });

  test("monotone over the phases of a deployment", () => {
    const steps = [
      [machine("m", "Pending"), null, null],
      [machine("m", "Provisioning"), null, null],
      [machine("m", "Provisioning"), host("available"), null],
      [machine("m", "Provisioning"), host("preparing"), null],
      [machine("m", "Provisioning"), host("provisioning"), null],
      [machine("m", "Provisioning"), host("provisioned"), null],
      [machine("m", "Deploying"), host("provisioned"), null],
      [machine("m", "Deploying"), host("provisioned"), lcm(items)],
      [machine("m", "Deploying"), host("provisioned"), lcm(items, { checks: "Running" })],
      [machine("m", "Deploying"), host("provisioned"), lcm(items, { checks: "Applied" })],
      [machine("m", "Deploying"), host("provisioned"),
       lcm(items, { checks: "Applied", packages: "Applied" })],
      [machine("m", "Deploying"), host("provisioned"),
       lcm(items, { checks: "Applied", packages: "Applied", "kubeadm-join": "Applied" })],
      [machine("m", "Deploying"), host("provisioned"),
       lcm(items, Object.fromEntries(items.map((i) => [i, "Applied"])))],
      [machine("m", "Ready"), host("provisioned"),
       lcm(items, Object.fromEntries(items.map((i) => [i, "Applied"])))],
    ];
    const percents = steps.map(([m, hs, l]) => machineProgress(m, hs, l).percent);
    assert.equal(percents[0], 0);
    assert.equal(percents.at(-1), 100);
    for (let i = 1; i < percents.length; i++) {
      assert.ok(percents[i] >= percents[i - 1], `step ${i}: ${percents.join(", ")}`);
    }
    for (const p of percents) assert.ok(p >= 0 && p <= 100);
  });
});

// --- volumes -----------------------------------------------------------------

describe("volumeDeletionBlocker", () => {
  const vol = (name = "vol-a", deleting = false) => ({
    metadata: { name, namespace: "default",
                ...(deleting ? { deletionTimestamp: "2026-12-01T22:00:00Z" } : {}) },
  });

  test("a Bound PV blocks with the same text as planners/volumes.py deletion_blocker", () => {
    // racksmith.planners.volumes.deletion_blocker("vol-a", pv("Bound", apps/data-db-0))
    assert.equal(
      volumeDeletionBlocker(vol(), pv("Bound", { namespace: "apps", name: "data-db-0" })),
      "volume vol-a is in use: its PersistentVolume vol-a is bound to claim apps/data-db-0; " +
      "delete the claim (and the pods using it) first");
  });
  test("a Bound PV without a claimRef, or a PV named otherwise", () => {
    assert.equal(volumeDeletionBlocker(vol(), pv("Bound", null)),
                 "volume vol-a is in use: its PersistentVolume vol-a is bound to claim " +
                 "a claim; delete the claim (and the pods using it) first");
    assert.match(volumeDeletionBlocker(vol("data"), pv("Bound", { name: "c" }, "pv-data")),
                 /^volume data is in use: its PersistentVolume pv-data is bound to claim c;/);
  });
  test("no PV, or a PV that is not Bound, does not block", () => {
    assert.equal(volumeDeletionBlocker(vol(), null), null);
    assert.equal(volumeDeletionBlocker(vol(), undefined), null);
    for (const phase of ["Available", "Released", "Failed", "Pending"]) {
      assert.equal(volumeDeletionBlocker(vol(), pv(phase, { namespace: "a", name: "b" })), null,
                   phase);
    }
    assert.equal(volumeDeletionBlocker(vol(), { metadata: { name: "vol-a" } }), null);
  });
  test("a Volume already being deleted", () => {
    assert.equal(volumeDeletionBlocker(vol("vol-a", true), null), "already being deleted");
    assert.equal(volumeDeletionBlocker(vol("vol-a", true),
                                       pv("Bound", { namespace: "a", name: "b" })),
                 "already being deleted");
  });
});

// --- nodes and control plane ---------------------------------------------------

describe("nodeReady", () => {
  test("the Ready condition", () => {
    assert.equal(nodeReady(node("True")), true);
    assert.equal(nodeReady(node("False")), false);
    assert.equal(nodeReady(node("Unknown")), false);
  });
  test("unknown without a node or a Ready condition", () => {
    assert.equal(nodeReady(node(undefined)), null);
    assert.equal(nodeReady(undefined), null);
    assert.equal(nodeReady(null), null);
    assert.equal(nodeReady({}), null);
  });
});

describe("controlPlaneHealth", () => {
  const cp = (name, roles = ["master", "etcd"], cluster = "demo") =>
    machine(name, "Ready", { roles, cluster });
  const nodes = (ready) => new Map(Object.entries(ready).map(([n, r]) => [n, node(r)]));

  test("all members Ready: healthy with quorum; workers and other clusters are ignored", () => {
    const machines = [cp("cp-2"), cp("cp-0"), cp("cp-1"), machine("w-0", "Ready"),
                      cp("other-cp", ["master", "etcd"], "other")];
    const out = controlPlaneHealth("demo", machines,
                                   nodes({ "cp-0": "True", "cp-1": "True", "cp-2": "True",
                                           "w-0": "False", "other-cp": "False" }));
    assert.equal(out.healthy, true);
    assert.equal(out.quorum, true);
    assert.equal(out.ready, 3);
    assert.equal(out.total, 3);
    assert.deepEqual(out.members.map((m) => m.name), ["cp-0", "cp-1", "cp-2"]);
    assert.deepEqual(out.members[0], { name: "cp-0", roles: ["master", "etcd"], ready: true });
  });
  test("one of three etcd members down: quorum kept, not healthy", () => {
    const out = controlPlaneHealth("demo", [cp("a"), cp("b"), cp("c")],
                                   nodes({ a: "True", b: "True", c: "False" }));
    assert.deepEqual([out.healthy, out.quorum, out.ready, out.total], [false, true, 2, 3]);
  });
  test("two of three down (or Node missing): quorum lost", () => {
    const out = controlPlaneHealth("demo", [cp("a"), cp("b"), cp("c")], nodes({ a: "True" }));
    assert.deepEqual([out.healthy, out.quorum, out.ready], [false, false, 1]);
  });
  test("even member counts need a strict majority", () => {
    const four = [cp("a"), cp("b"), cp("c"), cp("d")];
    assert.equal(controlPlaneHealth("demo", four,
                                    nodes({ a: "True", b: "True" })).quorum, false);
    assert.equal(controlPlaneHealth("demo", four,
                                    nodes({ a: "True", b: "True", c: "True" })).quorum, true);
    const two = [cp("a"), cp("b")];
    assert.equal(controlPlaneHealth("demo", two, nodes({ a: "True" })).quorum, false);
    assert.equal(controlPlaneHealth("demo", [cp("a")], nodes({ a: "True" })).quorum, true);
    assert.equal(controlPlaneHealth("demo", [cp("a")], nodes({ a: "False" })).quorum, false);
  });
  test("quorum counts etcd members only; masters without etcd only count for health", () => {
    const machines = [cp("m-0", ["master"]), cp("m-1", ["master"]), cp("e-0", ["etcd"])];
    const out = controlPlaneHealth("demo", machines, nodes({ "e-0": "True", "m-0": "False" }));
    assert.deepEqual([out.healthy, out.quorum, out.ready, out.total], [false, true, 1, 3]);
    // no etcd member at all: quorum is not at stake
    const noEtcd = controlPlaneHealth("demo", [cp("m-0", ["master"])], nodes({}));
    assert.deepEqual([noEtcd.healthy, noEtcd.quorum], [false, true]);
  });
  test("no control-plane machine: not healthy, nothing to count", () => {
    const out = controlPlaneHealth("demo", [machine("w", "Ready")], nodes({ w: "True" }));
    assert.deepEqual(out, { healthy: false, quorum: true, ready: 0, total: 0, members: [] });
    assert.equal(controlPlaneHealth("demo", [], new Map()).healthy, false);
  });
});

// --- update plans and locks ------------------------------------------------------

describe("stepStatuses and planDone", () => {
  test("step status by id", () => {
    const plan = { status: { phase: "InProgress", steps: [
      { id: "control-plane", phase: "Completed" }, { id: "workers-a", phase: "InProgress" }] } };
    const by = stepStatuses(plan);
    assert.ok(by instanceof Map);
    assert.equal(by.size, 2);
    assert.equal(by.get("workers-a").phase, "InProgress");
    assert.equal(by.get("nope"), undefined);
  });
  test("no status yet", () => {
    assert.equal(stepStatuses({ spec: {} }).size, 0);
    assert.equal(stepStatuses({ status: {} }).size, 0);
    assert.equal(stepStatuses({ status: { steps: null } }).size, 0);
  });
  test("only Completed is done", () => {
    assert.equal(planDone({ status: { phase: "Completed" } }), true);
    for (const phase of ["NotStarted", "InProgress", "AutoPaused", "Failed", undefined]) {
      assert.equal(planDone({ status: { phase } }), false, String(phase));
    }
    assert.equal(planDone({}), false);
  });
});

describe("blockingLocks", () => {
  test("active and failed locks block; inactive ones do not; missing state is active", () => {
    const out = blockingLocks(
      [lock("db", "active", { controllerName: "db-operator" }), lock("cache", "inactive"),
       lock("fresh", undefined)],
      [lock("db-n1", "failed", { nodeName: "n1", controllerName: "db-operator" }),
       lock("db-n2", "inactive", { nodeName: "n2" })],
      undefined);
    assert.deepEqual(out, [
      { kind: "ClusterWorkloadLock", name: "db", node: "", controller: "db-operator",
        state: "active", message: "" },
      { kind: "ClusterWorkloadLock", name: "fresh", node: "", controller: "", state: "active",
        message: "" },
      { kind: "NodeWorkloadLock", name: "db-n1", node: "n1", controller: "db-operator",
        state: "failed", message: "" },
    ]);
  });
  test("the error message is carried", () => {
    const l = lock("db-n1", "failed", { nodeName: "n1" });
    l.status.errorMessage = "replica cannot move: no spare node";
    assert.equal(blockingLocks([], [l])[0].message, "replica cannot move: no spare node");
  });
  test("node locks are limited to the given nodes; cluster locks always count", () => {
    const nodeLocks = [lock("a", "active", { nodeName: "n1" }),
                       lock("b", "active", { nodeName: "n2" }),
                       lock("c", "active", {})];
    const names = (out) => out.map((l) => l.name);
    assert.deepEqual(names(blockingLocks([lock("cl", "active")], nodeLocks, new Set(["n2"]))),
                     ["cl", "b"]);
    assert.deepEqual(names(blockingLocks([], nodeLocks, new Set())), []);
    assert.deepEqual(names(blockingLocks([], nodeLocks, null)), ["a", "b", "c"]);
  });
  test("nothing to block", () => {
    assert.deepEqual(blockingLocks([], [], new Set(["n1"])), []);
  });
});

// --- update plan steps (pages/updates.js) -------------------------------------------

const plan = (steps, statuses, phase = "InProgress") => ({
  metadata: { name: "demo-r2", namespace: "default" },
  spec: { cluster: "demo", source: "r1", target: "r2",
          steps: steps.map(([id, commence]) => ({ id, commence })) },
  status: statuses === undefined ? undefined : { phase, steps: statuses },
});
const STEPS = [["control-plane", true], ["workers-a", true], ["workers-b", false],
               ["workers-c", false]];

describe("stepPhase and stepStarted", () => {
  const p = plan(STEPS, [
    { id: "control-plane", phase: "Completed", progress: 100,
      startedAt: "2026-12-01T21:00:00Z", finishedAt: "2026-12-01T21:10:00Z" },
    { id: "workers-a", phase: "Scheduled" },
    { id: "workers-b", phase: "Stuck", message: "node w-3 drain blocked" },
  ]);
  test("the status' phase, NotStarted without one", () => {
    assert.equal(stepPhase(p, "control-plane"), "Completed");
    assert.equal(stepPhase(p, "workers-a"), "Scheduled");
    assert.equal(stepPhase(p, "workers-c"), "NotStarted");
    assert.equal(stepPhase(plan(STEPS, undefined), "control-plane"), "NotStarted");
    assert.equal(stepPhase(plan(STEPS, [{ id: "workers-a" }]), "workers-a"), "NotStarted");
  });
  test("started: a start time or a running/finished phase", () => {
    assert.equal(stepStarted(p, "control-plane"), true);
    assert.equal(stepStarted(p, "workers-a"), false);
    assert.equal(stepStarted(p, "workers-b"), true);
    assert.equal(stepStarted(p, "workers-c"), false);
    assert.equal(stepStarted(plan(STEPS, [{ id: "workers-a", phase: "InProgress" }]),
                             "workers-a"), true);
    assert.equal(stepStarted(plan(STEPS, [{ id: "workers-a", phase: "AutoPaused",
                                            startedAt: "2026-12-01T21:00:00Z" }]),
                             "workers-a"), true);
    assert.equal(stepStarted(plan(STEPS, [{ id: "workers-a", phase: "AutoPaused" }]),
                             "workers-a"), false);
  });
});

describe("planProgress", () => {
  test("Completed is 100 whatever the steps say", () => {
    assert.equal(planProgress(plan(STEPS, [], "Completed")), 100);
    assert.equal(planProgress({ spec: {}, status: { phase: "Completed" } }), 100);
  });
  test("no steps, no status", () => {
    assert.equal(planProgress({ spec: {} }), 0);
    assert.equal(planProgress(plan([], [])), 0);
    assert.equal(planProgress(plan(STEPS, undefined)), 0);
  });
  test("the mean of the steps' progress; Completed steps count 100", () => {
    const p = plan(STEPS, [{ id: "control-plane", phase: "Completed" },
                           { id: "workers-a", phase: "InProgress", progress: 50 }]);
    assert.equal(planProgress(p), (100 + 50 + 0 + 0) / 4);
  });
  test("without any progress numbers: the share of Completed steps", () => {
    const p = plan(STEPS, [{ id: "control-plane", phase: "Completed" },
                           { id: "workers-a", phase: "InProgress" }]);
    assert.equal(planProgress(p), 25);
  });
  test("statuses of steps no longer in the spec are ignored; bounded 0..100", () => {
    const p = plan(STEPS.slice(0, 2), [{ id: "gone", phase: "InProgress", progress: 90 },
                                       { id: "workers-a", phase: "InProgress", progress: 10 }]);
    assert.equal(planProgress(p), 5);
    const full = plan(STEPS, STEPS.map(([id]) => ({ id, phase: "Completed", progress: 100 })));
    assert.equal(planProgress(full), 100);
  });
  test("grows as the steps advance", () => {
    const stages = [
      [],
      [{ id: "control-plane", phase: "InProgress", progress: 30 }],
      [{ id: "control-plane", phase: "Completed", progress: 100 }],
      [{ id: "control-plane", phase: "Completed" }, { id: "workers-a", phase: "InProgress",
                                                     progress: 60 }],
      STEPS.map(([id]) => ({ id, phase: "Completed", progress: 100 })),
    ].map((st) => planProgress(plan(STEPS, st)));
    for (let i = 1; i < stages.length; i++) assert.ok(stages[i] >= stages[i - 1], stages.join());
  });
});

describe("pausableStepIds and commenceableStepIds", () => {
  const p = plan([["control-plane", true], ["workers-a", true], ["workers-b", true],
                  ["workers-c", false], ["workers-d", false]], [
    { id: "control-plane", phase: "Completed" },
    { id: "workers-a", phase: "InProgress" },
    { id: "workers-b", phase: "Scheduled" },
    { id: "workers-d", phase: "Completed" },
  ]);
  test("pause un-commences commenced steps that have not started", () => {
    assert.deepEqual(pausableStepIds(p), ["workers-b"]);
    assert.deepEqual(pausableStepIds(plan(STEPS, undefined)), ["control-plane", "workers-a"]);
  });
  test("commence all: steps not commenced and not Completed", () => {
    assert.deepEqual(commenceableStepIds(p), ["workers-c"]);
    assert.deepEqual(commenceableStepIds(plan(STEPS, undefined)), ["workers-b", "workers-c"]);
  });
  test("a plan without steps", () => {
    assert.deepEqual(pausableStepIds({ spec: {} }), []);
    assert.deepEqual(commenceableStepIds({}), []);
  });
});

describe("commenceOps", () => {
  test("a test of the id guards each replace, at the step's index", () => {
    const p = plan(STEPS, undefined);
    assert.deepEqual(commenceOps(p, ["workers-b", "workers-c"], true), [
      { op: "test", path: "/spec/steps/2/id", value: "workers-b" },
      { op: "replace", path: "/spec/steps/2/commence", value: true },
      { op: "test", path: "/spec/steps/3/id", value: "workers-c" },
      { op: "replace", path: "/spec/steps/3/commence", value: true },
    ]);
    assert.deepEqual(commenceOps(p, ["workers-a"], 0), [
      { op: "test", path: "/spec/steps/1/id", value: "workers-a" },
      { op: "replace", path: "/spec/steps/1/commence", value: false },
    ]);
  });
  test("unknown ids and empty lists give no operation", () => {
    assert.deepEqual(commenceOps(plan(STEPS, undefined), ["nope"], true), []);
    assert.deepEqual(commenceOps(plan(STEPS, undefined), [], true), []);
    assert.deepEqual(commenceOps({ spec: {} }, ["a"], true), []);
  });
  test("applied to the plan, the ops set exactly those steps", () => {
    const p = plan(STEPS, undefined);
    const doc = structuredClone(p);
    for (const op of commenceOps(p, commenceableStepIds(p), true)) {
      const [, , , i, field] = op.path.split("/");
      if (op.op === "test") assert.equal(doc.spec.steps[Number(i)][field], op.value);
      else doc.spec.steps[Number(i)][field] = op.value;
    }
    assert.deepEqual(doc.spec.steps.map((s) => s.commence), [true, true, true, true]);
  });
});

// --- events -------------------------------------------------------------------

const event = (name, rv, times = {}, involved = {}) => ({
  metadata: { name, namespace: "default", resourceVersion: String(rv),
              creationTimestamp: times.created },
  lastTimestamp: times.last, eventTime: times.eventTime,
  series: times.series ? { lastObservedTime: times.series } : undefined,
  involvedObject: involved,
});

describe("eventTime", () => {
  test("lastTimestamp, then series, then eventTime, then creation", () => {
    const all = { last: "2026-12-01T21:04:00Z", series: "2026-12-01T21:03:00.000000Z",
                  eventTime: "2026-12-01T21:02:00.000000Z", created: "2026-12-01T21:01:00Z" };
    assert.equal(eventTime(event("e", 1, all)), all.last);
    assert.equal(eventTime(event("e", 1, { ...all, last: undefined })), all.series);
    assert.equal(eventTime(event("e", 1, { eventTime: all.eventTime, created: all.created })),
                 all.eventTime);
    assert.equal(eventTime(event("e", 1, { created: all.created })), all.created);
    assert.equal(eventTime({}), "");
    assert.equal(eventTime({ lastTimestamp: null, metadata: {} }), "");
  });
});

describe("eventsNewestFirst", () => {
  test("newest first; ties by resourceVersion, later first; input untouched", () => {
    const evs = [event("old", 5, { last: "2026-12-01T21:00:00Z" }),
                 event("new", 6, { last: "2026-12-01T21:05:00Z" }),
                 event("tie-early", 7, { last: "2026-12-01T21:02:00Z" }),
                 event("tie-late", 12, { last: "2026-12-01T21:02:00Z" }),
                 event("micro", 3, { eventTime: "2026-12-01T21:03:00.500000Z" })];
    const before = evs.map((e) => e.metadata.name);
    const out = eventsNewestFirst(evs);
    assert.deepEqual(out.map((e) => e.metadata.name),
                     ["new", "micro", "tie-late", "tie-early", "old"]);
    assert.deepEqual(evs.map((e) => e.metadata.name), before);
    assert.notEqual(out, evs);
  });
  test("resourceVersions compare as numbers; undated events go last", () => {
    const out = eventsNewestFirst([event("rv9", 9, { last: "2026-12-01T21:00:00Z" }),
                                   event("undated", 100, {}),
                                   event("rv10", 10, { last: "2026-12-01T21:00:00Z" })]);
    assert.deepEqual(out.map((e) => e.metadata.name), ["rv10", "rv9", "undated"]);
    assert.deepEqual(eventsNewestFirst([]), []);
  });
});

describe("eventObjectRoute", () => {
  test("hosts and machines link to their pages", () => {
    assert.equal(eventObjectRoute(event("e", 1, {}, { kind: "BareMetalHost", name: "host-000",
                                                       namespace: "metal" })),
                 "#/hosts/metal/host-000");
    assert.equal(eventObjectRoute(event("e", 1, {}, { kind: "Machine", name: "demo-worker-1",
                                                       namespace: "default" })),
                 "#/machines/default/demo-worker-1");
  });
  test("the Event's namespace when the object has none", () => {
    assert.equal(eventObjectRoute(event("e", 1, {}, { kind: "Machine", name: "m" })),
                 "#/machines/default/m");
  });
  test("other kinds, or no name or namespace: no route", () => {
    assert.equal(eventObjectRoute(event("e", 1, {}, { kind: "Node", name: "n1" })), "");
    assert.equal(eventObjectRoute(event("e", 1, {}, { kind: "Machine" })), "");
    assert.equal(eventObjectRoute({ involvedObject: { kind: "Machine", name: "m" } }), "");
    assert.equal(eventObjectRoute({}), "");
  });
});

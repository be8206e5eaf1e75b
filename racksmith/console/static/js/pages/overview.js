// Owns: the overview page — each cluster's status (control-plane health
// from its master/etcd machines' Nodes, machines ready, release, open
// update), counts of hosts, machines and volumes by state, the newest
// backups of the control plane (ControlPlaneBackups), and the firing alerts
// of the Alertmanager racksmith up reads (polled every 10 s). Nodes and
// Volumes are read from each cluster's own API, through the cluster proxy.

import { alerts, keyOf, N, R } from "../api.js";
import { badge, fill, h, link, progress, section, table } from "../dom.js";
import { PerCluster, follow, informer } from "../informer.js";
import { controlPlaneHealth, countBy, hostState, planDone } from "../model.js";

export function mount(el, _params, _ctx) {
  const infs = {
    clusters: informer(R.clusters), machines: informer(R.machines), hosts: informer(R.hosts),
    nodes: new PerCluster(N.nodes), volumes: new PerCluster(N.volumes), plans: informer(R.plans),
    backups: informer(R.backups),
  };
  const clustersBox = h("div");
  const countsBox = h("div", { class: "grid" });
  const alertsBox = h("div");
  const backupsBox = h("div");
  el.append(h("h1", {}, "Overview"),
            section("Clusters", clustersBox),
            section("Counts by state", countsBox),
            section("Backups", backupsBox),
            section("Firing alerts", alertsBox));

  const render = () => {
    const machines = infs.machines.list();
    const plans = infs.plans.list();
    const clusters = infs.clusters.list();
    fill(clustersBox, !infs.clusters.synced ? h("p", { class: "muted" }, "Loading…")
      : !clusters.length ? h("p", { class: "muted" }, "No cluster yet: create one with kubectl (see docs/cluster.md).")
      : table({
        label: "Clusters", rowKey: (c) => c.metadata.name,
        rows: clusters,
        columns: [
          { key: "name", title: "Cluster", render: (c) => `${c.metadata.namespace}/${c.metadata.name}` },
          { key: "controlPlane", title: "Control plane", render: (c) => {
            const nodes = new Map(infs.nodes.listIn(keyOf(c)).map((n) => [n.metadata.name, n]));
            const cp = controlPlaneHealth(c.metadata.name, machines, nodes);
            const word = !cp.total ? "none" : cp.healthy ? "Healthy"
              : cp.quorum ? "Degraded" : "Down";
            return h("span", {}, badge(word, cp.healthy ? "ok" : cp.quorum ? "busy" : "err"),
              " ", h("span", { class: "muted" }, `${cp.ready}/${cp.total} members Ready`));
          } },
          { key: "endpoint", title: "API endpoint", render: (c) => {
            const s = c.status || {};
            const ep = s.controlPlaneEndpoint;
            if (!ep) return h("span", { class: "muted" }, "not known yet");
            const reach = (s.conditions || []).find((x) => x.type === "ControlPlaneReachable") || {};
            const word = reach.status === "True" ? "Reachable"
              : reach.status === "False" ? (reach.reason || "Unreachable") : "Not probed";
            return h("span", { title: reach.message || "" }, `${ep.host}:${ep.port} `,
              badge(word, reach.status === "True" ? "ok" : reach.status === "False" ? "err" : "busy"));
          } },
          { key: "machines", title: "Machines ready", render: (c) => {
            const s = c.status || {};
            const total = s.machinesTotal || 0;
            return h("div", {}, `${s.machinesReady || 0}/${total}`,
              progress(total ? (100 * (s.machinesReady || 0)) / total : 0,
                       `Machines ready in ${c.metadata.name}`));
          } },
          { key: "release", title: "Release", render: (c) => {
            const s = c.status || {};
            return s.release && s.release !== c.spec.release
              ? `${s.release} → ${c.spec.release}` : c.spec.release;
          } },
          { key: "update", title: "Update", render: (c) => {
            const open = plans.filter((p) => p.spec.cluster === c.metadata.name &&
              p.metadata.namespace === c.metadata.namespace && !planDone(p));
            if (!open.length) return h("span", { class: "muted" }, "none open");
            const p = open[0];
            return link(`#/updates/${p.metadata.namespace}/${p.metadata.name}`,
                        `${p.spec.target}: ${(p.status || {}).phase || "NotStarted"}`);
          } },
        ],
      }));
    const counts = (title, items, keyFn, hash) => h("div", { class: "card" },
      h("h3", {}, link(hash, title)),
      h("div", { class: "counts", role: "list", "aria-label": `${title} by state` },
        Object.entries(countBy(items, keyFn)).map(([k, n]) =>
          h("div", { class: "count", role: "listitem", "data-name": k },
            h("b", {}, String(n)), badge(k)))));
    const backups = infs.backups.list().slice().sort((a, b) =>
      String(b.metadata.creationTimestamp).localeCompare(String(a.metadata.creationTimestamp)));
    fill(backupsBox, !infs.backups.synced ? h("p", { class: "muted" }, "Loading…")
      : !backups.length ? h("p", { class: "muted" }, "No backup yet: racksmith up --backup-every, or create a ControlPlaneBackup (docs/backup.md).")
      : table({
        label: "Backups", rowKey: (b) => b.metadata.name,
        rows: backups.slice(0, 5),
        columns: [
          { key: "name", title: "Backup", render: (b) => b.metadata.name },
          { key: "phase", title: "Phase", render: (b) => {
            const phase = (b.status || {}).phase || "Pending";
            return badge(phase, phase === "Completed" ? "ok" : phase === "Failed" ? "err" : "busy");
          } },
          { key: "reason", title: "Reason", render: (b) => (b.spec || {}).reason || "Manual" },
          { key: "rv", title: "Resource version", render: (b) => String((b.status || {}).resourceVersion || "") },
          { key: "taken", title: "Taken", render: (b) => (b.status || {}).completedAt || b.metadata.creationTimestamp || "" },
        ],
      }));
    fill(countsBox,
      counts("Hosts", infs.hosts.list(), hostState, "#/hosts"),
      counts("Machines", machines, (m) => (m.status || {}).phase || "Pending", "#/machines"),
      counts("Volumes", infs.volumes.list(), (v) => (v.status || {}).phase || "Pending", "#/machines"));
  };

  let timer = null;
  let stopped = false;
  const poll = async () => {
    try {
      const a = await alerts();
      if (stopped) return;
      fill(alertsBox,
        a.error ? h("p", { role: "alert" }, a.error) : null,
        !a.source ? h("p", { class: "muted" }, "No Alertmanager configured (racksmith up --alertmanager-url).") : null,
        a.source && !a.alerts.length && !a.error ? h("p", { class: "muted" }, `No alert firing (${a.source}).`) : null,
        a.alerts.length ? table({
          label: "Firing alerts", rowKey: (x) => (x.labels || {}).alertname,
          rows: a.alerts,
          columns: [
            { key: "name", title: "Alert", render: (x) => badge((x.labels || {}).alertname, "err") },
            { key: "severity", title: "Severity", render: (x) => (x.labels || {}).severity || "" },
            { key: "summary", title: "Summary", render: (x) => (x.annotations || {}).summary
              || (x.annotations || {}).description || "" },
            { key: "since", title: "Since", render: (x) => x.startsAt || "" },
          ],
        }) : null);
    } catch (e) {
      if (!stopped) fill(alertsBox, h("p", { role: "alert" }, `Alerts unavailable: ${e.message}`));
    }
    if (!stopped) timer = setTimeout(poll, 10000);
  };
  poll();
  const unfollow = follow(Object.values(infs), render);
  return () => { stopped = true; clearTimeout(timer); unfollow(); };
}

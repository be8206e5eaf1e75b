// Owns: the create-machine form (#/machines/new), after MetalK8s' "Create a
// New Node": name, namespace, cluster, roles, which hosts to claim (any, or
// the hosts of one rack, with live counts of available hosts), host profile,
// rack label and update group. It POSTs a Machine; the API validates it and
// its field errors are shown in the form. Only required fields are checked here.

import { ApiError, create, inNamespace, R } from "../api.js";
import { fill, h, link } from "../dom.js";
import { follow, informer } from "../informer.js";

const RACK = "metal.racksmith.io/rack";
const UPDATE_GROUP = "lcm.racksmith.io/update-group";
const ROLES = ["master", "etcd", "node", "infra"];

/** Hosts a new machine could claim now (same rule as the Machine controller). */
function availableHosts(hosts, ns) {
  return hosts.filter((b) => b.metadata.namespace === ns && !b.metadata.deletionTimestamp &&
    !(b.spec || {}).consumerRef && !(b.spec || {}).externallyProvisioned &&
    (((b.status || {}).provisioning || {}).state) === "available");
}

const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;

/** Set a select's options ([[value, text]]) keeping the choice when it still exists. */
function setOptions(select, options) {
  const keep = select.value;
  const sig = JSON.stringify(options);
  if (select.dataset.sig === sig) return;
  select.dataset.sig = sig;
  fill(select, options.map(([v, t]) => h("option", { value: v }, t)));
  if (options.some(([v]) => v === keep)) select.value = keep;
}

function field(id, label, input, hint) {
  const hintId = hint ? `${id}-hint` : undefined;
  if (hintId) input.setAttribute("aria-describedby", hintId);
  return h("div", { class: "field" }, h("label", { for: id }, label), input,
           hint ? h("p", { class: "hint", id: hintId }, hint) : null);
}

export function mount(el, _params, ctx) {
  const infs = { clusters: informer(R.clusters), hosts: informer(R.hosts),
                 profiles: informer(R.profiles), groups: informer(R.updateGroups) };

  const name = h("input", { id: "m-name", name: "name", type: "text", required: true,
                            autocomplete: "off", spellcheck: "false" });
  const ns = h("input", { id: "m-namespace", name: "namespace", type: "text", required: true,
                          value: "default", autocomplete: "off", spellcheck: "false" });
  const cluster = h("select", { id: "m-cluster", name: "cluster", required: true });
  const roleBoxes = ROLES.map((r) => h("input", { type: "checkbox", id: `m-role-${r}`, name: "roles",
                                                  value: r, checked: r === "node" }));
  const host = h("select", { id: "m-host", name: "host" });
  const profile = h("select", { id: "m-profile", name: "hostProfile" });
  const rack = h("input", { id: "m-rack", name: "rack", type: "text", autocomplete: "off" });
  const group = h("select", { id: "m-group", name: "updateGroup" });
  const hostsLine = h("p", { id: "m-hosts-available", class: "hint", role: "status",
                             "aria-live": "polite" });
  const err = h("div", { class: "form-error", id: "m-error" });
  const submit = h("button", { type: "submit" }, "Create");

  const rolesSet = h("fieldset", { "aria-describedby": "m-roles-hint" },
    h("legend", {}, "Roles"),
    roleBoxes.map((b) => h("label", { class: "check", for: b.id }, b, b.value)),
    h("p", { class: "hint", id: "m-roles-hint" },
      "master + etcd make a control-plane machine. Every machine runs the node components, " +
      "but only machines with the node role accept ordinary workloads: the others are " +
      "dedicated and tainted with their roles."));

  const form = h("form", { class: "card machine-form", "aria-labelledby": "m-title", novalidate: true },
    field("m-name", "Name", name,
          "Lower-case letters, digits and '-' (a DNS-1123 name, e.g. demo-worker-7); also the node's name."),
    field("m-namespace", "Namespace", ns, "Namespace of the cluster and of its hosts."),
    field("m-cluster", "Cluster", cluster),
    rolesSet,
    field("m-host", "Host", host,
          "Claims the first available host that matches (spec.hostSelector)."),
    hostsLine,
    field("m-profile", "Host profile", profile, "Optional: disks and kernel of the host (spec.hostProfile)."),
    field("m-rack", "Rack label", rack,
          `Optional: sets ${RACK} on the machine (the update planner's failure domain).`),
    field("m-group", "Update group", group, `Optional: sets ${UPDATE_GROUP} on the machine.`),
    err,
    h("div", { class: "row actions" }, submit,
      link("#/machines", "Cancel", { class: "button secondary" })));

  el.append(h("h1", { id: "m-title" }, "Create a new machine"), form);

  const render = () => {
    const namespace = ns.value.trim();
    const inNs = (o) => o.metadata.namespace === namespace;
    const clusters = infs.clusters.list().filter(inNs).map((c) => c.metadata.name).sort();
    setOptions(cluster, clusters.length ? clusters.map((c) => [c, c])
      : [["", infs.clusters.synced ? `No cluster in ${namespace || "this namespace"}` : "Loading…"]]);

    const avail = availableHosts(infs.hosts.list(), namespace);
    const byRack = new Map();
    for (const b of avail) {
      const r = (b.metadata.labels || {})[RACK];
      if (r) byRack.set(r, (byRack.get(r) || 0) + 1);
    }
    const chosen = host.value;
    if (chosen && !byRack.has(chosen)) byRack.set(chosen, 0);
    setOptions(host, [["", `Any available host (${avail.length} available)`],
      ...Array.from(byRack.keys()).sort().map((r) =>
        [r, `Hosts in rack ${r} (${byRack.get(r)} available)`])]);
    const matching = host.value ? byRack.get(host.value) || 0 : avail.length;
    fill(hostsLine, !infs.hosts.synced ? "Counting hosts…"
      : `${plural(avail.length, "host")} available in ${namespace || "—"}` +
        (host.value ? `; ${matching} in rack ${host.value}` : "") +
        (matching ? "" : " — the machine will stay Pending until a matching host is available"));

    setOptions(profile, [["", "None (the host's default)"],
      ...infs.profiles.list().filter(inNs).map((p) => p.metadata.name).sort().map((p) => [p, p])]);
    setOptions(group, [["", "None"],
      ...infs.groups.list().filter(inNs).map((g) => g.metadata.name).sort().map((g) => [g, g])]);
  };

  const fields = { "metadata.name": name, "metadata.namespace": ns, "spec.clusterName": cluster,
                   "spec.roles": roleBoxes[0], "spec.hostSelector": host, "spec.hostProfile": profile,
                   [`metadata.labels.${RACK}`]: rack, [`metadata.labels.${UPDATE_GROUP}`]: group };
  const allInputs = [name, ns, cluster, host, profile, rack, group, ...roleBoxes];
  const showError = (text, bad) => {
    for (const i of allInputs) {
      i.removeAttribute("aria-invalid");
      const ids = (i.getAttribute("aria-describedby") || "").split(" ").filter((x) => x && x !== err.id);
      if (bad.includes(i)) { i.setAttribute("aria-invalid", "true"); ids.push(err.id); }
      if (ids.length) i.setAttribute("aria-describedby", ids.join(" ")); else i.removeAttribute("aria-describedby");
    }
    err.setAttribute("role", "alert");
    err.textContent = text;
    (bad[0] || err).focus?.();
  };

  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const obj = {
      apiVersion: "cluster.racksmith.io/v1alpha1", kind: "Machine",
      metadata: { name: name.value.trim(), namespace: ns.value.trim() },
      spec: { clusterName: cluster.value,
              roles: roleBoxes.filter((b) => b.checked).map((b) => b.value) },
    };
    const missing = [];
    if (!obj.metadata.name) missing.push(["Name", name]);
    if (!obj.metadata.namespace) missing.push(["Namespace", ns]);
    if (!obj.spec.clusterName) missing.push(["Cluster", cluster]);
    if (!obj.spec.roles.length) missing.push(["Roles (at least one)", roleBoxes[0]]);
    if (missing.length) {
      showError(`Required: ${missing.map(([t]) => t).join(", ")}.`, missing.map(([, i]) => i));
      return;
    }
    const labels = {};
    if (rack.value.trim()) labels[RACK] = rack.value.trim();
    if (group.value) labels[UPDATE_GROUP] = group.value;
    if (Object.keys(labels).length) obj.metadata.labels = labels;
    if (host.value) obj.spec.hostSelector = { matchLabels: { [RACK]: host.value } };
    if (profile.value) obj.spec.hostProfile = profile.value;
    submit.disabled = true;
    err.textContent = "";
    try {
      await create(inNamespace(R.machines, obj.metadata.namespace), obj);
      const { namespace: n, name: m } = obj.metadata;
      ctx.notify(`Machine ${n}/${m} created; it claims a host and deploys.`);
      ctx.navigate(`#/machines/${encodeURIComponent(n)}/${encodeURIComponent(m)}`);
    } catch (e) {
      if (!(e instanceof ApiError)) { showError(`Could not create the machine: ${e.message || e}`, []); return; }
      const bad = e.causes.map((c) => {
        const f = Object.keys(fields).find((k) => (c.field || "").startsWith(k));
        return f ? fields[f] : null;
      }).filter(Boolean);
      showError(`The API refused the machine (${e.code}${e.reason ? ` ${e.reason}` : ""}):\n${e.describe()}`,
                Array.from(new Set(bad)));
    } finally {
      submit.disabled = false;
    }
  });

  ns.addEventListener("input", render);
  host.addEventListener("change", render);
  const unfollow = follow(Object.values(infs), render);
  name.focus();
  return unfollow;
}

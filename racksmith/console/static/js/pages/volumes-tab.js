// Owns: the Volumes tab of a machine (#/machines/<ns>/<name>/volumes): the
// node's Volumes (cluster-scoped, spec.nodeName == the machine's name) live
// with their PersistentVolume, a "Create a volume" form (sparse file, raw
// block device or LVM logical volume) and deletion — refused, with the
// reason shown, when model.volumeDeletionBlocker says so (a Bound PV).
// Volumes, PVs and StorageClasses live in the machine's cluster's own API
// (spec.clusterName, in the machine's namespace): read, created and deleted
// through the cluster proxy, whose verbs the user's role must allow.

import { ApiError, N, R, clusterKeyOf, create, inCluster, remove } from "../api.js";
import { deniedInCluster } from "../permissions.js";
import { badge, condition, fill, h, progress, section, table } from "../dom.js";
import { clusterInformer, follow, informer } from "../informer.js";
import { volumeDeletionBlocker } from "../model.js";
import { morph } from "./machines.js";

const BACKENDS = [
  ["sparseLoopDevice", "Sparse file (sparseLoopDevice)"],
  ["rawBlockDevice", "Raw block device"],
  ["lvmLogicalVolume", "LVM logical volume"],
];

/** Phase as shown: the controller's, else Terminating/Pending. */
function volumePhase(v) {
  if ((v.status || {}).phase) return v.status.phase;
  return v.metadata.deletionTimestamp ? "Terminating" : "Pending";
}

function backendText(spec) {
  if (spec.sparseLoopDevice) return `Sparse file, ${spec.sparseLoopDevice.size}`;
  if (spec.rawBlockDevice) return `Device ${spec.rawBlockDevice.devicePath}`;
  if (spec.lvmLogicalVolume) return `LV in ${spec.lvmLogicalVolume.vgName}, ${spec.lvmLogicalVolume.size}`;
  return "";
}

function requestedSize(spec) {
  return (spec.sparseLoopDevice || spec.lvmLogicalVolume || {}).size || "";
}

function field(id, label, input, hint) {
  if (hint) input.setAttribute("aria-describedby", `${id}-hint`);
  return h("div", { class: "field" }, h("label", { for: id }, label), input,
           hint ? h("p", { class: "hint", id: `${id}-hint` }, hint) : null);
}

/** The tab: once the machine (and so its cluster) is known, its volumes. */
export function mountVolumes(el, ns, machineName, ctx) {
  const machines = informer(R.machines);
  const wait = h("div");
  el.append(wait);
  let inner = null;
  const unfollow = follow([machines], () => {
    if (inner) return;
    const m = machines.get(`${ns}/${machineName}`);
    const clusterKey = m ? clusterKeyOf(m) : "";
    if (!clusterKey) {
      morph(wait, h("p", machines.synced ? { role: "alert" } : { class: "muted" },
        machines.synced ? `Machine ${ns}/${machineName} does not exist (or was just deleted).`
          : "Loading…"));
      return;
    }
    wait.remove();
    inner = mountClusterVolumes(el, clusterKey, machineName, ctx);
  });
  return () => { unfollow(); if (inner) inner(); };
}

function mountClusterVolumes(el, clusterKey, machineName, ctx) {
  const node = machineName;
  const [clusterNs, clusterName] = clusterKey.split("/");
  const volumesPath = inCluster(clusterNs, clusterName, N.volumes);
  const vols = clusterInformer(clusterKey, N.volumes);
  const pvs = clusterInformer(clusterKey, N.pvs);
  const classes = clusterInformer(clusterKey, N.storageClasses);

  // --- the create form ---
  const vName = h("input", { id: "vol-name", type: "text", required: true, autocomplete: "off",
                             spellcheck: "false" });
  const vClass = h("select", { id: "vol-class", required: true });
  const vMode = h("select", { id: "vol-mode" },
    h("option", { value: "Filesystem" }, "Filesystem"), h("option", { value: "Block" }, "Block"));
  const vBackend = h("select", { id: "vol-backend" },
    BACKENDS.map(([v, t]) => h("option", { value: v }, t)));
  const vSize = h("input", { id: "vol-size", type: "text", value: "1Gi", autocomplete: "off" });
  const vDevice = h("input", { id: "vol-device", type: "text", autocomplete: "off",
                               placeholder: "/dev/disk/by-id/..." });
  const vVg = h("input", { id: "vol-vg", type: "text", autocomplete: "off" });
  const sizeField = field("vol-size", "Size", vSize, "A quantity, e.g. 1Gi or 500Mi.");
  const deviceField = field("vol-device", "Device path", vDevice,
    "An existing disk or partition; prefer a stable /dev/disk/by-id/... path. A device holding data is refused.");
  const vgField = field("vol-vg", "Volume group", vVg, "The LVM volume group to create the logical volume in.");
  const formErr = h("div", { class: "form-error", id: "vol-error" });
  const submit = h("button", { type: "submit" }, "Create volume");
  const form = h("form", { class: "volume-form", "aria-label": "Create a volume", novalidate: true },
    h("fieldset", {},
      h("legend", {}, "Create a volume"),
      h("div", { class: "form-grid" },
        field("vol-name", "Volume name", vName, "A DNS-1123 name, unique in the cluster; also the PV's name."),
        field("vol-class", "Storage class", vClass),
        field("vol-mode", "Mode", vMode, "Filesystem: formatted with the class' fsType. Block: raw device."),
        field("vol-backend", "Backend", vBackend),
        sizeField, deviceField, vgField),
      formErr,
      submit));
  const showBackend = () => {
    const b = vBackend.value;
    sizeField.hidden = b === "rawBlockDevice";
    deviceField.hidden = b !== "rawBlockDevice";
    vgField.hidden = b !== "lvmLogicalVolume";
  };
  vBackend.addEventListener("change", showBackend);
  showBackend();
  // The form is disabled, with the reason, for a role that may not create Volumes.
  const createWhy = h("p", { class: "hint", id: "vol-create-why" });
  submit.after(createWhy);
  const checkCreate = () => {
    const why = deniedInCluster("create", "volumes", clusterKey, checkCreate);
    submit.disabled = !!why;
    createWhy.textContent = why || "";
    if (why) submit.setAttribute("aria-describedby", createWhy.id);
    else submit.removeAttribute("aria-describedby");
  };
  checkCreate();

  const showFormError = (text, bad = []) => {
    for (const i of [vName, vClass, vSize, vDevice, vVg]) {
      i.removeAttribute("aria-invalid");
      const ids = (i.getAttribute("aria-describedby") || "").split(" ").filter((x) => x && x !== formErr.id);
      if (bad.includes(i)) { i.setAttribute("aria-invalid", "true"); ids.push(formErr.id); }
      if (ids.length) i.setAttribute("aria-describedby", ids.join(" ")); else i.removeAttribute("aria-describedby");
    }
    formErr.setAttribute("role", "alert");
    formErr.textContent = text;
  };

  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const backend = vBackend.value;
    const name = vName.value.trim();
    const missing = [];
    if (!name) missing.push(["Volume name", vName]);
    if (!vClass.value) missing.push(["Storage class", vClass]);
    if (backend !== "rawBlockDevice" && !vSize.value.trim()) missing.push(["Size", vSize]);
    if (backend === "rawBlockDevice" && !vDevice.value.trim()) missing.push(["Device path", vDevice]);
    if (backend === "lvmLogicalVolume" && !vVg.value.trim()) missing.push(["Volume group", vVg]);
    if (missing.length) {
      showFormError(`Required: ${missing.map(([t]) => t).join(", ")}.`, missing.map(([, i]) => i));
      missing[0][1].focus();
      return;
    }
    const spec = { nodeName: node, storageClassName: vClass.value, mode: vMode.value };
    if (backend === "sparseLoopDevice") spec.sparseLoopDevice = { size: vSize.value.trim() };
    if (backend === "rawBlockDevice") spec.rawBlockDevice = { devicePath: vDevice.value.trim() };
    if (backend === "lvmLogicalVolume") spec.lvmLogicalVolume = { vgName: vVg.value.trim(), size: vSize.value.trim() };
    submit.disabled = true;
    try {
      await create(volumesPath, { apiVersion: "storage.racksmith.io/v1alpha1", kind: "Volume",
                                metadata: { name }, spec });
      showFormError("");
      formErr.removeAttribute("role");
      vName.value = "";
      ctx.notify(`Volume ${name} created on ${node}; the agent prepares it.`);
      vName.focus();
    } catch (e) {
      const bad = e instanceof ApiError ? e.causes.map((c) => {
        const f = c.field || "";
        return f === "metadata.name" ? vName : f.startsWith("spec.storageClassName") ? vClass
          : f.includes("size") ? vSize : f.includes("devicePath") ? vDevice : f.includes("vgName") ? vVg : null;
      }).filter(Boolean) : [];
      showFormError(e instanceof ApiError
        ? `The API refused the volume (${e.code}${e.reason ? ` ${e.reason}` : ""}):\n${e.describe()}`
        : `Could not create the volume: ${e.message || e}`, bad);
    } finally {
      checkCreate();
    }
  });

  // --- the table ---
  const listErr = h("div", { class: "form-error", id: "vol-delete-error" });
  const tableBox = h("div");
  el.append(section(`Volumes of node ${node}`,
    h("p", { class: "hint" }, `In the API of cluster ${clusterKey}.`), form, listErr, tableBox));

  const onDelete = async (name) => {
    const v = vols.get(name);
    if (!v) return;
    const why = volumeDeletionBlocker(v, pvs.get(name)) || deniedDelete();
    if (why) { listErr.setAttribute("role", "alert"); listErr.textContent = `Cannot delete: ${why}`; return; }
    if (!window.confirm(`Delete volume ${name}?\n\nIts PersistentVolume is removed and the agent ` +
      "destroys the storage (sparse file removed, device signatures wiped): its data is lost.")) return;
    listErr.textContent = "";
    try {
      await remove(`${volumesPath}/${encodeURIComponent(name)}`);
      ctx.notify(`Deleting volume ${name}.`);
    } catch (e) {
      listErr.setAttribute("role", "alert");
      listErr.textContent = `Could not delete volume ${name}: ${e instanceof ApiError ? e.describe() : e.message || e}`;
    }
  };
  // One delegated handler: the table is morphed in place, its buttons carry only names.
  tableBox.addEventListener("click", (ev) => {
    const btn = ev.target.closest("button[data-delete]");
    if (btn && !btn.disabled) onDelete(btn.getAttribute("data-delete"));
  });

  const deniedDelete = () => deniedInCluster("delete", "volumes", clusterKey, () => render());
  const render = () => {
    const names = classes.list().map((c) => c.metadata.name).sort();
    const opts = names.length ? names.map((n) => [n, n])
      : [["", classes.synced ? "No StorageClass: create one (docs/volumes.md)" : "Loading…"]];
    const sig = JSON.stringify(opts);
    if (vClass.dataset.sig !== sig) {
      const keep = vClass.value;
      vClass.dataset.sig = sig;
      fill(vClass, opts.map(([v, t]) => h("option", { value: v }, t)));
      if (names.includes(keep)) vClass.value = keep;
    }
    const rows = vols.list().filter((v) => (v.spec || {}).nodeName === node)
      .sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
    if (!vols.synced && !rows.length) {
      morph(tableBox, h("p", vols.error ? { role: "alert" } : { class: "muted" }, vols.error
        ? `The API of cluster ${clusterKey} does not answer: ${vols.error}` : "Loading…"));
      return;
    }
    morph(tableBox, table({
      label: "Volumes", rowKey: (v) => v.metadata.name, rows,
      empty: `No volume on ${node} yet.`,
      columns: [
        { key: "name", title: "Name", render: (v) => h("span", { class: "nowrap" }, v.metadata.name) },
        { key: "storageClass", title: "Storage class", render: (v) => v.spec.storageClassName },
        { key: "mode", title: "Mode", render: (v) => v.spec.mode || "Filesystem" },
        { key: "backend", title: "Backend", render: (v) => backendText(v.spec) },
        { key: "size", title: "Size", render: (v) => (v.status || {}).size || requestedSize(v.spec) },
        { key: "phase", title: "Phase", render: (v) => {
          const ph = volumePhase(v);
          return h("div", {}, badge(ph),
            ph === "Pending" ? progress(null, `Preparing ${v.metadata.name}`) : null);
        } },
        { key: "message", title: "Message", render: (v) => {
          const c = condition(v, "Ready");
          if (!c) return "";
          const text = [c.reason, c.message].filter(Boolean).join(": ");
          return c.status === "False" ? h("span", { class: "tone-err" }, text) : text;
        } },
        { key: "pv", title: "PersistentVolume", render: (v) => {
          const pv = pvs.get(v.metadata.name);
          if (!pv) return h("span", { class: "muted" }, "none");
          const phase = (pv.status || {}).phase || "Pending";
          const ref = (pv.spec || {}).claimRef;
          return h("span", {}, badge(phase), phase === "Bound" && ref
            ? h("span", {}, " to claim ", h("code", {}, `${ref.namespace}/${ref.name}`)) : null);
        } },
        { key: "actions", title: "Actions", render: (v) => {
          const name = v.metadata.name;
          const why = volumeDeletionBlocker(v, pvs.get(name)) || deniedDelete();
          const whyId = `vol-why-${name}`;
          return h("div", { class: "cell-action" },
            h("button", { type: "button", class: "danger", "data-delete": name,
                          "aria-label": `Delete ${name}`, disabled: !!why, title: why || undefined,
                          "aria-describedby": why ? whyId : undefined }, "Delete"),
            why ? h("p", { class: "hint", id: whyId }, why) : null);
        } },
      ],
    }));
  };
  return follow([vols, pvs, classes], render);
}

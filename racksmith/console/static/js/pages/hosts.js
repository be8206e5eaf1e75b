// Owns: the hosts page (#/hosts) — every BareMetalHost in a virtual table
// (name, provisioning state with a moving bar while busy, power, desired
// power, consumer, error, rack, age), counts by provisioning state and a
// text filter. Built for thousands of hosts: the first informer page is
// drawn at once, only the rows in view are in the DOM, and a live update
// re-renders the rows only (the filter input keeps its text and focus).

import { R } from "../api.js";
import { age, badge, fill, h, link, progress, uid, virtualTable } from "../dom.js";
import { follow, informer } from "../informer.js";
import { HOST_BUSY, countBy, hostError, hostPower, hostState } from "../model.js";

const RACK_LABEL = "metal.racksmith.io/rack";
const collator = new Intl.Collator(undefined, { numeric: true });

const rack = (host) => ((host.metadata.labels || {})[RACK_LABEL]) || "";

function consumer(host) {
  const ref = (host.spec || {}).consumerRef;
  if (!ref || !ref.name) return null;
  const ns = ref.namespace || host.metadata.namespace;
  if (ref.kind === "Machine") return link(`#/machines/${ns}/${ref.name}`, ref.name);
  return h("span", {}, `${ref.kind ? `${ref.kind}/` : ""}${ref.name}`);
}

// Lower-case text the filter matches, computed once per object version
// (an update replaces the object, so a WeakMap never goes stale).
const haystacks = new WeakMap();
function haystack(host) {
  let s = haystacks.get(host);
  if (s === undefined) {
    const ref = (host.spec || {}).consumerRef || {};
    s = [host.metadata.name, hostState(host), ref.name || "", hostError(host), rack(host)]
      .join("\n").toLowerCase();
    haystacks.set(host, s);
  }
  return s;
}

const COLUMNS = [
  { key: "name", title: "Name", width: "minmax(120px, 1.1fr)",
    render: (o) => link(`#/hosts/${o.metadata.namespace}/${o.metadata.name}`, o.metadata.name) },
  { key: "state", title: "State", width: "minmax(200px, 1.5fr)", render: (o) => {
    const st = hostState(o);
    if (!HOST_BUSY.includes(st)) return badge(st);
    return h("span", { class: "host-state" }, badge(st), progress(null, `${o.metadata.name} ${st}`));
  } },
  { key: "power", title: "Power", width: "70px", render: (o) => hostPower(o) || "—" },
  { key: "online", title: "Online", width: "70px",
    render: (o) => ((o.spec || {}).online ? "on" : "off") },
  { key: "consumer", title: "Consumer", width: "minmax(120px, 1.1fr)",
    render: (o) => consumer(o) || h("span", { class: "muted" }, "—") },
  { key: "error", title: "Error", width: "minmax(160px, 2fr)", render: (o) => {
    const err = hostError(o);
    return err ? h("span", { class: "tone-err", title: err }, err) : "";
  } },
  { key: "rack", title: "Rack", width: "minmax(80px, .6fr)", render: rack },
  { key: "age", title: "Age", width: "80px", render: (o) => age(o.metadata.creationTimestamp) },
];

const byName = (a, b) => collator.compare(a.metadata.name, b.metadata.name)
  || collator.compare(a.metadata.namespace || "", b.metadata.namespace || "");

export function mount(el, _params, _ctx) {
  const hosts = informer(R.hosts);
  const filterId = uid("filter");
  const filter = h("input", { id: filterId, type: "search", autocomplete: "off", class: "filter-input",
                              placeholder: "name, state, consumer, error, rack",
                              "aria-controls": "hosts-table" });
  const summary = h("p", { class: "summary", "aria-live": "polite" }, h("span", { class: "muted" }, "Loading hosts…"));
  const shown = h("span", { class: "muted", "aria-live": "polite" });
  const errorBox = h("div");
  const vt = virtualTable({ label: "Hosts", columns: COLUMNS, rowKey: (o) => o.metadata.name,
                            empty: "No host to show." });
  vt.el.id = "hosts-table";
  vt.el.hidden = true;
  el.append(h("h1", {}, "Hosts"), summary, errorBox,
            h("div", { class: "toolbar" },
              h("div", {}, h("label", { for: filterId }, "Filter hosts"), filter), shown),
            vt.el);

  let lastSummary = "";
  const render = () => {
    fill(errorBox, hosts.error ? h("p", { role: "alert", class: "form-error" },
                                   `Hosts: ${hosts.error}`) : null);
    if (!hosts.items.size && !hosts.synced) return;
    const all = hosts.list();
    // The summary changes rarely: rebuild it only when its text changes.
    const counts = countBy(all, hostState);
    const key = JSON.stringify(counts) + hosts.synced;
    if (key !== lastSummary) {
      lastSummary = key;
      fill(summary, all.length
        ? [h("b", {}, `${all.length}${hosts.synced ? "" : "+"} hosts`), ": ",
           Object.entries(counts).map(([st, n], i) => [i ? " · " : "", `${n} `, badge(st)])]
        : h("span", { class: "muted" }, "No BareMetalHost yet: apply some with kubectl (see docs/baremetal.md)."));
    }
    const q = filter.value.trim().toLowerCase();
    const rows = q ? all.filter((o) => haystack(o).includes(q)) : all;
    rows.sort(byName);
    shown.textContent = q ? `${rows.length} of ${all.length} match` : "";
    vt.el.hidden = false;
    vt.setRows(rows);
  };
  filter.addEventListener("input", render);
  return follow([hosts], render);
}

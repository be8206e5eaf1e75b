// Owns: the events page (#/events) — every core/v1 Event of every
// namespace, newest first, in a virtual table (last seen, type, object
// linked to its host or machine page, reason, message, count), with a text
// filter and a type filter. Live updates re-render the rows only: the
// filter input and the select keep their value and focus.

import { R } from "../api.js";
import { age, badge, fill, h, link, time, uid, virtualTable } from "../dom.js";
import { follow, informer } from "../informer.js";
import { eventObjectRoute, eventTime, eventsNewestFirst } from "../model.js";

const objectText = (ev) => {
  const o = ev.involvedObject || {};
  return `${o.kind ? `${o.kind}/` : ""}${o.name || ""}`;
};

// Lower-case text the filter matches, once per object version.
const haystacks = new WeakMap();
function haystack(ev) {
  let s = haystacks.get(ev);
  if (s === undefined) {
    s = [objectText(ev), ev.reason || "", ev.message || ""].join("\n").toLowerCase();
    haystacks.set(ev, s);
  }
  return s;
}

const COLUMNS = [
  { key: "lastSeen", title: "Last seen", width: "100px", render: (e) => {
    const ts = eventTime(e);
    return ts ? h("span", { title: time(ts) }, age(ts)) : "";
  } },
  { key: "type", title: "Type", width: "100px",
    render: (e) => badge(e.type, e.type === "Warning" ? "err" : "plain") },
  { key: "object", title: "Object", width: "minmax(180px, 1.3fr)", render: (e) => {
    const route = eventObjectRoute(e);
    const text = objectText(e);
    return route ? link(route, text, { title: text }) : h("span", { title: text }, text);
  } },
  { key: "reason", title: "Reason", width: "minmax(130px, .9fr)",
    render: (e) => h("span", { title: e.reason || "" }, e.reason || "") },
  { key: "message", title: "Message", width: "minmax(240px, 3fr)",
    render: (e) => h("span", { title: e.message || "" }, e.message || "") },
  { key: "count", title: "Count", width: "70px", render: (e) => String(e.count || 1) },
];

export function mount(el, _params, _ctx) {
  const events = informer(R.events);
  const filterId = uid("filter");
  const typeId = uid("type");
  const filter = h("input", { id: filterId, type: "search", autocomplete: "off", class: "filter-input",
                              placeholder: "kind, name, reason, message" });
  const type = h("select", { id: typeId, class: "type-select" },
    h("option", { value: "" }, "All"), h("option", { value: "Normal" }, "Normal"),
    h("option", { value: "Warning" }, "Warning"));
  const summary = h("p", { class: "summary" }, h("span", { class: "muted" }, "Loading events…"));
  const shown = h("span", { class: "muted", "aria-live": "polite" });
  const errorBox = h("div");
  const vt = virtualTable({ label: "Events", columns: COLUMNS, rowKey: (e) => e.metadata.name,
                            empty: "No event to show." });
  vt.el.hidden = true;
  el.append(h("h1", {}, "Events"), summary, errorBox,
            h("div", { class: "toolbar" },
              h("div", {}, h("label", { for: filterId }, "Filter events"), filter),
              h("div", {}, h("label", { for: typeId }, "Type"), type), shown),
            vt.el);

  let sorted = [];
  let dirty = true;
  const render = () => {
    fill(errorBox, events.error ? h("p", { role: "alert", class: "form-error" },
                                    `Events: ${events.error}`) : null);
    if (!events.items.size && !events.synced) return;
    // Re-sort only when the informer changed (not on each key stroke).
    if (dirty) { sorted = eventsNewestFirst(events.list()); dirty = false; }
    const warnings = sorted.reduce((n, e) => n + (e.type === "Warning" ? 1 : 0), 0);
    fill(summary, sorted.length
      ? [h("b", {}, `${sorted.length}${events.synced ? "" : "+"} events`), ", ",
         warnings ? badge(`${warnings} warning${warnings === 1 ? "" : "s"}`, "err") : "no warning"]
      : h("span", { class: "muted" }, "No event yet."));
    const q = filter.value.trim().toLowerCase();
    const t = type.value;
    const rows = q || t ? sorted.filter((e) => (!t || e.type === t) && (!q || haystack(e).includes(q)))
      : sorted;
    shown.textContent = q || t ? `${rows.length} of ${sorted.length} match` : "";
    vt.el.hidden = false;
    vt.setRows(rows);
  };
  filter.addEventListener("input", render);
  type.addEventListener("change", render);
  // Any informer change must re-sort; a filter change need not.
  return follow([events], () => { dirty = true; render(); });
}

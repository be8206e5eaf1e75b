// Owns: building DOM (h), formatting (age, duration, bytes), the shared
// widgets (progress bar, badge, tables — the virtual table renders only the
// rows in view, so a list of thousands stays fast) and tabs.

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (k === "text") el.textContent = v;
    else if (k === "value" && "value" in el) el.value = v;
    else if (k === "checked" || k === "disabled" || k === "selected") el[k] = !!v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

/** Replace the children of `el`. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

let idSeq = 0;
export const uid = (prefix = "id") => `${prefix}-${++idSeq}`;

// --- formatting -------------------------------------------------------------

export function age(ts, now = Date.now()) {
  if (!ts) return "";
  return duration(now - Date.parse(ts));
}

export function duration(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return "";
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m${s % 60 ? `${s % 60}s` : ""}`;
  const hrs = Math.floor(m / 60);
  if (hrs < 48) return `${hrs}h${m % 60 ? `${m % 60}m` : ""}`;
  return `${Math.floor(hrs / 24)}d`;
}

export function bytes(n) {
  if (n === null || n === undefined) return "";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = Number(n);
  let i = 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return `${v >= 10 || i === 0 ? Math.round(v) : v.toFixed(1)} ${units[i]}`;
}

export function time(ts) {
  if (!ts) return "";
  const d = new Date(ts);
  return d.toLocaleString(undefined, { hour12: false });
}

// --- widgets ----------------------------------------------------------------

/** A progress bar; `value` null = indeterminate. */
export function progress(value, label) {
  const attrs = { class: "progress" + (value === null ? " indeterminate" : ""),
                  role: "progressbar", "aria-label": label, "aria-valuemin": 0,
                  "aria-valuemax": 100 };
  if (value !== null && value !== undefined) attrs["aria-valuenow"] = Math.round(value);
  const bar = h("div", { class: "bar" });
  if (value !== null && value !== undefined) bar.style.width = `${Math.max(0, Math.min(100, value))}%`;
  return h("div", attrs, bar,
           h("span", { class: "progress-text" }, value === null || value === undefined
             ? "" : `${Math.round(value)}%`));
}

const TONES = {
  ok: ["available", "provisioned", "ready", "true", "ok", "completed", "succeeded",
       "bound", "applied", "inactive", "running", "externally provisioned"],
  err: ["error", "failed", "false", "lockfailed", "blocked", "firing"],
  busy: ["registering", "inspecting", "preparing", "provisioning", "deprovisioning",
         "deleting", "powering off before delete", "pending", "deploying", "inprogress",
         "in progress", "draining", "applying", "rebooting", "terminating", "waitingfornode",
         "uncordoning", "active"],
};

/** Tone of a state word: ok, err, busy or plain. */
export function tone(word) {
  const w = String(word || "").toLowerCase();
  for (const [t, words] of Object.entries(TONES)) if (words.includes(w)) return t;
  return "plain";
}

export function badge(text, t) {
  if (text === undefined || text === null || text === "") return h("span", { class: "muted" }, "—");
  return h("span", { class: `badge tone-${t || tone(text)}` }, String(text));
}

/** A link to a route. */
export const link = (hash, text, attrs = {}) => h("a", { href: hash, ...attrs }, text);

/**
 * A native table for short lists. columns: [{key, title, render(row)}];
 * rowKey(row) goes to data-name.
 */
export function table({ label, columns, rows, rowKey, empty = "Nothing here yet." }) {
  const head = h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col" }, c.title))));
  const body = h("tbody", {}, rows.length
    ? rows.map((r) => h("tr", { "data-name": rowKey ? rowKey(r) : undefined },
        columns.map((c) => h("td", { "data-col": c.key }, c.render(r)))))
    : h("tr", {}, h("td", { colspan: columns.length, class: "muted" }, empty)));
  return h("table", { class: "table", "aria-label": label }, head, body);
}

/**
 * A virtualised table: only rows in view (plus a margin) are in the DOM.
 * columns: [{key, title, width (CSS grid track), render(row)}].
 * Returns {el, setRows(rows)}.
 */
export function virtualTable({ label, columns, rowKey, rowHeight = 36, empty = "Nothing here yet." }) {
  const template = columns.map((c) => c.width || "1fr").join(" ");
  const header = h("div", { class: "vt-row vt-head", role: "row", "aria-rowindex": 1 },
    columns.map((c) => h("div", { class: "vt-cell", role: "columnheader" }, c.title)));
  header.style.gridTemplateColumns = template;
  const spacer = h("div", { class: "vt-spacer", role: "rowgroup" });
  const viewport = h("div", { class: "vt-viewport", tabindex: 0 }, spacer);
  const el = h("div", { class: "vt", role: "table", "aria-label": label, "aria-rowcount": 1 },
               h("div", { role: "rowgroup" }, header), viewport);
  let rows = [];
  let rendered = "";
  const draw = () => {
    const height = viewport.clientHeight || 600;
    const first = Math.max(0, Math.floor(viewport.scrollTop / rowHeight) - 5);
    const last = Math.min(rows.length, first + Math.ceil(height / rowHeight) + 10);
    spacer.style.height = `${Math.max(rows.length, 1) * rowHeight}px`;
    const out = [];
    if (!rows.length) out.push(h("div", { class: "vt-row muted", role: "row" },
                                    h("div", { class: "vt-cell", role: "cell" }, empty)));
    for (let i = first; i < last; i++) {
      const r = rows[i];
      const row = h("div", { class: "vt-row", role: "row", "aria-rowindex": i + 2,
                             "data-name": rowKey(r) },
                    columns.map((c) => h("div", { class: "vt-cell", role: "cell",
                                                 "data-col": c.key }, c.render(r))));
      row.style.gridTemplateColumns = template;
      row.style.top = `${i * rowHeight}px`;
      row.style.height = `${rowHeight}px`;
      out.push(row);
    }
    rendered = `${first}:${last}`;
    fill(spacer, out);
  };
  viewport.addEventListener("scroll", () => {
    const first = Math.max(0, Math.floor(viewport.scrollTop / rowHeight) - 5);
    const height = viewport.clientHeight || 600;
    const last = Math.min(rows.length, first + Math.ceil(height / rowHeight) + 10);
    if (`${first}:${last}` !== rendered) draw();
  }, { passive: true });
  return {
    el,
    setRows(next) {
      rows = next;
      el.setAttribute("aria-rowcount", rows.length + 1);
      draw();
    },
  };
}

/** Tabs as links (each tab is a route). tabs: [{hash, title}]. */
export function tabs(label, items, current) {
  return h("nav", { class: "tabs", "aria-label": label },
    items.map((t) => h("a", { href: t.hash, class: t.hash === current ? "tab active" : "tab",
                              "aria-current": t.hash === current ? "page" : undefined },
                       t.title)));
}

/** A definition list from [term, value] pairs. */
export function facts(pairs) {
  return h("dl", { class: "facts" }, pairs.filter((p) => p).map(([k, v]) => [
    h("dt", {}, k), h("dd", {}, v === undefined || v === null || v === "" ? "—" : v)]));
}

export function section(title, ...children) {
  const id = uid("sec");
  return h("section", { class: "card", "aria-labelledby": id },
           h("h2", { id }, title), ...children);
}

/** Condition `type` of an object, or undefined. */
export function condition(obj, type) {
  return ((obj.status || {}).conditions || []).find((c) => c.type === type);
}

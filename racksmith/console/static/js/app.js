// Owns: the router (hash routes → page modules), the navigation bar,
// login/logout, page mounting (mount(el, params, ctx) → unmount) and the
// notices area. Routes: docs/design/console-contracts.md.

import { checkToken, clearToken, setToken, setUnauthorizedHandler, token } from "./api.js";
import { fill, h } from "./dom.js";
import { stopAll } from "./informer.js";

const PAGES = [
  // [pattern, module, nav section]
  [/^#\/overview$/, "overview", "overview"],
  [/^#\/hosts$/, "hosts", "hosts"],
  [/^#\/hosts\/([^/]+)\/([^/]+)$/, "host", "hosts"],
  [/^#\/machines$/, "machines", "machines"],
  [/^#\/machines\/new$/, "machine-new", "machines"],
  [/^#\/machines\/([^/]+)\/([^/]+)(?:\/(volumes|events))?$/, "machine", "machines"],
  [/^#\/updates$/, "updates", "updates"],
  [/^#\/updates\/([^/]+)\/([^/]+)$/, "updates", "updates"],
  [/^#\/events$/, "events", "events"],
];
const NAV = [["overview", "Overview"], ["hosts", "Hosts"], ["machines", "Machines"],
             ["updates", "Updates"], ["events", "Events"]];

const page = document.getElementById("page");
const nav = document.getElementById("nav");
const logoutBtn = document.getElementById("logout");
const notices = document.getElementById("notices");
let unmount = null;
let loginMessage = "";

/** Show a short message; tone "error" is announced as an alert. */
function notify(text, toneName = "ok") {
  const el = h("div", { class: `notice tone-${toneName}`,
                        role: toneName === "error" ? "alert" : "status" }, text,
               h("button", { type: "button", class: "link", "aria-label": "Dismiss",
                             onclick: () => el.remove() }, "×"));
  notices.appendChild(el);
  if (toneName !== "error") setTimeout(() => el.remove(), 6000);
}

const ctx = {
  navigate(hash) { if (location.hash === hash) route(); else location.hash = hash; },
  notify,
};

function renderNav(section) {
  fill(nav, NAV.map(([id, title]) => h("a", {
    href: `#/${id}`, class: id === section ? "active" : undefined,
    "aria-current": id === section ? "page" : undefined }, title)));
}

function showLogin() {
  nav.hidden = true;
  logoutBtn.hidden = true;
  const err = h("div", { class: "form-error", id: "login-error" });
  if (loginMessage) { err.setAttribute("role", "alert"); err.textContent = loginMessage; }
  const input = h("input", { id: "token", name: "token", type: "password",
                             autocomplete: "off", required: true,
                             "aria-describedby": "token-help login-error" });
  const submit = h("button", { type: "submit" }, "Log in");
  const form = h("form", { class: "card login", "aria-labelledby": "login-title" },
    h("h1", { id: "login-title" }, "Log in to Racksmith"),
    h("label", { for: "token" }, "API token"), input,
    h("p", { id: "token-help", class: "muted" },
      "The bearer token of your kubeconfig (the ", h("code", {}, "token"),
      " field written by racksmith up in DIR/kubeconfig). It stays in this tab only."),
    err, submit);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    submit.disabled = true;
    const t = input.value.trim();
    try {
      await checkToken(t);
      setToken(t);
      loginMessage = "";
      ctx.navigate("#/overview");
    } catch (e) {
      err.setAttribute("role", "alert");
      err.textContent = e.code === 401
        ? "The API server refused this token (401 Unauthorized)."
        : `Could not check the token: ${e.message} (the token was refused or the server is unreachable).`;
      input.setAttribute("aria-invalid", "true");
      input.focus();
    } finally {
      submit.disabled = false;
    }
  });
  fill(page, form);
  input.focus();
}

let routeSeq = 0;

async function route() {
  const seq = ++routeSeq;
  if (unmount) { try { unmount(); } catch (e) { console.error(e); } unmount = null; }
  if (!token()) {
    if (location.hash !== "#/login") history.replaceState(null, "", "#/login");
    showLogin();
    return;
  }
  if (!location.hash || location.hash === "#/login" || location.hash === "#/") {
    history.replaceState(null, "", "#/overview");
  }
  const hash = location.hash;
  const match = PAGES.map(([re, mod, sec]) => [hash.match(re), mod, sec]).find(([m]) => m);
  nav.hidden = false;
  logoutBtn.hidden = false;
  if (!match) {
    renderNav("");
    fill(page, h("h1", {}, "Not found"), h("p", {}, "No such page. ",
         h("a", { href: "#/overview" }, "Go to the overview")));
    return;
  }
  const [m, mod, section] = match;
  renderNav(section);
  fill(page, h("p", { class: "muted" }, "Loading…"));
  const params = m.slice(1).map((p) => (p === undefined ? p : decodeURIComponent(p)));
  try {
    const module = await import(`./pages/${mod}.js`);
    if (seq !== routeSeq || location.hash !== hash) return;
    fill(page);
    unmount = module.mount(page, params, ctx) || null;
    const h1 = page.querySelector("h1");
    document.title = `${h1 ? h1.textContent : "Racksmith"} · Racksmith console`;
  } catch (e) {
    console.error(e);
    if (seq !== routeSeq) return;
    fill(page, h("h1", {}, "Error"), h("p", { role: "alert" }, String(e.message || e)));
  }
}

function logout(message = "") {
  clearToken();
  stopAll();
  loginMessage = message;
  ctx.navigate("#/login");
}

setUnauthorizedHandler(() => logout("Your token was refused (401 Unauthorized); log in again."));
logoutBtn.addEventListener("click", () => logout(""));
window.addEventListener("hashchange", route);
route();

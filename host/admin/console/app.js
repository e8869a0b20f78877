// The cronbox console: a page of the admin's own public JSON API, with no
// routes of its own. Every piece of data reaches the page as a text node
// (see `h`), never as markup, so a job named <script> is shown as text.
//
// This module is the shell (login, header, routing) and the start; each
// page lives in a module of its own, the common parts in core.js.

import { T } from "./text.js";
import {
  $,
  ApiError,
  action,
  atLeast,
  call,
  field,
  get,
  h,
  hooks,
  navigated,
  newPage,
  session,
  setSession,
} from "./core.js";
import { dashboardPage } from "./dashboard.js";
import { jobPage, jobsPage } from "./jobs.js";
import { jobFormPage } from "./job-form.js";
import { runPage, runsPage } from "./runs.js";
import { modulePage, modulesPage } from "./modules.js";
import { executorsPage } from "./executors.js";
import { workflowPage, workflowRunPage, workflowsPage } from "./workflows.js";
import { adminPage } from "./admin.js";
import { auditPage } from "./audit.js";

// ---------------------------------------------------------------- shell

export function header() {
  // The audit log is an admin's to read.
  const shown = Object.entries(T.nav).filter(([key]) => key !== "audit" || atLeast("admin"));
  const nav = shown.map(([key, title]) =>
    h("a", { href: key === "dashboard" ? "#/" : `#/${key}`, "data-nav": key }, title));
  return h("header", {},
    h("span", { class: "brand" }, T.app),
    h("nav", {}, nav),
    h("span", { class: "who", id: "who" },
      T.signedInAs(session.user || "token", session.tenant, session.role)),
    h("button", { id: "logout", type: "button", on: { click: action(logout) } }, T.logout));
}

export async function logout() {
  await call("DELETE", "/api/v1/session");
  setSession(null);
  showLogin();
}

export function showLogin(message) {
  newPage();
  const error = h("p", { id: "login-error", class: "error" }, message || "");
  const user = h("input", { id: "login-user", name: "user", autocomplete: "username", required: true });
  const password = h("input", {
    id: "login-password", name: "password", type: "password",
    autocomplete: "current-password", required: true,
  });
  const form = h("form", { id: "login-form", class: "login card" },
    h("h1", {}, T.login.title),
    field(T.login.user, user),
    field(T.login.password, password),
    h("button", { id: "login-submit", type: "submit" }, T.login.submit),
    error);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      setSession(await call("POST", "/api/v1/session", { user: user.value, password: password.value }));
      start();
    } catch (failed) {
      error.textContent = failed.status === 429
        ? T.login.throttled(failed.retryAfter || "?")
        : T.login.wrong;
    }
  });
  document.body.replaceChildren(h("main", { id: "main" }, form));
}

export function start() {
  document.body.replaceChildren(header(), h("div", { id: "flash" }), h("main", { id: "main" }));
  render();
}

export const ROUTES = [
  [/^$/, dashboardPage],
  [/^jobs$/, jobsPage],
  [/^jobs\/new$/, () => jobFormPage(null, "new")],
  [/^jobs\/(\d+)$/, (id) => jobPage(id)],
  [/^jobs\/(\d+)\/edit$/, (id) => jobFormPage(id, "edit")],
  [/^jobs\/(\d+)\/copy$/, (id) => jobFormPage(id, "copy")],
  [/^runs$/, runsPage],
  [/^runs\/(\d+)$/, (id) => runPage(id)],
  [/^workflows$/, workflowsPage],
  [/^workflows\/([^/]+)$/, (name) => workflowPage(decodeURIComponent(name))],
  [/^workflow-runs\/(\d+)$/, (id) => workflowRunPage(id)],
  [/^modules$/, modulesPage],
  [/^modules\/([^/]+)$/, (name) => modulePage(decodeURIComponent(name))],
  [/^executors$/, executorsPage],
  [/^admin$/, adminPage],
  [/^audit$/, auditPage],
];

export function currentRoute() {
  const hash = location.hash.replace(/^#\/?/, "");
  const [path, search = ""] = hash.split("?");
  return { path, params: new URLSearchParams(search) };
}

export async function render() {
  if (!session) return;
  const mine = newPage();
  const { path, params } = currentRoute();
  const main = $("#main");
  if (!main) return;
  for (const link of document.querySelectorAll("header nav a")) {
    const key = link.dataset.nav;
    link.classList.toggle("active", key === "dashboard" ? path === "" : path.startsWith(key));
  }
  main.replaceChildren(h("p", { class: "loading" }, T.common.loading));
  for (const [pattern, show] of ROUTES) {
    const match = pattern.exec(path);
    if (!match) continue;
    try {
      const content = await show(...match.slice(1), params);
      if (mine.alive) main.replaceChildren(content);
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      if (mine.alive && error.status !== 401) {
        main.replaceChildren(h("p", { class: "error" },
          error.status === 403 ? T.common.forbidden : T.common.failed(error.message)));
      }
    }
    return;
  }
  main.replaceChildren(h("p", { class: "error" }, `No page ${path}`));
}

// ---------------------------------------------------------------- start

hooks.loggedOut = (message) => showLogin(message);
hooks.render = render;
window.addEventListener("hashchange", () => {
  navigated();
  render();
});

(async () => {
  try {
    setSession(await get("/api/v1/session"));
    start();
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    showLogin(error.status === 401 ? "" : error.message);
  }
})();

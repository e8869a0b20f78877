// The cronbox console: a page of the admin's own public JSON API, with no
// routes of its own. Every piece of data reaches the page as a text node
// (see `h`), never as markup, so a job named <script> is shown as text.
import { T } from "./text.js";

// ---------------------------------------------------------------- DOM

/** An element; string and number children become text nodes. */
function h(tag, props, ...children) {
  const element = document.createElement(tag);
  setProps(element, props);
  append(element, children);
  return element;
}

/** An SVG element (charts). */
function svg(tag, attrs, ...children) {
  const element = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    element.setAttribute(key, String(value));
  }
  append(element, children);
  return element;
}

function setProps(element, props) {
  for (const [key, value] of Object.entries(props || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "on") {
      for (const [event, handler] of Object.entries(value)) element.addEventListener(event, handler);
    } else if (key === "class") {
      element.className = value;
    } else if (key === "value") {
      element.value = value;
    } else if (key === "checked") {
      element.checked = true;
    } else if (key === "text") {
      element.textContent = value;
    } else {
      element.setAttribute(key, value === true ? "" : String(value));
    }
  }
}

function append(element, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

const $ = (selector, root = document) => root.querySelector(selector);

// ---------------------------------------------------------------- formats

function pad(n, width = 2) {
  return String(n).padStart(width, "0");
}

function formatTime(ms) {
  if (ms === null || ms === undefined) return "—";
  const d = new Date(ms);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

function formatDuration(ms) {
  if (ms === null || ms === undefined) return "—";
  if (Math.abs(ms) < 1000) return `${ms} ms`;
  if (Math.abs(ms) < 120000) return `${(ms / 1000).toFixed(2)} s`;
  return `${(ms / 60000).toFixed(1)} min`;
}

function formatBytes(bytes) {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1048576) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1048576).toFixed(1)} MiB`;
}

function shortDigest(digest) {
  return digest ? digest.slice(0, 12) : "—";
}

// ---------------------------------------------------------------- API

class ApiError extends Error {
  constructor(status, body, retryAfter) {
    super(body && body.message ? body.message : `HTTP ${status}`);
    this.status = status;
    this.body = body;
    this.field = body && body.field;
    this.retryAfter = retryAfter;
  }
}

/** Who is logged in: {user, tenant, role, csrf_token}. */
let session = null;

async function call(method, path, body) {
  const headers = {};
  if (body !== undefined) headers["content-type"] = "application/json";
  if (method !== "GET" && session && session.csrf_token) {
    headers["x-csrf-token"] = session.csrf_token;
  }
  const response = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "same-origin",
  });
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = text;
  }
  if (!response.ok) {
    const error = new ApiError(response.status, data, response.headers.get("retry-after"));
    if (response.status === 401 && path !== "/api/v1/session") {
      session = null;
      showLogin();
    }
    throw error;
  }
  return data;
}

const get = (path) => call("GET", path);

function query(params) {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== null && value !== undefined && value !== "") search.set(key, value);
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}

// ---------------------------------------------------------------- roles

const RANK = { viewer: 0, developer: 1, admin: 2, operator: 3 };
const atLeast = (role) => session && RANK[session.role] >= RANK[role];
const canWrite = () => atLeast("developer");

// ---------------------------------------------------------------- page life

/** The current page's timers and event streams, ended when another page
 * is shown. */
let page = { timers: [], streams: [], alive: true };

function every(ms, work) {
  const timer = setInterval(work, ms);
  page.timers.push(timer);
  return timer;
}

function newPage() {
  page.alive = false;
  for (const timer of page.timers) clearInterval(timer);
  for (const stream of page.streams) stream.close();
  page = { timers: [], streams: [], alive: true };
  return page;
}

function flash(message, kind = "info") {
  const box = $("#flash");
  box.replaceChildren(message ? h("div", { class: `flash ${kind}` }, message) : "");
}

function failure(error) {
  flash(T.common.failed(error.message), "error");
}

/** Runs `work` for a button, showing a refusal instead of throwing. */
function action(work) {
  return async (event) => {
    if (event) event.preventDefault();
    try {
      await work(event);
    } catch (error) {
      if (error instanceof ApiError) failure(error);
      else throw error;
    }
  };
}

function go(hash) {
  if (location.hash === hash) render();
  else location.hash = hash;
}

function table(headers, rows, empty) {
  if (!rows.length) return h("p", { class: "empty" }, empty || T.common.none);
  return h("table", {},
    h("thead", {}, h("tr", {}, headers.map((title) => h("th", {}, title)))),
    h("tbody", {}, rows));
}

function link(hash, text) {
  return h("a", { href: hash }, text);
}

function section(title, ...children) {
  return h("section", { class: "card" }, h("h2", {}, title), ...children);
}

function field(label, input, name) {
  return h("label", { class: "field" },
    h("span", { class: "label" }, label), input,
    h("span", { class: "field-error", "data-field": name || "" }));
}

// ---------------------------------------------------------------- shell

function header() {
  const nav = Object.entries(T.nav).map(([key, title]) =>
    h("a", { href: key === "dashboard" ? "#/" : `#/${key}`, "data-nav": key }, title));
  return h("header", {},
    h("span", { class: "brand" }, T.app),
    h("nav", {}, nav),
    h("span", { class: "who", id: "who" },
      T.signedInAs(session.user || "token", session.tenant, session.role)),
    h("button", { id: "logout", type: "button", on: { click: action(logout) } }, T.logout));
}

async function logout() {
  await call("DELETE", "/api/v1/session");
  session = null;
  showLogin();
}

function showLogin(message) {
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
      session = await call("POST", "/api/v1/session", { user: user.value, password: password.value });
      start();
    } catch (failed) {
      error.textContent = failed.status === 429
        ? T.login.throttled(failed.retryAfter || "?")
        : T.login.wrong;
    }
  });
  document.body.replaceChildren(h("main", { id: "main" }, form));
}

function start() {
  document.body.replaceChildren(header(), h("div", { id: "flash" }), h("main", { id: "main" }));
  render();
}

const ROUTES = [
  [/^$/, dashboardPage],
  [/^jobs$/, jobsPage],
  [/^jobs\/new$/, () => jobFormPage(null, "new")],
  [/^jobs\/(\d+)$/, (id) => jobPage(id)],
  [/^jobs\/(\d+)\/edit$/, (id) => jobFormPage(id, "edit")],
  [/^jobs\/(\d+)\/copy$/, (id) => jobFormPage(id, "copy")],
  [/^runs$/, runsPage],
  [/^runs\/(\d+)$/, (id) => runPage(id)],
  [/^modules$/, modulesPage],
  [/^modules\/([^/]+)$/, (name) => modulePage(decodeURIComponent(name))],
  [/^executors$/, executorsPage],
  [/^admin$/, adminPage],
];

function currentRoute() {
  const hash = location.hash.replace(/^#\/?/, "");
  const [path, search = ""] = hash.split("?");
  return { path, params: new URLSearchParams(search) };
}

async function render() {
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

// ---------------------------------------------------------------- dashboard

const OUTCOMES = ["success", "failed", "running", "cancelled"];

/** A stacked bar chart of run counts: one bar per bucket. */
function barChart(buckets, label, id) {
  const width = 1300;
  const height = 170;
  const bottom = 20;
  const most = Math.max(1, ...buckets.map((b) => OUTCOMES.reduce((sum, o) => sum + b[o], 0)));
  const step = width / buckets.length;
  const bars = buckets.map((bucket, index) => {
    let y = height - bottom;
    const x = index * step + 1;
    const parts = OUTCOMES.filter((o) => bucket[o] > 0).map((outcome) => {
      const barHeight = ((height - bottom - 6) * bucket[outcome]) / most;
      y -= barHeight;
      return svg("rect", {
        x, y, width: Math.max(1, step - 2), height: barHeight, class: `bar-${outcome}`,
      }, svg("title", {}, `${label(bucket)}: ${bucket[outcome]} ${T.dashboard.legend[outcome]}`));
    });
    const tick = index % Math.ceil(buckets.length / 8) === 0
      ? svg("text", { x, y: height - 5, class: "tick" }, label(bucket))
      : null;
    return svg("g", {}, parts, tick);
  });
  const legend = h("p", { class: "legend" }, OUTCOMES.map((o) =>
    h("span", { class: `key key-${o}` }, T.dashboard.legend[o])));
  return h("div", { class: "chart", id },
    svg("svg", { viewBox: `0 0 ${width} ${height}`, role: "img" }, bars), legend);
}

async function dashboardPage() {
  const d = await get("/api/v1/dashboard");
  const rate = d.success_rate === undefined || d.success_rate === null
    ? "—"
    : `${(d.success_rate * 100).toFixed(1)} %`;
  const lateness = d.lateness_p50_ms === undefined
    ? "—"
    : `${formatDuration(d.lateness_p50_ms)} / ${formatDuration(d.lateness_p99_ms)}`;
  const card = (title, value, note, id) =>
    h("div", { class: "stat", id }, h("div", { class: "value" }, value),
      h("div", { class: "title" }, title), note ? h("div", { class: "note" }, note) : null);
  const hourLabel = (b) => `${pad(new Date(b.start_ms).getHours())}:00`;
  const dayLabel = (b) => b.day.slice(5);
  const failing = d.top_failing.map((job) =>
    h("li", {}, link(`#/jobs/${job.job_id}`, job.name || `#${job.job_id}`), " ",
      h("span", { class: "bad" }, T.dashboard.failures(job.failures))));
  return h("div", { id: "dashboard" },
    h("h1", {}, T.dashboard.title),
    h("div", { class: "stats" },
      card(T.dashboard.successRate, rate, null, "stat-success-rate"),
      card(T.dashboard.lateness, lateness, T.dashboard.sample(d.lateness_sample), "stat-lateness"),
      card(T.dashboard.executors, d.executors_online, null, "stat-executors"),
      card(T.dashboard.inProgress, d.runs_in_progress, null, "stat-in-progress")),
    section(T.dashboard.byHour, barChart(d.hours, hourLabel, "chart-hours")),
    section(T.dashboard.byDay, barChart(d.days, dayLabel, "chart-days")),
    section(T.dashboard.topFailing,
      failing.length ? h("ol", { id: "top-failing" }, failing) : h("p", {}, T.dashboard.noFailures)));
}

// ---------------------------------------------------------------- jobs

const SCHEDULE_TYPES = ["CRON", "FIX_RATE", "FIX_DELAY", "ONE_SHOT", "NONE"];
const ROUTES_STRATEGIES = [
  "FIRST", "LAST", "ROUND", "RANDOM", "CONSISTENT_HASH", "LEAST_FREQUENTLY_USED",
  "LEAST_RECENTLY_USED", "FAILOVER", "BUSYOVER", "SHARDING_BROADCAST",
];
const BLOCK_STRATEGIES = ["SERIAL_EXECUTION", "DISCARD_LATER", "COVER_EARLY"];
const MISFIRES = ["DO_NOTHING", "FIRE_ONCE_NOW"];
const RUN_STATUSES = ["pending", "dispatched", "success", "failed", "cancelled"];
const RUN_KINDS = ["schedule", "manual", "api", "retry", "parent", "misfire", "backfill"];
const PAGE = 50;

function select(name, options, chosen, props = {}) {
  return h("select", { name, ...props }, options.map(([value, label]) =>
    h("option", { value, selected: value === chosen }, label)));
}

const plain = (values) => values.map((value) => [value, value]);

function moduleOf(job) {
  if (!job.module_name) return shortDigest(job.module_digest);
  return job.module_version ? `${job.module_name}@${job.module_version}` : job.module_name;
}

function statusOf(job) {
  if (job.pause) {
    return T.job.paused(job.pause.by, job.pause.until_ms ? formatTime(job.pause.until_ms) : null,
      job.pause.note);
  }
  return job.enabled ? T.jobs.enabled : T.jobs.disabled;
}

function scheduleOf(job) {
  return job.schedule_type === "NONE" ? "NONE" : `${job.schedule_type} ${job.schedule_conf}`;
}

async function jobsPage(params) {
  const filters = {
    search: params.get("search") || "",
    group: params.get("group") || "",
    enabled: params.get("enabled") || "",
    module: params.get("module") || "",
    schedule_type: params.get("schedule_type") || "",
  };
  const after = params.get("after") || "";
  const jobs = await get(`/api/v1/jobs${query({ ...filters, after, limit: PAGE })}`);
  const form = h("form", { id: "job-filters", class: "filters" },
    field(T.jobs.search, h("input", { name: "search", value: filters.search, type: "search" })),
    field(T.jobs.group, h("input", { name: "group", value: filters.group })),
    field(T.jobs.status, select("enabled",
      [["", T.common.any], ["true", T.jobs.enabled], ["false", T.jobs.disabled]], filters.enabled)),
    field(T.jobs.module, h("input", { name: "module", value: filters.module })),
    field(T.jobs.scheduleType, select("schedule_type",
      [["", T.common.any], ...plain(SCHEDULE_TYPES)], filters.schedule_type)),
    h("button", { type: "submit" }, T.common.filter));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const data = Object.fromEntries(new FormData(form));
    go(`#/jobs${query(data)}`);
  });
  const rows = jobs.map((job) => h("tr", { "data-job": job.id },
    h("td", {}, link(`#/jobs/${job.id}`, job.id)),
    h("td", { class: "job-name" }, link(`#/jobs/${job.id}`, job.name)),
    h("td", {}, job.group_name),
    h("td", {}, moduleOf(job)),
    h("td", {}, scheduleOf(job)),
    h("td", {}, h("span", { class: job.pause ? "warn" : job.enabled ? "ok" : "muted" },
      statusOf(job))),
    h("td", {}, formatTime(job.next_fire_at_ms))));
  const paging = h("p", { class: "paging" },
    after ? link(`#/jobs${query(filters)}`, T.common.first) : null, " ",
    jobs.length === PAGE
      ? link(`#/jobs${query({ ...filters, after: jobs[jobs.length - 1].id })}`, T.common.next)
      : null);
  return h("div", { id: "jobs" },
    h("h1", {}, T.jobs.title, " ",
      canWrite() ? h("a", { href: "#/jobs/new", class: "button", id: "job-new" }, T.jobs.new) : null),
    form,
    table(T.jobs.columns, rows, T.jobs.empty),
    paging);
}

function definitionList(pairs) {
  return h("dl", { class: "definition" }, pairs.map(([term, value]) =>
    [h("dt", {}, term), h("dd", {}, value === "" || value === null || value === undefined ? "—" : value)]));
}

async function jobPage(id) {
  const job = await get(`/api/v1/jobs/${id}`);
  const [fires, runs, state, backfills] = await Promise.all([
    get(`/api/v1/jobs/${id}/next-fires?count=5`).catch(() => []),
    get(`/api/v1/runs?job=${id}&limit=20`),
    get(`/api/v1/jobs/${id}/state`).catch(() => null),
    get(`/api/v1/backfills?job=${id}`).catch(() => []),
  ]);
  const f = T.form.fields;
  const module = job.module_name
    ? (job.module_version ? T.job.pinned(job.module_name, job.module_version) : T.job.follows(job.module_name))
    : T.job.digestOnly;
  const definition = definitionList([
    [f.name, job.name], [f.group, job.group_name],
    [T.jobs.module, `${moduleOf(job)} (${module})`],
    ["Digest", job.module_digest],
    [f.schedule_type, job.schedule_type], [f.schedule_conf, job.schedule_conf],
    [f.time_zone, job.time_zone], [f.misfire, `${job.misfire} / ${job.misfire_threshold_ms} ms`],
    [f.route, job.route], [f.block_strategy, job.block_strategy],
    [f.max_concurrency, job.max_concurrency], [f.timeout_ms, job.timeout_ms],
    [f.fuel, job.fuel], [f.memory_bytes, job.memory_bytes],
    [f.retry_count, `${job.retry_count} × ${job.retry_interval_ms} ms`],
    [f.children, job.children.join(", ")], [f.param, job.param],
    [f.fresh_instance, job.fresh_instance ? T.common.yes : T.common.no],
    [f.config, Object.entries(job.config).map(([k, v]) => `${k}=${v}`).join("\n")],
    [f.secrets, job.secrets.join(", ")], [f.http_allow, job.http_allow.join("\n")],
    [f.alarm_url, job.alarm_url],
    [f.starts_at, formatTime(job.schedule_rules.starts_at_ms)],
    [f.ends_at, formatTime(job.schedule_rules.ends_at_ms)],
    [f.exclude_dates, (job.schedule_rules.exclude_dates || []).join(", ")],
    [f.calendars, (job.schedule_rules.calendars || []).join(", ")],
    [f.jitter_ms, job.schedule_rules.jitter_ms],
    [f.overlap, job.schedule_rules.overlap || "ALLOW"],
    [T.jobs.status, statusOf(job)],
  ]);
  const pauseNote = h("input", { id: "pause-note", name: "note", placeholder: T.job.pauseNote });
  const pauseUntil = h("input", { id: "pause-until", name: "until", type: "datetime-local" });
  const param = h("input", { id: "trigger-param", name: "param", placeholder: T.job.triggerParam });
  const actions = canWrite() ? h("div", { class: "actions", id: "job-actions" },
    job.enabled
      ? h("button", { id: "job-stop", on: { click: action(async () => {
        await call("POST", `/api/v1/jobs/${id}/stop`); flash(T.common.done); render();
      }) } }, T.job.stop)
      : h("button", { id: "job-start", on: { click: action(async () => {
        await call("POST", `/api/v1/jobs/${id}/start`); flash(T.common.done); render();
      }) } }, T.job.start),
    param,
    h("button", { id: "job-trigger", on: { click: action(async () => {
      const body = param.value ? { param: param.value } : {};
      const triggered = await call("POST", `/api/v1/jobs/${id}/trigger`, body);
      flash(T.job.triggered(triggered.run_id));
      go(`#/runs/${triggered.run_id}`);
    }) } }, T.job.trigger),
    pauseNote, pauseUntil,
    h("button", { id: "job-pause", on: { click: action(async () => {
      const body = { note: pauseNote.value };
      if (pauseUntil.value) body.until_ms = new Date(pauseUntil.value).getTime();
      await call("POST", `/api/v1/jobs/${id}/pause`, body);
      flash(T.common.done);
      render();
    }) } }, T.job.pause),
    h("button", { id: "job-kill", on: { click: action(async () => {
      const killed = await call("POST", `/api/v1/jobs/${id}/kill`, {});
      flash(T.job.killed(killed.killed.length + killed.cancelled.length));
      render();
    }) } }, T.job.kill),
    h("a", { class: "button", href: `#/jobs/${id}/edit`, id: "job-edit" }, T.job.edit),
    h("a", { class: "button", href: `#/jobs/${id}/copy`, id: "job-copy" }, T.job.copy),
    confirmButton("job-delete", T.common.delete, T.common.confirmDelete(job.name), async () => {
      await call("DELETE", `/api/v1/jobs/${id}`);
      flash(T.job.deleted);
      go("#/jobs");
    })) : null;
  return h("div", { id: "job" },
    h("h1", {}, T.job.title(""), h("span", { class: "job-name" }, job.name)),
    actions,
    h("div", { class: "columns" },
      section(T.job.definition, definition),
      h("div", {},
        section(T.job.nextFires, fires.length
          ? h("ol", { id: "next-fires" }, fires.map((at) => h("li", {}, at)))
          : h("p", {}, T.form.previewNone)),
        stateSection(id, state))),
    section(T.job.recentRuns, runsTable(runs.runs)),
    backfillSection(id, backfills));
}

/** A job's backfills, a form to start one (roles that may) and cancel. */
function backfillSection(id, backfills) {
  const rows = backfills.map((b) => h("tr", { "data-backfill": b.id },
    h("td", {}, b.id), h("td", {}, formatTime(b.from_ms)), h("td", {}, formatTime(b.to_ms)),
    h("td", {}, `${b.written} / ${b.planned}`), h("td", {}, b.per_second),
    h("td", { class: "backfill-status" }, b.status), h("td", {}, b.created_by),
    h("td", {}, canWrite() && b.status === "running" ? h("button", { on: { click: action(async () => {
      await call("DELETE", `/api/v1/backfills/${b.id}`);
      render();
    }) } }, T.common.cancel) : null)));
  const form = canWrite() ? formOf("backfill-form", [
    field(T.job.backfillFrom, h("input", { name: "from", type: "datetime-local" })),
    field(T.job.backfillTo, h("input", { name: "to", type: "datetime-local" })),
    field(T.job.backfillRate, h("input", { name: "per_second", type: "number", min: 1, max: 1000, value: 10 })),
  ], T.job.backfillStart, async (data) => {
    const backfill = await call("POST", `/api/v1/jobs/${id}/backfill`, {
      from_ms: new Date(data.from).getTime(),
      to_ms: data.to ? new Date(data.to).getTime() : Date.now(),
      per_second: Number(data.per_second || 10),
    });
    flash(T.job.backfilled(backfill.planned));
    render();
  }) : null;
  return section(T.job.backfills, table(T.job.backfillColumns, rows), form);
}

/** A button that asks once more before it acts (no native dialog). */
function confirmButton(id, label, question, work) {
  const button = h("button", { id, class: "danger" }, label);
  button.addEventListener("click", action(async () => {
    if (button.dataset.armed !== "yes") {
      button.dataset.armed = "yes";
      button.textContent = question;
      return;
    }
    await work();
  }));
  return button;
}

function stateSection(id, state) {
  if (!state) return section(T.job.state, h("p", {}, T.common.forbidden));
  const entries = Object.entries(state.state);
  const view = entries.length
    ? definitionList(entries)
    : h("p", {}, T.job.stateEmpty);
  if (!canWrite()) return section(T.job.state, view);
  const editor = h("textarea", { id: "state-editor", rows: 6 }, JSON.stringify(state.state, null, 2));
  const save = h("button", { id: "state-save", on: { click: action(async () => {
    let parsed;
    try {
      parsed = JSON.parse(editor.value);
    } catch (error) {
      flash(T.common.failed(error.message), "error");
      return;
    }
    await call("PUT", `/api/v1/jobs/${id}/state`, { state: parsed });
    flash(T.job.stateSaved);
    render();
  }) } }, T.common.save);
  return section(T.job.state, view, field(T.job.stateEdit, editor), save);
}

// ---------------------------------------------------------------- job form

function specOf(job) {
  return {
    name: job.name,
    group: job.group_name,
    module: job.module_name
      ? (job.module_version ? `${job.module_name}@${job.module_version}` : job.module_name)
      : "",
    module_digest: job.module_name ? "" : job.module_digest,
    schedule_type: job.schedule_type,
    schedule_conf: job.schedule_conf,
    time_zone: job.time_zone,
    misfire: job.misfire,
    misfire_threshold_ms: job.misfire_threshold_ms,
    route: job.route,
    block_strategy: job.block_strategy,
    max_concurrency: job.max_concurrency,
    timeout_ms: job.timeout_ms,
    fuel: job.fuel,
    memory_bytes: job.memory_bytes,
    retry_count: job.retry_count,
    retry_interval_ms: job.retry_interval_ms,
    children: job.children,
    param: job.param,
    fresh_instance: job.fresh_instance,
    config: job.config,
    secrets: job.secrets,
    http_allow: job.http_allow,
    http_limits: job.http_limits,
    alarm_url: job.alarm_url,
    schedule_rules: job.schedule_rules || {},
  };
}

const NEW_JOB = {
  name: "", group: "default", module: "", module_digest: "", schedule_type: "CRON",
  schedule_conf: "0 * * * * ?", time_zone: "UTC", misfire: "DO_NOTHING",
  misfire_threshold_ms: 5000, route: "FIRST", block_strategy: "SERIAL_EXECUTION",
  max_concurrency: 1, timeout_ms: 60000, fuel: null, memory_bytes: 67108864, retry_count: 0,
  retry_interval_ms: 0, children: [], param: "", fresh_instance: false, config: {}, secrets: [],
  http_allow: [], http_limits: {}, alarm_url: "", schedule_rules: {},
};

async function jobFormPage(id, mode) {
  const job = id ? await get(`/api/v1/jobs/${id}`) : null;
  const spec = job ? specOf(job) : { ...NEW_JOB };
  if (mode === "copy") spec.name = `${spec.name} (copy)`;
  const f = T.form.fields;
  const input = (name, props = {}) => h("input", { name, value: spec[name] ?? "", ...props });
  const number = (name) => input(name, { type: "number", step: 1 });
  const inputs = {
    name: input("name", { required: true }),
    group: input("group"),
    module: input("module", { list: "module-names" }),
    module_digest: input("module_digest"),
    schedule_type: select("schedule_type", plain(SCHEDULE_TYPES), spec.schedule_type),
    schedule_conf: input("schedule_conf"),
    time_zone: input("time_zone"),
    starts_at: h("input", { name: "starts_at", type: "datetime-local",
      value: toLocalInput(spec.schedule_rules.starts_at_ms) }),
    ends_at: h("input", { name: "ends_at", type: "datetime-local",
      value: toLocalInput(spec.schedule_rules.ends_at_ms) }),
    exclude_dates: h("textarea", { name: "exclude_dates", rows: 2 },
      (spec.schedule_rules.exclude_dates || []).join(", ")),
    calendars: h("input", { name: "calendars",
      value: (spec.schedule_rules.calendars || []).join(", ") }),
    jitter_ms: h("input", { name: "jitter_ms", type: "number", min: 0, max: 300000,
      value: spec.schedule_rules.jitter_ms || 0 }),
    overlap: select("overlap", plain(["ALLOW", "SKIP", "BUFFER_ONE", "CANCEL_OTHER"]),
      spec.schedule_rules.overlap || "ALLOW"),
    misfire: select("misfire", plain(MISFIRES), spec.misfire),
    misfire_threshold_ms: number("misfire_threshold_ms"),
    route: select("route", plain(ROUTES_STRATEGIES), spec.route),
    block_strategy: select("block_strategy", plain(BLOCK_STRATEGIES), spec.block_strategy),
    max_concurrency: number("max_concurrency"),
    timeout_ms: number("timeout_ms"),
    fuel: number("fuel"),
    memory_bytes: number("memory_bytes"),
    retry_count: number("retry_count"),
    retry_interval_ms: number("retry_interval_ms"),
    children: h("input", { name: "children", value: spec.children.join(", ") }),
    param: h("textarea", { name: "param", rows: 3 }, spec.param),
    fresh_instance: h("input", { name: "fresh_instance", type: "checkbox", checked: spec.fresh_instance }),
    config: h("textarea", { name: "config", rows: 3 },
      Object.entries(spec.config).map(([k, v]) => `${k}=${v}`).join("\n")),
    secrets: h("input", { name: "secrets", value: spec.secrets.join(", ") }),
    http_allow: h("textarea", { name: "http_allow", rows: 2 }, spec.http_allow.join("\n")),
    http_limits: h("textarea", { name: "http_limits", rows: 2 }, JSON.stringify(spec.http_limits)),
    alarm_url: input("alarm_url"),
  };
  const preview = h("div", { id: "schedule-preview", class: "preview" });
  const modules = h("datalist", { id: "module-names" });
  get("/api/v1/modules").then((list) => modules.replaceChildren(
    ...list.map((m) => h("option", { value: m.name })))).catch(() => {});
  const form = h("form", { id: "job-form", class: "job-form" },
    Object.entries(inputs).map(([name, element]) =>
      field(f[name], element, name === "exclude_dates" ? "schedule_rules" : name)),
    modules,
    h("div", { class: "actions" },
      h("button", { type: "submit", id: "job-save" }, T.common.save),
      h("a", { class: "button", href: id ? `#/jobs/${id}` : "#/jobs" }, T.common.cancel)));
  const showError = (name, message) => {
    const slot = form.querySelector(`.field-error[data-field="${name}"]`);
    if (slot) slot.textContent = message;
    return Boolean(slot);
  };
  const clearErrors = () => form.querySelectorAll(".field-error").forEach((e) => { e.textContent = ""; });

  const rulesOf = () => ({
    starts_at_ms: inputs.starts_at.value ? new Date(inputs.starts_at.value).getTime() : undefined,
    ends_at_ms: inputs.ends_at.value ? new Date(inputs.ends_at.value).getTime() : undefined,
    exclude_dates: inputs.exclude_dates.value.split(/[\s,]+/).filter(Boolean),
    calendars: inputs.calendars.value.split(/[\s,]+/).filter(Boolean),
    jitter_ms: Number(inputs.jitter_ms.value || 0),
    overlap: inputs.overlap.value,
  });
  let previewTimer = null;
  const refreshPreview = () => {
    clearTimeout(previewTimer);
    previewTimer = setTimeout(async () => {
      for (const name of ["schedule_type", "schedule_conf", "time_zone", "schedule_rules"]) showError(name, "");
      if (inputs.schedule_type.value === "NONE") {
        preview.replaceChildren(h("p", {}, T.form.previewNone));
        return;
      }
      try {
        const rules = rulesOf();
        const answer = await get(`/api/v1/schedule-preview${query({
          schedule_type: inputs.schedule_type.value,
          schedule_conf: inputs.schedule_conf.value,
          time_zone: inputs.time_zone.value,
          count: 5,
          starts_at_ms: rules.starts_at_ms,
          ends_at_ms: rules.ends_at_ms,
          exclude_dates: rules.exclude_dates.join(","),
          calendars: rules.calendars.join(","),
          jitter_ms: rules.jitter_ms || "",
        })}`);
        rules.overlap = undefined;
        preview.replaceChildren(
          h("h3", {}, T.form.preview, ` — ${answer.time_zone}`),
          answer.fires.length
            ? h("ol", {}, answer.local.map((at) => h("li", { class: "fire" }, at)))
            : h("p", {}, T.form.previewNone));
      } catch (error) {
        if (!(error instanceof ApiError)) throw error;
        preview.replaceChildren(h("p", { class: "error" }, error.message));
        showError(error.field || "schedule_conf", error.message);
      }
    }, 250);
  };
  for (const name of ["schedule_type", "schedule_conf", "time_zone", "starts_at", "ends_at",
    "exclude_dates", "calendars", "jitter_ms"]) {
    inputs[name].addEventListener("input", refreshPreview);
    inputs[name].addEventListener("change", refreshPreview);
  }
  refreshPreview();

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearErrors();
    const list = (text) => text.split(/[,\n]/).map((s) => s.trim()).filter(Boolean);
    const integer = (name) => {
      const text = inputs[name].value.trim();
      return text === "" ? null : Number(text);
    };
    let limits;
    try {
      limits = inputs.http_limits.value.trim() ? JSON.parse(inputs.http_limits.value) : {};
    } catch (error) {
      showError("http_limits", error.message);
      return;
    }
    const body = {
      name: inputs.name.value,
      group: inputs.group.value || "default",
      module_digest: inputs.module_digest.value.trim(),
      schedule_type: inputs.schedule_type.value,
      schedule_conf: inputs.schedule_conf.value,
      time_zone: inputs.time_zone.value || "UTC",
      misfire: inputs.misfire.value,
      misfire_threshold_ms: integer("misfire_threshold_ms") ?? 5000,
      route: inputs.route.value,
      block_strategy: inputs.block_strategy.value,
      max_concurrency: integer("max_concurrency") ?? 1,
      timeout_ms: integer("timeout_ms") ?? 60000,
      fuel: integer("fuel"),
      memory_bytes: integer("memory_bytes") ?? 67108864,
      retry_count: integer("retry_count") ?? 0,
      retry_interval_ms: integer("retry_interval_ms") ?? 0,
      children: list(inputs.children.value).map(Number),
      param: inputs.param.value,
      fresh_instance: inputs.fresh_instance.checked,
      config: Object.fromEntries(inputs.config.value.split("\n").map((line) => line.trim())
        .filter(Boolean).map((line) => {
          const at = line.indexOf("=");
          return at < 0 ? [line, ""] : [line.slice(0, at), line.slice(at + 1)];
        })),
      secrets: list(inputs.secrets.value),
      http_allow: list(inputs.http_allow.value),
      http_limits: limits,
      alarm_url: inputs.alarm_url.value.trim(),
      schedule_rules: rulesOf(),
    };
    if (inputs.module.value.trim()) body.module = inputs.module.value.trim();
    try {
      const saved = mode === "edit"
        ? await call("PUT", `/api/v1/jobs/${id}`, body)
        : await call("POST", "/api/v1/jobs", body);
      flash(T.form.saved);
      go(`#/jobs/${saved.id}`);
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      if (!error.field || !showError(error.field, error.message)) failure(error);
    }
  });
  const title = mode === "edit" ? T.form.editTitle(job.name)
    : mode === "copy" ? T.form.copyTitle(job.name) : T.form.newTitle;
  return h("div", { id: "job-editor" }, h("h1", {}, title),
    h("div", { class: "columns" }, form, preview));
}

// ---------------------------------------------------------------- runs

function lateness(run) {
  return run.started_at_ms ? run.started_at_ms - run.scheduled_at_ms : null;
}

function runsTable(runs, empty = T.runs.empty) {
  const rows = runs.map((run) => h("tr", { "data-run": run.id },
    h("td", {}, link(`#/runs/${run.id}`, run.id)),
    h("td", {}, link(`#/jobs/${run.job_id}`, run.job_id)),
    h("td", {}, run.kind),
    h("td", {}, formatTime(run.scheduled_at_ms)),
    h("td", {}, h("span", { class: `status status-${run.status}` }, run.status)),
    h("td", {}, run.outcome || "—"),
    h("td", {}, run.executor || "—"),
    h("td", {}, run.started_at_ms && run.finished_at_ms
      ? formatDuration(run.finished_at_ms - run.started_at_ms) : "—")));
  return table(T.runs.columns, rows, empty);
}

function toMs(text) {
  return text ? String(new Date(text).getTime()) : "";
}

function toLocalInput(ms) {
  if (!ms) return "";
  const d = new Date(Number(ms));
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

async function runsPage(params) {
  const filters = {
    job: params.get("job") || "",
    status: params.get("status") || "",
    kind: params.get("kind") || "",
    from_ms: params.get("from_ms") || "",
    to_ms: params.get("to_ms") || "",
  };
  const before = params.get("before") || "";
  const page = await get(`/api/v1/runs${query({ ...filters, before, limit: PAGE })}`);
  const form = h("form", { id: "run-filters", class: "filters" },
    field(T.runs.job, h("input", { name: "job", value: filters.job, type: "number" })),
    field(T.runs.status, select("status", [["", T.common.any], ...plain(RUN_STATUSES)], filters.status)),
    field(T.runs.kind, select("kind", [["", T.common.any], ...plain(RUN_KINDS)], filters.kind)),
    field(T.runs.from, h("input", { name: "from", type: "datetime-local", value: toLocalInput(filters.from_ms) })),
    field(T.runs.to, h("input", { name: "to", type: "datetime-local", value: toLocalInput(filters.to_ms) })),
    h("button", { type: "submit" }, T.common.filter));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const data = Object.fromEntries(new FormData(form));
    go(`#/runs${query({
      job: data.job, status: data.status, kind: data.kind,
      from_ms: toMs(data.from), to_ms: toMs(data.to),
    })}`);
  });
  const paging = h("p", { class: "paging" },
    before ? link(`#/runs${query(filters)}`, T.common.first) : null, " ",
    page.next_before ? link(`#/runs${query({ ...filters, before: page.next_before })}`, T.common.next) : null);
  // A page reads a bounded number of runs for its filters: an empty one
  // with a cursor means none matched so far, not none at all.
  const found = runsTable(page.runs, page.next_before ? T.runs.emptySoFar : T.runs.empty);
  return h("div", { id: "runs" }, h("h1", {}, T.runs.title), form, found, paging);
}

function runFields(run) {
  const r = T.run.fields;
  return definitionList([
    [r.job, link(`#/jobs/${run.job_id}`, run.job_id)],
    [r.kind, run.kind],
    [r.status, h("span", { id: "run-status", class: `status status-${run.status}` }, run.status)],
    [r.outcome, h("span", { id: "run-outcome" }, run.outcome || "—")],
    [r.code, run.code],
    [r.message, run.message],
    [r.scheduled, formatTime(run.scheduled_at_ms)],
    [r.created, formatTime(run.created_at_ms)],
    [r.dispatched, formatTime(run.dispatched_at_ms)],
    [r.started, formatTime(run.started_at_ms)],
    [r.finished, formatTime(run.finished_at_ms)],
    [r.lateness, formatDuration(lateness(run))],
    [r.duration, run.started_at_ms && run.finished_at_ms
      ? formatDuration(run.finished_at_ms - run.started_at_ms) : "—"],
    [r.fuel, run.fuel_consumed],
    [r.memory, run.peak_memory_bytes === undefined ? null : formatBytes(run.peak_memory_bytes)],
    [r.executor, run.executor],
    [r.module, run.module_digest],
    [r.attempt, run.attempt],
    [r.shard, `${run.shard_index} / ${run.shard_total}`],
    [r.param, run.param],
    [r.alarm, run.alarm_status],
  ]);
}

const isOpen = (run) => run.status === "pending" || run.status === "dispatched";

async function runPage(id) {
  let run = await get(`/api/v1/runs/${id}`);
  const mine = page;
  const details = h("div", { id: "run-fields" }, runFields(run));
  const log = h("div", { id: "run-log", class: "log" });
  const state = h("span", { id: "log-state", class: "badge" }, isOpen(run) ? T.run.logLive : T.run.logEnded);
  const kill = canWrite() ? h("button", {
    id: "run-kill", class: "danger", disabled: !isOpen(run),
    on: { click: action(async () => {
      await call("POST", `/api/v1/runs/${id}/kill`);
      flash(T.run.killed);
    }) },
  }, T.run.kill) : null;

  // The run's events (GET /api/v1/runs/{id}/events): the run as it
  // changes, its log as it is written, and its end; a dropped stream is
  // opened again from the last line shown.
  let offset = 0;
  let ended = false;
  const show = (next) => {
    run = next;
    details.replaceChildren(runFields(run));
    if (kill) kill.disabled = !isOpen(run);
  };
  const follow = () => {
    if (ended || !mine.alive) return;
    const stream = new EventSource(`/api/v1/runs/${id}/events?offset=${offset}`);
    mine.streams.push(stream);
    stream.addEventListener("run", (event) => show(JSON.parse(event.data)));
    stream.addEventListener("log", (event) => {
      const page = JSON.parse(event.data);
      for (const line of page.lines) {
        const source = line.level ? `${line.source}/${line.level}` : line.source;
        log.append(h("div", { class: `line line-${line.level || line.source}` },
          h("span", { class: "at" }, formatTime(line.at_ms)), " ",
          h("span", { class: "source" }, `[${source}]`), " ", line.text));
      }
      offset = page.next_offset;
    });
    stream.addEventListener("end", (event) => {
      ended = true;
      stream.close();
      show(JSON.parse(event.data));
      state.textContent = T.run.logEnded;
      if (!log.childElementCount) log.append(h("p", { class: "empty" }, T.run.logEmpty));
    });
    stream.onerror = () => {
      stream.close();
      if (!ended && mine.alive) setTimeout(follow, 1000);
    };
  };
  follow();
  return h("div", { id: "run" },
    h("h1", {}, T.run.title(run.id), " ", kill),
    section(T.run.details, details),
    section(T.run.log, state, log));
}

// ---------------------------------------------------------------- modules

function uploadForm() {
  const file = h("input", { id: "upload-file", type: "file", accept: ".wasm,application/wasm" });
  const name = h("input", { id: "upload-name", name: "name" });
  const labels = h("input", { id: "upload-labels", name: "labels" });
  const progress = h("progress", { id: "upload-progress", max: 1, value: 0 });
  const result = h("p", { id: "upload-result" });
  let dropped = null;
  const zone = h("div", { id: "drop-zone", class: "drop-zone" }, T.modules.drop);
  zone.addEventListener("dragover", (event) => { event.preventDefault(); zone.classList.add("over"); });
  zone.addEventListener("dragleave", () => zone.classList.remove("over"));
  zone.addEventListener("drop", (event) => {
    event.preventDefault();
    zone.classList.remove("over");
    dropped = event.dataTransfer.files[0] || null;
    if (dropped) zone.textContent = dropped.name;
  });
  file.addEventListener("change", () => { dropped = null; });
  const send = h("button", { id: "upload-submit", type: "submit" }, T.modules.send);
  const form = h("form", { id: "upload-form", class: "upload" },
    zone, file, field(T.modules.name, name), field(T.modules.labels, labels), send, progress, result);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const chosen = dropped || file.files[0];
    if (!chosen) return;
    const data = new FormData();
    data.append("module", chosen);
    if (name.value.trim()) data.append("name", name.value.trim());
    if (labels.value.trim()) data.append("labels", labels.value.trim());
    const request = new XMLHttpRequest();
    request.open("POST", "/api/v1/modules");
    request.setRequestHeader("x-csrf-token", session.csrf_token || "");
    request.upload.addEventListener("progress", (e) => {
      if (e.lengthComputable) progress.value = e.loaded / e.total;
    });
    request.addEventListener("load", () => {
      let body = null;
      try { body = JSON.parse(request.responseText); } catch { body = null; }
      if (request.status === 201) {
        progress.value = 1;
        result.textContent = body.name
          ? T.modules.uploaded(body.name, body.version, body.jobs_moved || 0)
          : T.modules.uploadedDigest(body.digest);
        result.className = "ok";
        if (body.name) {
          result.append(" ", link(`#/modules/${encodeURIComponent(body.name)}`, T.modules.seeVersions));
        }
      } else {
        result.textContent = T.common.failed(body && body.message ? body.message : request.status);
        result.className = "error";
      }
    });
    send.disabled = true;
    request.addEventListener("loadend", () => { send.disabled = false; });
    request.send(data);
  });
  return section(T.modules.upload, form);
}

async function modulesPage() {
  const modules = await get("/api/v1/modules");
  const rows = modules.map((m) => h("tr", { "data-module": m.name },
    h("td", {}, link(`#/modules/${encodeURIComponent(m.name)}`, m.name)),
    h("td", {}, m.tenant),
    h("td", {}, m.version),
    h("td", {}, shortDigest(m.digest)),
    h("td", {}, m.labels.join(", ")),
    h("td", {}, m.pushed_by || "—"),
    h("td", {}, formatTime(m.created_at_ms))));
  return h("div", { id: "modules" }, h("h1", {}, T.modules.title),
    canWrite() ? uploadForm() : null,
    table(T.modules.columns, rows, T.modules.empty));
}

/** Puts a label on one version of a module (taking it off another). */
function labelForm(name, version) {
  const label = h("input", { name: "label", placeholder: T.modules.label, size: 10 });
  const form = h("form", { class: "inline label-form", "data-version": version }, label,
    h("button", { type: "submit" }, T.modules.setLabel));
  form.addEventListener("submit", action(async () => {
    await call("PUT", `/api/v1/modules/${encodeURIComponent(name)}/labels/${encodeURIComponent(label.value)}`,
      { version });
    flash(T.modules.labelled(label.value, version));
    render();
  }));
  return form;
}

async function modulePage(name) {
  const [versions, jobs] = await Promise.all([
    get(`/api/v1/modules/${encodeURIComponent(name)}/versions`),
    get(`/api/v1/jobs${query({ module: name, limit: 100 })}`),
  ]);
  const rows = versions.map((v) => h("tr", { "data-version": v.version },
    h("td", {}, v.version),
    h("td", { title: v.digest }, shortDigest(v.digest)),
    h("td", {}, v.labels.join(", ")),
    h("td", {}, v.note),
    h("td", { class: "pushed-by" }, v.pushed_by || "—"),
    h("td", {}, formatTime(v.created_at_ms)),
    h("td", {}, canWrite() ? labelForm(name, v.version) : null, canWrite() ? h("button", {
      class: "rollback", "data-version": v.version,
      on: { click: action(async () => {
        const answer = await call("POST", `/api/v1/modules/${encodeURIComponent(name)}/rollback`,
          { version: v.version });
        flash(T.modules.rolledBack(answer.version.version, answer.jobs_moved));
        render();
      }) },
    }, T.modules.rollback) : null)));
  const jobRows = jobs.map((job) => h("tr", {},
    h("td", {}, link(`#/jobs/${job.id}`, job.id)),
    h("td", {}, job.name),
    h("td", {}, job.module_version ? T.modules.pins(job.module_version) : T.modules.follows)));
  return h("div", { id: "module" },
    h("h1", {}, T.modules.versions(name)),
    table(T.modules.versionColumns, rows),
    section(T.modules.jobs, table(["Id", "Name", ""], jobRows)));
}

// ---------------------------------------------------------------- executors

async function executorsPage() {
  const groups = await get("/api/v1/groups");
  let executors = null;
  try {
    executors = await get("/api/v1/executors");
  } catch (error) {
    if (!(error instanceof ApiError) || error.status !== 403) throw error;
  }
  const groupRows = groups.map((g) => h("tr", {},
    h("td", {}, g.name), h("td", {}, g.address_type), h("td", {}, g.addresses.join(", "))));
  const executorRows = (executors || []).map((e) => h("tr", { "data-executor": e.address },
    h("td", {}, e.group), h("td", {}, e.address), h("td", {}, formatTime(e.last_beat_ms)),
    h("td", {}, h("span", { class: e.alive ? "ok" : "bad" }, e.alive ? T.common.yes : T.common.no)),
    h("td", { class: "busy" }, e.busy ?? "—"),
    h("td", { class: "free-slots" }, e.free_slots ?? "—")));
  if (executors) every(5000, () => render());
  const groupForm = atLeast("operator") ? formOf("group-form", [
    field(T.executors.groupName, h("input", { name: "name" })),
    field(T.executors.addressType, select("address_type", plain(["AUTO", "MANUAL"]), "AUTO")),
    field(T.executors.addresses, h("input", { name: "addresses", size: 40 })),
  ], T.executors.groupSave, async (data) => {
    const addresses = data.addresses.split(/[\s,]+/).filter(Boolean);
    await call("PUT", `/api/v1/groups/${encodeURIComponent(data.name)}`,
      { address_type: data.address_type, addresses });
    flash(T.common.done);
    render();
  }) : null;
  return h("div", { id: "executors" }, h("h1", {}, T.executors.title),
    section(T.executors.groups, table(T.executors.groupColumns, groupRows), groupForm),
    section(T.executors.live, executors
      ? table(T.executors.columns, executorRows)
      : h("p", {}, T.executors.operatorOnly)));
}

// ---------------------------------------------------------------- administration

function formOf(id, fields, submitLabel, work) {
  const form = h("form", { id, class: "inline" }, fields, h("button", { type: "submit" }, submitLabel));
  form.addEventListener("submit", action(async () => {
    await work(Object.fromEntries(new FormData(form)), form);
  }));
  return form;
}

const ROLES = ["viewer", "developer", "admin", "operator"];
const QUOTAS = [
  "jobs", "modules", "module_bytes", "min_interval_ms", "running_runs", "executor_instances",
  "run_ms_per_day", "state_bytes", "log_bytes_per_day",
];

async function adminPage() {
  const parts = [h("h1", {}, T.admin.title)];
  parts.push(section(T.admin.me, definitionList([
    ["User", session.user], ["Tenant", session.tenant], ["Role", session.role],
  ]), session.user ? formOf("password-form", [
    field(T.admin.currentPassword, h("input", { name: "current_password", type: "password", autocomplete: "current-password" })),
    field(T.admin.newPassword, h("input", { name: "password", type: "password", autocomplete: "new-password" })),
  ], T.common.save, async (data) => {
    await call("PUT", `/api/v1/users/${encodeURIComponent(session.user)}/password`, data);
    session = null;
    showLogin(T.admin.passwordSet);
  }) : null));

  const tokens = await get("/api/v1/tokens");
  const shown = h("div", { id: "token-shown" });
  const tokenRows = tokens.map((t) => h("tr", {},
    h("td", {}, t.id), h("td", {}, t.label), h("td", {}, t.role), h("td", {}, t.user || "—"),
    h("td", {}, formatTime(t.created_at_ms)),
    h("td", {}, h("button", { on: { click: action(async () => {
      await call("DELETE", `/api/v1/tokens/${t.id}`);
      render();
    }) } }, T.admin.revoke))));
  parts.push(section(T.admin.tokens, table(T.admin.tokenColumns, tokenRows),
    session.user ? formOf("token-form", [
      field(T.admin.tokenLabel, h("input", { name: "label" })),
      field(T.admin.tokenRole, select("role",
        plain(ROLES.filter((r) => RANK[r] <= RANK[session.role])), session.role)),
    ], T.admin.tokenMake, async (data) => {
      const made = await call("POST", "/api/v1/tokens", data);
      shown.replaceChildren(h("p", {}, T.admin.tokenShown), h("code", { class: "token" }, made.token));
    }) : null, shown));

  if (atLeast("admin")) {
    const users = await get("/api/v1/users");
    const userRows = users.map((u) => h("tr", { "data-user": u.name },
      h("td", {}, u.name), h("td", {}, u.tenant), h("td", {}, u.role), h("td", {}, formatTime(u.created_at_ms)),
      h("td", {}, u.name === session.user ? null : confirmButton(`remove-${u.name}`, T.common.delete,
        T.common.confirmDelete(u.name), async () => {
          await call("DELETE", `/api/v1/users/${encodeURIComponent(u.name)}`);
          render();
        }))));
    parts.push(section(T.admin.users, table(T.admin.userColumns, userRows),
      formOf("user-form", [
        field(T.admin.userName, h("input", { name: "name" })),
        field(T.admin.userRole, select("role",
          plain(ROLES.filter((r) => RANK[r] <= RANK[session.role])), "viewer")),
        atLeast("operator") ? field(T.admin.userTenant, h("input", { name: "tenant" })) : null,
        field(T.admin.userPassword, h("input", { name: "password", type: "password", autocomplete: "new-password" })),
      ], T.admin.userAdd, async (data) => {
        if (!data.tenant) delete data.tenant;
        await call("POST", "/api/v1/users", data);
        render();
      })));

    const secrets = await get("/api/v1/secrets");
    const secretRows = secrets.map((s) => h("tr", {},
      h("td", {}, s.tenant), h("td", {}, s.name), h("td", {}, formatTime(s.updated_at_ms)),
      h("td", {}, s.used_by.join(", ") || "—"),
      h("td", {}, confirmButton(`secret-delete-${s.name}`, T.common.delete, T.common.confirmDelete(s.name),
        async () => {
          await call("DELETE", `/api/v1/secrets/${encodeURIComponent(s.name)}?force=true`);
          render();
        }))));
    parts.push(section(T.admin.secrets, table(T.admin.secretColumns, secretRows),
      formOf("secret-form", [
        field(T.admin.secretName, h("input", { name: "name" })),
        field(T.admin.secretValue, h("input", { name: "value", type: "password", autocomplete: "off" })),
      ], T.admin.secretSet, async (data) => {
        await call("PUT", `/api/v1/secrets/${encodeURIComponent(data.name)}`, { value: data.value });
        render();
      })));
  }

  const calendars = await get("/api/v1/calendars");
  const calendarRows = calendars.map((c) => h("tr", { "data-calendar": c.name },
    h("td", {}, c.tenant), h("td", {}, c.name), h("td", {}, c.dates.join(", ")),
    h("td", {}, formatTime(c.updated_at_ms)),
    h("td", {}, canWrite() ? confirmButton(`calendar-delete-${c.name}`, T.common.delete,
      T.common.confirmDelete(c.name), async () => {
        await call("DELETE", `/api/v1/calendars/${encodeURIComponent(c.name)}`);
        render();
      }) : null)));
  parts.push(section(T.admin.calendars, table(T.admin.calendarColumns, calendarRows),
    canWrite() ? formOf("calendar-form", [
      field(T.admin.calendarName, h("input", { name: "name" })),
      field(T.admin.calendarDates, h("input", { name: "dates", size: 50 })),
    ], T.common.save, async (data) => {
      await call("PUT", `/api/v1/calendars/${encodeURIComponent(data.name)}`,
        { dates: data.dates.split(/[\s,]+/).filter(Boolean) });
      render();
    }) : null));

  if (atLeast("operator")) {
    const tenants = await get("/api/v1/tenants");
    const created = h("div", { id: "tenant-created" });
    const tenantRows = tenants.map((t) => h("tr", {},
      h("td", {}, t.name), h("td", {}, t.tokens)));
    parts.push(section(T.admin.tenants, table(T.admin.tenantColumns, tenantRows),
      formOf("tenant-form", [field(T.admin.tenantName, h("input", { name: "name" }))],
        T.admin.tenantAdd, async (data) => {
          const answer = await call("POST", "/api/v1/tenants", data);
          created.replaceChildren(h("p", {}, T.admin.tenantCreated(answer.name)),
            h("code", { class: "token" }, answer.token));
        }), created));
    parts.push(section(T.admin.tenantSettings,
      formOf("quota-form", [
        field(T.admin.tenant, select("tenant", plain(tenants.map((t) => t.name)), session.tenant)),
        field(T.admin.quota, select("quota", plain(QUOTAS), "jobs")),
        field(T.admin.quotaValue, h("input", { name: "value", type: "number", min: 0 })),
      ], T.admin.quotaSet, async (data) => {
        await call("PUT", `/api/v1/tenants/${encodeURIComponent(data.tenant)}/quotas`,
          { [data.quota]: Number(data.value) });
        flash(T.admin.quotaDone(data.tenant, data.quota, data.value));
      }),
      formOf("ceiling-form", [
        field(T.admin.tenant, select("tenant", plain(tenants.map((t) => t.name)), session.tenant)),
        field(T.admin.ceiling, h("input", { name: "origins", size: 50, placeholder: "https://*.example.com" })),
      ], T.admin.ceilingSet, async (data) => {
        const origins = data.origins.split(/[\s,]+/).filter(Boolean);
        const answer = await call("PUT",
          `/api/v1/tenants/${encodeURIComponent(data.tenant)}/http-ceiling`, { origins });
        flash(T.admin.ceilingDone(data.tenant, answer.origins.join(", ") || "—"));
      })));
  }

  const quotas = await get(`/api/v1/tenants/${encodeURIComponent(session.tenant)}/quotas`).catch(() => null);
  if (quotas) {
    const quotaRows = quotas.quotas.map((q) => h("tr", {},
      h("td", {}, q.quota), h("td", {}, q.limit), h("td", {}, q.used ?? "—"),
      h("td", {}, q.own ? T.common.yes : T.common.no)));
    parts.push(section(T.admin.quotas(quotas.tenant), table(T.admin.quotaColumns, quotaRows)));
  }
  return h("div", { id: "admin" }, parts);
}

// ---------------------------------------------------------------- start

window.addEventListener("hashchange", render);

(async () => {
  try {
    session = await get("/api/v1/session");
    start();
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    showLogin(error.status === 401 ? "" : error.message);
  }
})();

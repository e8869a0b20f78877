// The console's common parts: building elements (every piece of data
// as a text node, never markup), formats, the API client and who is
// logged in, roles, the life of the page shown, and small widgets.

import { T } from "./text.js";

// ---------------------------------------------------------------- DOM

/** An element; string and number children become text nodes. */
export function h(tag, props, ...children) {
  const element = document.createElement(tag);
  setProps(element, props);
  append(element, children);
  return element;
}

/** An SVG element (charts). */
export function svg(tag, attrs, ...children) {
  const element = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    element.setAttribute(key, String(value));
  }
  append(element, children);
  return element;
}

export function setProps(element, props) {
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

export function append(element, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export const $ = (selector, root = document) => root.querySelector(selector);

// ---------------------------------------------------------------- formats

export function pad(n, width = 2) {
  return String(n).padStart(width, "0");
}

export function formatTime(ms) {
  if (ms === null || ms === undefined) return "—";
  const d = new Date(ms);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** An instant (ms or an ISO text) in IANA time zone `zone`, with the
 * zone's short name ("2030-01-01 13:00:00 CET"); in the browser's zone if
 * `zone` is not one the browser knows. */
export function formatInZone(at, zone) {
  if (at === null || at === undefined) return "—";
  const date = new Date(at);
  try {
    return new Intl.DateTimeFormat("sv-SE", {
      timeZone: zone, year: "numeric", month: "2-digit", day: "2-digit",
      hour: "2-digit", minute: "2-digit", second: "2-digit", hour12: false,
      timeZoneName: "short",
    }).format(date);
  } catch {
    return formatTime(date.getTime());
  }
}

export function formatDuration(ms) {
  if (ms === null || ms === undefined) return "—";
  if (Math.abs(ms) < 1000) return `${ms} ms`;
  if (Math.abs(ms) < 120000) return `${(ms / 1000).toFixed(2)} s`;
  return `${(ms / 60000).toFixed(1)} min`;
}

export function formatBytes(bytes) {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1048576) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1048576).toFixed(1)} MiB`;
}

export function shortDigest(digest) {
  return digest ? digest.slice(0, 12) : "—";
}

// ---------------------------------------------------------------- API

export class ApiError extends Error {
  constructor(status, body, retryAfter) {
    super(body && body.message ? body.message : `HTTP ${status}`);
    this.status = status;
    this.body = body;
    this.field = body && body.field;
    this.retryAfter = retryAfter;
  }
}

/** Who is logged in: {user, tenant, role, csrf_token}. */
export let session = null;

/** Sets who is logged in (`null`: nobody). */
export function setSession(value) {
  session = value;
}

/** What the shell does for the pages: show the login (the session
 * ended, with a message) and show the current page again. */
export const hooks = { loggedOut: () => {}, render: () => {} };

/** Shows the current page again (after a change). */
export function refresh() {
  hooks.render();
}

export async function call(method, path, body) {
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
      hooks.loggedOut();
    }
    throw error;
  }
  return data;
}

export const get = (path) => call("GET", path);

export function query(params) {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== null && value !== undefined && value !== "") search.set(key, value);
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}

// ---------------------------------------------------------------- roles

export const RANK = { viewer: 0, developer: 1, admin: 2, operator: 3 };
export const atLeast = (role) => session && RANK[session.role] >= RANK[role];
export const canWrite = () => atLeast("developer");

// ---------------------------------------------------------------- page life

/** The current page's timers and event streams, ended when another page
 * is shown. */
export let page = { timers: [], streams: [], alive: true };

export function every(ms, work) {
  const timer = setInterval(work, ms);
  page.timers.push(timer);
  return timer;
}

/** The page shown now (its timers, streams, and whether it is still shown). */
export const currentPage = () => page;

export function newPage() {
  page.alive = false;
  for (const timer of page.timers) clearInterval(timer);
  for (const stream of page.streams) stream.close();
  page = { timers: [], streams: [], alive: true };
  return page;
}

/** Page changes since the message shown was flashed: a message stays
 * for the page it leads to (a trigger flashes, then opens its run) and
 * goes at the next. */
let flashedPages = 0;

export function flash(message, kind = "info") {
  const box = $("#flash");
  flashedPages = 0;
  if (box) box.replaceChildren(message ? h("div", { class: `flash ${kind}` }, message) : "");
}

/** Called when the address changes to another page. */
export function navigated() {
  if (flashedPages++ >= 1) {
    const box = $("#flash");
    if (box) box.replaceChildren();
  }
}

export function failure(error) {
  flash(T.common.failed(error.message), "error");
}

/** Runs `work` for a button, showing a refusal instead of throwing. */
export function action(work) {
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

export function go(hash) {
  if (location.hash === hash) refresh();
  else location.hash = hash;
}

export function table(headers, rows, empty) {
  if (!rows.length) return h("p", { class: "empty" }, empty || T.common.none);
  // Scrolls within its box on a narrow screen, never the page.
  return h("div", { class: "table-box" }, h("table", {},
    h("thead", {}, h("tr", {}, headers.map((title) => h("th", {}, title)))),
    h("tbody", {}, rows)));
}

export function link(hash, text) {
  return h("a", { href: hash }, text);
}

export function section(title, ...children) {
  return h("section", { class: "card" }, h("h2", {}, title), ...children);
}

export function field(label, input, name) {
  return h("label", { class: "field" },
    h("span", { class: "label" }, label), input,
    h("span", { class: "field-error", "data-field": name || "" }));
}

export const SCHEDULE_TYPES = ["CRON", "FIX_RATE", "FIX_DELAY", "ONE_SHOT", "NONE"];
export const ROUTES_STRATEGIES = [
  "FIRST", "LAST", "ROUND", "RANDOM", "CONSISTENT_HASH", "LEAST_FREQUENTLY_USED",
  "LEAST_RECENTLY_USED", "FAILOVER", "BUSYOVER", "SHARDING_BROADCAST",
];
export const BLOCK_STRATEGIES = ["SERIAL_EXECUTION", "DISCARD_LATER", "COVER_EARLY"];
export const MISFIRES = ["DO_NOTHING", "FIRE_ONCE_NOW"];
export const RUN_STATUSES = ["pending", "dispatched", "success", "failed", "cancelled"];
export const RUN_KINDS = ["schedule", "manual", "api", "retry", "parent", "misfire", "backfill"];
export const PAGE = 50;

export function select(name, options, chosen, props = {}) {
  return h("select", { name, ...props }, options.map(([value, label]) =>
    h("option", { value, selected: value === chosen }, label)));
}

export const plain = (values) => values.map((value) => [value, value]);

export function definitionList(pairs) {
  return h("dl", { class: "definition" }, pairs.map(([term, value]) =>
    [h("dt", {}, term), h("dd", {}, value === "" || value === null || value === undefined ? "—" : value)]));
}

/** A button that asks once more before it acts (no native dialog). */
export function confirmButton(id, label, question, work) {
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

export function lateness(run) {
  return run.started_at_ms ? run.started_at_ms - run.scheduled_at_ms : null;
}

export function toMs(text) {
  return text ? String(new Date(text).getTime()) : "";
}

export function toLocalInput(ms) {
  if (!ms) return "";
  const d = new Date(Number(ms));
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

export function formOf(id, fields, submitLabel, work) {
  const form = h("form", { id, class: "inline" }, fields, h("button", { type: "submit" }, submitLabel));
  form.addEventListener("submit", action(async () => {
    await work(Object.fromEntries(new FormData(form)), form);
  }));
  return form;
}

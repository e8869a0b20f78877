// Runs: the filtered list, and a run's page following its events.

import { T } from "./text.js";
import {
  PAGE,
  RUN_KINDS,
  RUN_STATUSES,
  action,
  call,
  canWrite,
  currentPage,
  definitionList,
  field,
  flash,
  formatBytes,
  formatDuration,
  formatTime,
  get,
  go,
  h,
  lateness,
  link,
  plain,
  query,
  section,
  select,
  shortDigest,
  table,
  toLocalInput,
  toMs,
} from "./core.js";

// ---------------------------------------------------------------- runs

/** A run's status as a person reads it: a dispatched run that has
 * started (its executor says so) is running. */
export function shownStatus(run) {
  return run.status === "dispatched" && run.started_at_ms ? "running" : run.status;
}

export function runsTable(runs, empty = T.runs.empty) {
  const rows = runs.map((run) => h("tr", { "data-run": run.id },
    h("td", {}, link(`#/runs/${run.id}`, run.id)),
    h("td", { class: "job-name" }, link(`#/jobs/${run.job_id}`, run.job_name || run.job_id)),
    h("td", {}, run.kind),
    h("td", {}, formatTime(run.scheduled_at_ms)),
    h("td", {}, h("span", { class: `status status-${run.status}` }, shownStatus(run))),
    h("td", {}, run.outcome || "—"),
    h("td", {}, run.executor || "—"),
    h("td", {}, run.started_at_ms && run.finished_at_ms
      ? formatDuration(run.finished_at_ms - run.started_at_ms) : "—")));
  return table(T.runs.columns, rows, empty);
}

export async function runsPage(params) {
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

export function runFields(run) {
  const r = T.run.fields;
  return definitionList([
    [r.job, link(`#/jobs/${run.job_id}`, run.job_name ? `${run.job_name} (${run.job_id})` : run.job_id)],
    [r.kind, run.kind],
    [r.status, h("span", { id: "run-status", class: `status status-${run.status}` }, shownStatus(run))],
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
    [r.module, run.module ? `${run.module} (${shortDigest(run.module_digest)})` : run.module_digest],
    [r.attempt, run.attempt],
    [r.shard, `${run.shard_index} / ${run.shard_total}`],
    [r.param, run.param],
    [r.alarm, run.alarm_status],
    [r.trace, traceLink(run)],
  ]);
}

/** The run's trace id, linked to the operator's trace viewer when the
 * admin has its address (an http(s) URL only). */
function traceLink(run) {
  if (!run.trace_id) return null;
  const id = h("code", { id: "run-trace" }, run.trace_id);
  if (!run.trace_url || !/^https?:\/\//.test(run.trace_url)) return id;
  return h("a", { id: "run-trace-link", href: run.trace_url, target: "_blank", rel: "noopener noreferrer" }, id);
}

export const isOpen = (run) => run.status === "pending" || run.status === "dispatched";

export async function runPage(id) {
  let run = await get(`/api/v1/runs/${id}`);
  const mine = currentPage();
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
    // The stream's runs are rows; the names read with the page stay.
    run = { ...next, job_name: next.job_name ?? run.job_name, module: next.module ?? run.module };
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

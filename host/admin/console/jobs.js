// Jobs: the list, a job's page (its runs, state, backfills) and its actions.

import { T } from "./text.js";
import {
  PAGE,
  SCHEDULE_TYPES,
  action,
  call,
  canWrite,
  confirmButton,
  definitionList,
  field,
  flash,
  formOf,
  formatBytes,
  formatDuration,
  formatInZone,
  formatTime,
  get,
  go,
  h,
  link,
  plain,
  query,
  refresh,
  section,
  select,
  shortDigest,
  table,
} from "./core.js";
import { runsTable } from "./runs.js";

// ---------------------------------------------------------------- jobs

export function moduleOf(job) {
  if (job.executor_handler) return T.job.handler(job.executor_handler);
  if (!job.module_name) return shortDigest(job.module_digest);
  return job.module_version ? `${job.module_name}@${job.module_version}` : job.module_name;
}

export function statusOf(job) {
  if (job.pause) {
    return T.job.paused(job.pause.by, job.pause.until_ms ? formatTime(job.pause.until_ms) : null,
      job.pause.note);
  }
  return job.enabled ? T.jobs.enabled : T.jobs.disabled;
}

export function scheduleOf(job) {
  return job.schedule_type === "NONE" ? "NONE" : `${job.schedule_type} ${job.schedule_conf}`;
}

export async function jobsPage(params) {
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
    h("td", { class: "next-fire" }, formatInZone(job.next_fire_at_ms, job.time_zone)),
    h("td", { class: "last-run" }, lastRunOf(job)),
    canWrite() ? h("td", { class: "row-actions" }, rowActions(job)) : null));
  const paging = h("p", { class: "paging" },
    after ? link(`#/jobs${query(filters)}`, T.common.first) : null, " ",
    jobs.length === PAGE
      ? link(`#/jobs${query({ ...filters, after: jobs[jobs.length - 1].id })}`, T.common.next)
      : null);
  return h("div", { id: "jobs" },
    h("h1", {}, T.jobs.title, " ",
      canWrite() ? h("a", { href: "#/jobs/new", class: "button", id: "job-new" }, T.jobs.new) : null),
    form,
    table(canWrite() ? [...T.jobs.columns, ""] : T.jobs.columns, rows, T.jobs.empty),
    paging);
}

/** A listed job's last run that was due: its outcome (or status) and
 * when, linking to it. */
function lastRunOf(job) {
  const run = job.last_run;
  if (!run) return h("span", { class: "muted" }, T.jobs.noRunYet);
  const shown = run.outcome || run.status;
  return link(`#/runs/${run.id}`, [
    h("span", { class: `status status-${run.status}` }, shown), " ",
    formatInZone(run.scheduled_at_ms, job.time_zone)]);
}

/** What a person does to a job from the list: run it once now (as
 * `manual`, with its own parameter), read its runs' logs, start or stop
 * it, edit it. */
function rowActions(job) {
  return [
    h("button", { class: "run-once", title: T.jobs.runOnceHint, on: { click: action(async () => {
      const triggered = await call("POST", `/api/v1/jobs/${job.id}/trigger`, { kind: "manual" });
      flash(T.job.triggered(triggered.run_id));
      go(`#/runs/${triggered.run_id}`);
    }) } }, T.jobs.runOnce),
    h("a", { class: "button logs", href: `#/runs${query({ job: job.id })}` }, T.jobs.logs),
    job.enabled
      ? h("button", { class: "stop", on: { click: action(async () => {
        await call("POST", `/api/v1/jobs/${job.id}/stop`); refresh();
      }) } }, T.job.stop)
      : h("button", { class: "start", on: { click: action(async () => {
        await call("POST", `/api/v1/jobs/${job.id}/start`); refresh();
      }) } }, T.job.start),
    h("a", { class: "button edit", href: `#/jobs/${job.id}/edit` }, T.job.edit),
  ];
}

export async function jobPage(id) {
  const job = await get(`/api/v1/jobs/${id}`);
  const [fires, runs, state, backfills] = await Promise.all([
    get(`/api/v1/jobs/${id}/next-fires?count=5`).catch(() => []),
    get(`/api/v1/runs?job=${id}&limit=20`),
    get(`/api/v1/jobs/${id}/state`).catch(() => null),
    get(`/api/v1/backfills?job=${id}`).catch(() => []),
  ]);
  const f = T.form.fields;
  const module = job.executor_handler ? T.job.legacy : job.module_name
    ? (job.module_version ? T.job.pinned(job.module_name, job.module_version) : T.job.follows(job.module_name))
    : T.job.digestOnly;
  const definition = definitionList([
    [f.name, job.name], [f.group, job.group_name],
    [T.jobs.module, `${moduleOf(job)} (${module})`],
    ["Digest", job.module_digest],
    [f.schedule_type, job.schedule_type], [f.schedule_conf, job.schedule_conf],
    [f.time_zone, job.time_zone], [f.misfire, `${job.misfire} / ${job.misfire_threshold_ms} ms`],
    [f.route, job.route], [f.block_strategy, job.block_strategy],
    [f.max_concurrency, job.max_concurrency], [f.timeout_s, formatDuration(job.timeout_ms)],
    [f.fuel, job.fuel], [f.memory_mib, formatBytes(job.memory_bytes)],
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
        await call("POST", `/api/v1/jobs/${id}/stop`); flash(T.common.done); refresh();
      }) } }, T.job.stop)
      : h("button", { id: "job-start", on: { click: action(async () => {
        await call("POST", `/api/v1/jobs/${id}/start`); flash(T.common.done); refresh();
      }) } }, T.job.start),
    param,
    h("button", { id: "job-trigger", on: { click: action(async () => {
      // A person at the console: the run's kind is `manual`.
      const body = param.value ? { param: param.value, kind: "manual" } : { kind: "manual" };
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
      refresh();
    }) } }, T.job.pause),
    h("button", { id: "job-kill", on: { click: action(async () => {
      const killed = await call("POST", `/api/v1/jobs/${id}/kill`, {});
      flash(T.job.killed(killed.killed.length + killed.cancelled.length));
      refresh();
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
        section(T.job.nextFiresIn(job.time_zone), fires.length
          ? h("ol", { id: "next-fires" }, fires.map((at) => h("li", {}, formatInZone(at, job.time_zone))))
          : h("p", {}, T.form.previewNone)),
        stateSection(id, state))),
    section(T.job.recentRuns, runsTable(runs.runs)),
    backfillSection(id, backfills));
}

/** A job's backfills, a form to start one (roles that may) and cancel. */
export function backfillSection(id, backfills) {
  const rows = backfills.map((b) => h("tr", { "data-backfill": b.id },
    h("td", {}, b.id), h("td", {}, formatTime(b.from_ms)), h("td", {}, formatTime(b.to_ms)),
    h("td", {}, `${b.written} / ${b.planned}`), h("td", {}, b.per_second),
    h("td", { class: "backfill-status" }, b.status), h("td", {}, b.created_by),
    h("td", {}, canWrite() && b.status === "running" ? h("button", { on: { click: action(async () => {
      await call("DELETE", `/api/v1/backfills/${b.id}`);
      refresh();
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
    refresh();
  }) : null;
  return section(T.job.backfills, table(T.job.backfillColumns, rows), form);
}

export function stateSection(id, state) {
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
    refresh();
  }) } }, T.common.save);
  return section(T.job.state, view, field(T.job.stateEdit, editor), save);
}

// The job form: a new job, an edit or a copy, with a live schedule preview.

import { T } from "./text.js";
import {
  ApiError,
  BLOCK_STRATEGIES,
  MISFIRES,
  ROUTES_STRATEGIES,
  SCHEDULE_TYPES,
  call,
  failure,
  field,
  flash,
  get,
  go,
  h,
  plain,
  query,
  select,
  toLocalInput,
} from "./core.js";

// ---------------------------------------------------------------- job form

export function specOf(job) {
  return {
    name: job.name,
    group: job.group_name,
    module: job.module_name
      ? (job.module_version ? `${job.module_name}@${job.module_version}` : job.module_name)
      : "",
    module_digest: job.module_name ? "" : job.module_digest,
    executor_handler: job.executor_handler || "",
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

export const NEW_JOB = {
  name: "", group: "default", module: "", module_digest: "", executor_handler: "", schedule_type: "CRON",
  schedule_conf: "0 * * * * ?", time_zone: "UTC", misfire: "DO_NOTHING",
  misfire_threshold_ms: 5000, route: "FIRST", block_strategy: "SERIAL_EXECUTION",
  max_concurrency: 1, timeout_ms: 60000, fuel: null, memory_bytes: 67108864, retry_count: 0,
  retry_interval_ms: 0, children: [], param: "", fresh_instance: false, config: {}, secrets: [],
  http_allow: [], http_limits: {}, alarm_url: "", schedule_rules: {},
};

/** The form's sections, each with its fields in order. */
export const FORM_SECTIONS = [
  ["basics", ["name", "group", "module", "module_digest", "executor_handler", "param",
    "children"]],
  ["schedule", ["schedule_type", "schedule_conf", "time_zone", "starts_at", "ends_at",
    "exclude_dates", "calendars", "jitter_ms", "overlap", "misfire", "misfire_threshold_s"]],
  ["execution", ["route", "block_strategy", "max_concurrency", "fresh_instance", "retry_count",
    "retry_interval_s"]],
  ["limits", ["timeout_s", "memory_mib", "fuel"]],
  ["access", ["config", "secrets", "http_allow", "http_limits"]],
  ["alarms", ["alarm_url"]],
];

/** The API's name of a field whose input is named otherwise (a refusal
 * names the API's field; it is shown next to the input). */
const API_FIELD = {
  exclude_dates: "schedule_rules",
  misfire_threshold_s: "misfire_threshold_ms",
  timeout_s: "timeout_ms",
  memory_mib: "memory_bytes",
  retry_interval_s: "retry_interval_ms",
};

export async function jobFormPage(id, mode) {
  const job = id ? await get(`/api/v1/jobs/${id}`) : null;
  const spec = job ? specOf(job) : { ...NEW_JOB };
  if (mode === "copy") spec.name = `${spec.name} (copy)`;
  const f = T.form.fields;
  const input = (name, props = {}) => h("input", { name, value: spec[name] ?? "", ...props });
  const number = (name) => input(name, { type: "number", step: 1 });
  // Durations in seconds and memory in MiB, as people think of them; the
  // API's milliseconds and bytes are computed on save.
  const scaled = (name, value, per, props = {}) => h("input", {
    name, type: "number", min: 0, step: "any",
    value: value === null || value === undefined ? "" : value / per, ...props });
  const inputs = {
    name: input("name", { required: true }),
    group: input("group", { list: "group-names" }),
    module: input("module", { list: "module-names" }),
    module_digest: input("module_digest"),
    executor_handler: input("executor_handler"),
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
    misfire_threshold_s: scaled("misfire_threshold_s", spec.misfire_threshold_ms, 1000),
    route: select("route", plain(ROUTES_STRATEGIES), spec.route),
    block_strategy: select("block_strategy", plain(BLOCK_STRATEGIES), spec.block_strategy),
    max_concurrency: number("max_concurrency"),
    timeout_s: scaled("timeout_s", spec.timeout_ms, 1000),
    fuel: number("fuel"),
    memory_mib: scaled("memory_mib", spec.memory_bytes, 1048576),
    retry_count: number("retry_count"),
    retry_interval_s: scaled("retry_interval_s", spec.retry_interval_ms, 1000),
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
  const groups = h("datalist", { id: "group-names" });
  get("/api/v1/groups").then((list) => groups.replaceChildren(
    ...list.map((g) => h("option", { value: g.name })))).catch(() => {});
  const form = h("form", { id: "job-form", class: "job-form" },
    FORM_SECTIONS.map(([section, names]) => h("fieldset", { "data-section": section },
      h("legend", {}, T.form.sections[section]),
      names.map((name) => field(f[name], inputs[name], API_FIELD[name] || name)))),
    modules, groups,
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
    const times = (name, per) => {
      const value = integer(name);
      return value === null ? null : Math.round(value * per);
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
      misfire_threshold_ms: times("misfire_threshold_s", 1000) ?? 5000,
      route: inputs.route.value,
      block_strategy: inputs.block_strategy.value,
      max_concurrency: integer("max_concurrency") ?? 1,
      timeout_ms: times("timeout_s", 1000) ?? 60000,
      fuel: integer("fuel"),
      memory_bytes: times("memory_mib", 1048576) ?? 67108864,
      retry_count: integer("retry_count") ?? 0,
      retry_interval_ms: times("retry_interval_s", 1000) ?? 0,
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
    // A legacy job (its group's executors speak xxl-job) names a handler.
    if (inputs.executor_handler.value.trim()) {
      body.executor_handler = inputs.executor_handler.value.trim();
    }
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

// The dashboard: runs per day and per outcome.

import { T } from "./text.js";
import { formatDuration, get, h, link, pad, section, svg } from "./core.js";

// ---------------------------------------------------------------- dashboard

export const OUTCOMES = ["success", "failed", "running", "cancelled"];

/** A stacked bar chart of run counts: one bar per bucket. */
export function barChart(buckets, label, id) {
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

export async function dashboardPage() {
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

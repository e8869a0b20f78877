// Workflows: the list, a workflow's page (its graph drawn, its runs, run
// it now, its definition edited with refusals shown next to the field)
// and a workflow run's page (each node's status, timing, input, output
// and run, live while it runs; a fanned-out node's elements listed).

import { T } from "./text.js";
import {
  ApiError,
  action,
  call,
  canWrite,
  every,
  flash,
  formatDuration,
  formatTime,
  get,
  go,
  h,
  link,
  refresh,
  section,
  svg,
  table,
} from "./core.js";

// ---------------------------------------------------------------- graph

/** Each node's layer: 0 for nodes without parents, else one past its
 * deepest parent (the definition has no cycle). */
function layers(spec) {
  const depth = new Map(spec.nodes.map((node) => [node.name, 0]));
  for (let pass = 0; pass < spec.nodes.length; pass++) {
    for (const edge of spec.edges) {
      const deeper = depth.get(edge.from) + 1;
      if (deeper > depth.get(edge.to)) depth.set(edge.to, deeper);
    }
  }
  return depth;
}

const BOX = { width: 140, height: 36, across: 180, down: 70 };

/** The workflow drawn as boxes and arrows, layered top to bottom; a run's
 * node statuses colour the boxes. */
export function graph(spec, statuses = new Map()) {
  const depth = layers(spec);
  const rows = new Map();
  const at = new Map();
  for (const node of spec.nodes) {
    const layer = depth.get(node.name);
    const column = rows.get(layer) || 0;
    rows.set(layer, column + 1);
    at.set(node.name, { x: 10 + column * BOX.across, y: 10 + layer * BOX.down });
  }
  const width = 20 + Math.max(...rows.values()) * BOX.across;
  const height = 20 + rows.size * BOX.down;
  const arrows = spec.edges.map((edge) => {
    const from = at.get(edge.from);
    const to = at.get(edge.to);
    return svg("line", {
      class: `edge on-${edge.on || "success"}${edge.when ? " conditional" : ""}`,
      x1: from.x + BOX.width / 2, y1: from.y + BOX.height,
      x2: to.x + BOX.width / 2, y2: to.y,
      "marker-end": "url(#arrow)",
    }, svg("title", {}, T.workflows.edge(edge.from, edge.to, edge.on || "success", edge.when)));
  });
  const boxes = spec.nodes.map((node) => {
    const { x, y } = at.get(node.name);
    const status = statuses.get(node.name);
    return svg("g", { class: `node ${status || ""}`, "data-node": node.name },
      svg("rect", { x, y, width: BOX.width, height: BOX.height, rx: 6 }),
      svg("text", { x: x + 8, y: y + 15 }, node.name),
      svg("text", { x: x + 8, y: y + 29, class: "sub" },
        status || (node.for_each ? `${node.job} ×` : node.job)),
      node.for_each ? svg("title", {}, T.workflows.each(node.for_each)) : null);
  });
  return svg("svg", {
    class: "workflow-graph", viewBox: `0 0 ${width} ${height}`,
    width, height, role: "img", "aria-label": T.workflows.graph,
  },
  svg("defs", {}, svg("marker", {
    id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 6, markerHeight: 6,
    orient: "auto-start-reverse",
  }, svg("path", { d: "M 0 0 L 10 5 L 0 10 z" }))),
  arrows, boxes);
}

// ---------------------------------------------------------------- pages

export async function workflowsPage() {
  const workflows = await get("/api/v1/workflows");
  const rows = workflows.map((w) => h("tr", { "data-workflow": w.name },
    h("td", {}, link(`#/workflows/${encodeURIComponent(w.name)}`, w.name)),
    h("td", {}, w.tenant),
    h("td", {}, String(w.version)),
    h("td", {}, String(w.definition.nodes.length)),
    h("td", { class: "next-fire" }, w.next_fire_at_ms ? formatTime(w.next_fire_at_ms) : "—"),
    h("td", {}, formatTime(w.updated_at_ms))));
  return h("div", { id: "workflows" }, h("h1", {}, T.workflows.title),
    h("p", { class: "hint" }, T.workflows.hint),
    table(T.workflows.columns, rows, T.workflows.none),
    canWrite() ? editor(null) : null);
}

export async function workflowPage(name) {
  const path = `/api/v1/workflows/${encodeURIComponent(name)}`;
  const [workflow, runs] = await Promise.all([get(path), get(`${path}/runs`)]);
  const definition = workflow.definition;
  const runRows = runs.map((run) => h("tr", { "data-workflow-run": run.id },
    h("td", {}, link(`#/workflow-runs/${run.id}`, String(run.id))),
    h("td", {}, String(run.version)),
    h("td", {}, run.kind),
    h("td", {}, h("span", { class: `status status-${run.status}` }, run.status)),
    h("td", {}, formatTime(run.started_at_ms)),
    h("td", {}, run.ended_at_ms ? formatDuration(run.ended_at_ms - run.started_at_ms) : "—")));
  const input = h("input", { id: "workflow-input", name: "input", size: 40, placeholder: "{}" });
  const runNow = canWrite() ? h("form", { id: "workflow-run", class: "inline" },
    h("label", { class: "field" }, h("span", { class: "label" }, T.workflows.input), input),
    h("button", { type: "submit" }, T.workflows.runNow)) : null;
  if (runNow) {
    runNow.addEventListener("submit", action(async () => {
      const body = input.value.trim() ? { input: input.value.trim() } : {};
      const run = await call("POST", `${path}/runs`, body);
      flash(T.workflows.started(run.id));
      go(`#/workflow-runs/${run.id}`);
    }));
  }
  if (runs.some((run) => run.status === "running")) every(2000, () => refresh());
  return h("div", { id: "workflow", "data-name": workflow.name },
    h("h1", {}, T.workflows.heading(workflow.name, workflow.version)),
    definition.description ? h("p", {}, definition.description) : null,
    definition.schedule ? h("p", { id: "workflow-schedule" }, T.workflows.schedule(
      definition.schedule.schedule_type, definition.schedule.schedule_conf,
      definition.schedule.time_zone,
      workflow.next_fire_at_ms ? formatTime(workflow.next_fire_at_ms) : "—")) : null,
    section(T.workflows.graphTitle, graph(definition), runNow),
    section(T.workflows.runs, table(T.workflows.runColumns, runRows, T.workflows.noRuns)),
    canWrite() ? editor(workflow) : null);
}

/** The definition as JSON in a text box; a refusal shows next to it,
 * naming the node or edge. */
function editor(workflow) {
  const name = h("input", { id: "workflow-name", name: "name", value: workflow ? workflow.name : "" });
  const definition = workflow
    ? workflow.definition
    : { nodes: [{ name: "first", job: "" }], edges: [] };
  const text = h("textarea", { id: "workflow-definition", rows: 14, cols: 70 },
    JSON.stringify(definition, null, 2));
  const error = h("p", { id: "workflow-error", class: "field-error" });
  const form = h("form", { id: "workflow-form" },
    workflow ? null : h("label", { class: "field" }, h("span", { class: "label" }, T.workflows.name), name),
    h("label", { class: "field" }, h("span", { class: "label" }, T.workflows.definition), text),
    error,
    h("button", { type: "submit" }, T.common.save));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.textContent = "";
    let body;
    try {
      body = JSON.parse(text.value);
    } catch (failed) {
      error.textContent = T.workflows.notJson(failed.message);
      return;
    }
    try {
      const saved = await call("PUT", `/api/v1/workflows/${encodeURIComponent(name.value)}`, body);
      flash(T.workflows.saved(saved.name, saved.version));
      go(`#/workflows/${encodeURIComponent(saved.name)}`);
    } catch (failed) {
      if (!(failed instanceof ApiError)) throw failed;
      error.textContent = failed.field ? `${failed.field}: ${failed.message}` : failed.message;
    }
  });
  return section(workflow ? T.workflows.edit : T.workflows.create, form);
}

/** A fanned-out node's status with how many of its elements ended. */
function nodeStatus(node) {
  if (!node.items) return node.status;
  const { succeeded, failed, total } = node.items;
  return T.workflows.itemsDone(node.status, succeeded + failed, total);
}

/** The elements of a fanned-out node, one row each. */
function itemsSection(node, items) {
  const rows = items.map((item) => h("tr", { "data-item": item.index },
    h("td", {}, String(item.index)),
    h("td", {}, h("span", { class: `status status-${item.status}` }, item.status)),
    h("td", {}, item.run_id ? link(`#/runs/${item.run_id}`, String(item.run_id)) : "—"),
    h("td", { class: "input" }, item.input),
    h("td", { class: "output" }, item.output ?? item.message ?? "—")));
  const list = section(T.workflows.items(node), table(T.workflows.itemColumns, rows));
  list.dataset.items = node;
  return list;
}

export async function workflowRunPage(id) {
  const path = `/api/v1/workflow-runs/${id}`;
  const run = await get(path);
  const workflow = await get(`/api/v1/workflows/${encodeURIComponent(run.workflow_name)}`)
    .catch(() => null);
  const fanned = run.nodes.filter((node) => node.items);
  const itemLists = await Promise.all(fanned.map((node) =>
    get(`${path}/nodes/${encodeURIComponent(node.node)}/items`)));
  const statuses = new Map(run.nodes.map((node) => [node.node, node.status]));
  const rows = run.nodes.map((node) => h("tr", { "data-node": node.node },
    h("td", {}, node.node),
    h("td", {}, h("span", { class: `status status-${node.status}` }, nodeStatus(node))),
    h("td", {}, node.run_id ? link(`#/runs/${node.run_id}`, String(node.run_id)) : "—"),
    h("td", {}, node.started_at_ms ? formatTime(node.started_at_ms) : "—"),
    h("td", {}, node.ended_at_ms && node.started_at_ms
      ? formatDuration(node.ended_at_ms - node.started_at_ms) : "—"),
    h("td", { class: "input" }, node.input ?? "—"),
    h("td", { class: "output" }, node.output ?? node.message ?? "—")));
  if (run.status === "running") every(1000, () => refresh());
  const buttons = !canWrite() ? null
    : run.status === "running"
      ? h("button", { id: "workflow-cancel", class: "danger", on: { click: action(async () => {
        await call("POST", `${path}/cancel`);
        flash(T.workflows.cancelled(run.id));
        refresh();
      }) } }, T.workflows.cancel)
      : ["failed", "cancelled"].includes(run.status)
        ? h("button", { id: "workflow-retry", on: { click: action(async () => {
          await call("POST", `${path}/retry`);
          flash(T.workflows.retried(run.id));
          refresh();
        }) } }, T.workflows.retry)
        : null;
  // The graph of the version the run follows, when it is still the
  // workflow's latest (otherwise the table alone).
  const drawn = workflow && workflow.version === run.version
    ? graph(workflow.definition, statuses) : null;
  return h("div", { id: "workflow-run", "data-status": run.status },
    h("h1", {}, T.workflows.runHeading(run.id, run.workflow_name)),
    h("p", {}, h("span", { class: `status status-${run.status}` }, run.status), " · ",
      T.workflows.versionStarted(run.version, formatTime(run.started_at_ms)), " · ",
      link(`#/workflows/${encodeURIComponent(run.workflow_name)}`, T.workflows.back)),
    buttons,
    drawn ? section(T.workflows.graphTitle, drawn) : null,
    section(T.workflows.nodes, table(T.workflows.nodeColumns, rows)),
    fanned.map((node, i) => itemsSection(node.node, itemLists[i])));
}

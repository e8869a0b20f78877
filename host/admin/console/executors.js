// Executors and their groups, and (the operator's) enrolled executors:
// a token each, scoped to groups, shown once, rotated and revoked.

import { T } from "./text.js";
import {
  ApiError,
  action,
  atLeast,
  call,
  confirmButton,
  every,
  field,
  flash,
  formOf,
  formatTime,
  get,
  h,
  plain,
  refresh,
  section,
  select,
  table,
} from "./core.js";

// ---------------------------------------------------------------- executors

export async function executorsPage() {
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
  const timer = executors ? every(5000, () => refresh()) : null;
  const groupForm = atLeast("operator") ? formOf("group-form", [
    field(T.executors.groupName, h("input", { name: "name" })),
    field(T.executors.addressType, select("address_type", plain(["AUTO", "MANUAL"]), "AUTO")),
    field(T.executors.addresses, h("input", { name: "addresses", size: 40 })),
  ], T.executors.groupSave, async (data) => {
    const addresses = data.addresses.split(/[\s,]+/).filter(Boolean);
    await call("PUT", `/api/v1/groups/${encodeURIComponent(data.name)}`,
      { address_type: data.address_type, addresses });
    flash(T.common.done);
    refresh();
  }) : null;
  return h("div", { id: "executors" }, h("h1", {}, T.executors.title),
    section(T.executors.groups, table(T.executors.groupColumns, groupRows), groupForm),
    section(T.executors.live, executors
      ? table(T.executors.columns, executorRows)
      : h("p", {}, T.executors.operatorOnly)),
    atLeast("operator") ? await enrolledSection(timer) : null);
}

/** The operator's enrolled executors; `timer` is the page's refresh, stopped
 * while a new token is on screen (it is shown once). */
async function enrolledSection(timer) {
  const E = T.executors.enrolled;
  const credentials = await get("/api/v1/executor-tokens");
  const shown = h("div", { id: "executor-token-shown" });
  const show = (issued) => {
    clearInterval(timer);
    shown.replaceChildren(h("p", {}, E.shown(issued.id, issued.groups.join(", "))),
      h("code", { class: "token" }, issued.token));
  };
  const now = Date.now();
  const rows = credentials.map((c) => h("tr", { "data-credential": c.id },
    h("td", {}, c.id), h("td", {}, c.name), h("td", {}, c.groups.join(", ")),
    h("td", {}, formatTime(c.created_at_ms)),
    h("td", { class: "state" }, c.revoked_at_ms ? E.revoked(formatTime(c.revoked_at_ms))
      : c.previous_valid_until_ms > now ? E.rotating(formatTime(c.previous_valid_until_ms))
        : E.active),
    h("td", {}, c.registered.join(", ") || "—"),
    h("td", {}, c.revoked_at_ms ? null : [
      h("button", { class: "rotate", on: { click: action(async () => {
        show(await call("POST", `/api/v1/executor-tokens/${c.id}/rotate`, {}));
      }) } }, E.rotate),
      " ",
      confirmButton(`revoke-${c.id}`, E.revoke, E.sure, async () => {
        await call("DELETE", `/api/v1/executor-tokens/${c.id}`);
        flash(E.revokedNow(c.id));
        refresh();
      }),
    ])));
  const form = formOf("executor-token-form", [
    field(E.name, h("input", { name: "name", required: true })),
    field(E.groups, h("input", { name: "groups", required: true })),
  ], E.create, async (data) => {
    show(await call("POST", "/api/v1/executor-tokens",
      { name: data.name, groups: data.groups.split(/[\s,]+/).filter(Boolean) }));
  });
  return section(E.title, table(E.columns, rows, E.none), form, shown);
}

// Executors and their groups.

import { T } from "./text.js";
import {
  ApiError,
  atLeast,
  call,
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
  if (executors) every(5000, () => refresh());
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
      : h("p", {}, T.executors.operatorOnly)));
}

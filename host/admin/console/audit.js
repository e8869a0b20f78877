// The audit log: every change made through the API and every login,
// newest first, filtered and paged (admins; the operator sees every
// tenant's).

import { T } from "./text.js";
import { atLeast, field, formatTime, get, go, h, link, query, table } from "./core.js";

const PAGE = 100;

export async function auditPage(params) {
  const filters = {
    actor: params.get("actor") || "",
    action: params.get("action") || "",
    tenant: params.get("tenant") || "",
  };
  const before = params.get("before") || "";
  const page = await get(`/api/v1/audit${query({ ...filters, before, limit: PAGE })}`);
  const form = h("form", { id: "audit-filters", class: "filters" },
    field(T.audit.actor, h("input", { name: "actor", value: filters.actor })),
    field(T.audit.action, h("input", { name: "action", value: filters.action })),
    atLeast("operator")
      ? field(T.audit.tenant, h("input", { name: "tenant", value: filters.tenant }))
      : null,
    h("button", { type: "submit" }, T.common.filter));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    go(`#/audit${query(Object.fromEntries(new FormData(form)))}`);
  });
  const rows = page.entries.map((entry) => h("tr", { "data-entry": entry.id },
    h("td", {}, formatTime(entry.at_ms)),
    h("td", {}, entry.tenant || "—"),
    h("td", { class: "actor" }, entry.actor),
    h("td", { class: "action" }, entry.action),
    h("td", {}, entry.target),
    h("td", { class: entry.outcome === "ok" ? "ok" : "warn" }, `${entry.status} ${entry.outcome}`),
    h("td", {}, entry.address || "—"),
    h("td", { class: "detail" }, entry.detail ? JSON.stringify(entry.detail) : "")));
  const paging = h("p", { class: "paging" },
    before ? link(`#/audit${query(filters)}`, T.common.first) : null, " ",
    page.next_before
      ? link(`#/audit${query({ ...filters, before: page.next_before })}`, T.common.next)
      : null);
  return h("div", { id: "audit" }, h("h1", {}, T.audit.title), form,
    table(T.audit.columns, rows, T.audit.empty), paging);
}

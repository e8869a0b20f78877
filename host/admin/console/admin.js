// Administration: the caller's account and tokens, users, tenants, quotas.

import { T } from "./text.js";
import {
  RANK,
  action,
  atLeast,
  call,
  canWrite,
  confirmButton,
  definitionList,
  field,
  flash,
  formOf,
  formatTime,
  get,
  h,
  hooks,
  plain,
  refresh,
  section,
  select,
  session,
  setSession,
  table,
} from "./core.js";

// ---------------------------------------------------------------- administration

export const ROLES = ["viewer", "developer", "admin", "operator"];
export const QUOTAS = [
  "jobs", "modules", "module_bytes", "min_interval_ms", "running_runs", "executor_instances",
  "run_ms_per_day", "state_bytes", "log_bytes_per_day",
];

export async function adminPage() {
  const parts = [h("h1", {}, T.admin.title)];
  parts.push(section(T.admin.me, definitionList([
    ["User", session.user], ["Tenant", session.tenant], ["Role", session.role],
  ]), session.user ? formOf("password-form", [
    field(T.admin.currentPassword, h("input", { name: "current_password", type: "password", autocomplete: "current-password" })),
    field(T.admin.newPassword, h("input", { name: "password", type: "password", autocomplete: "new-password" })),
  ], T.common.save, async (data) => {
    await call("PUT", `/api/v1/users/${encodeURIComponent(session.user)}/password`, data);
    setSession(null);
    hooks.loggedOut(T.admin.passwordSet);
  }) : null));

  const tokens = await get("/api/v1/tokens");
  const shown = h("div", { id: "token-shown" });
  const tokenRows = tokens.map((t) => h("tr", {},
    h("td", {}, t.id), h("td", {}, t.label), h("td", {}, t.role), h("td", {}, t.user || "—"),
    h("td", {}, formatTime(t.created_at_ms)),
    h("td", {}, h("button", { on: { click: action(async () => {
      await call("DELETE", `/api/v1/tokens/${t.id}`);
      refresh();
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
          refresh();
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
        refresh();
      })));

    const secrets = await get("/api/v1/secrets");
    const secretRows = secrets.map((s) => h("tr", {},
      h("td", {}, s.tenant), h("td", {}, s.name), h("td", {}, formatTime(s.updated_at_ms)),
      h("td", {}, s.used_by.join(", ") || "—"),
      h("td", {}, confirmButton(`secret-delete-${s.name}`, T.common.delete, T.common.confirmDelete(s.name),
        async () => {
          await call("DELETE", `/api/v1/secrets/${encodeURIComponent(s.name)}?force=true`);
          refresh();
        }))));
    parts.push(section(T.admin.secrets, table(T.admin.secretColumns, secretRows),
      formOf("secret-form", [
        field(T.admin.secretName, h("input", { name: "name" })),
        field(T.admin.secretValue, h("input", { name: "value", type: "password", autocomplete: "off" })),
      ], T.admin.secretSet, async (data) => {
        await call("PUT", `/api/v1/secrets/${encodeURIComponent(data.name)}`, { value: data.value });
        refresh();
      })));
  }

  const calendars = await get("/api/v1/calendars");
  const calendarRows = calendars.map((c) => h("tr", { "data-calendar": c.name },
    h("td", {}, c.tenant), h("td", {}, c.name), h("td", {}, c.dates.join(", ")),
    h("td", {}, formatTime(c.updated_at_ms)),
    h("td", {}, canWrite() ? confirmButton(`calendar-delete-${c.name}`, T.common.delete,
      T.common.confirmDelete(c.name), async () => {
        await call("DELETE", `/api/v1/calendars/${encodeURIComponent(c.name)}`);
        refresh();
      }) : null)));
  parts.push(section(T.admin.calendars, table(T.admin.calendarColumns, calendarRows),
    canWrite() ? formOf("calendar-form", [
      field(T.admin.calendarName, h("input", { name: "name" })),
      field(T.admin.calendarDates, h("input", { name: "dates", size: 50 })),
    ], T.common.save, async (data) => {
      await call("PUT", `/api/v1/calendars/${encodeURIComponent(data.name)}`,
        { dates: data.dates.split(/[\s,]+/).filter(Boolean) });
      refresh();
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

// Modules: uploads, versions, labels and rollbacks.

import { T } from "./text.js";
import {
  action,
  call,
  canWrite,
  field,
  flash,
  formatTime,
  get,
  h,
  link,
  query,
  refresh,
  section,
  session,
  shortDigest,
  table,
} from "./core.js";

// ---------------------------------------------------------------- modules

export function uploadForm() {
  const file = h("input", { id: "upload-file", type: "file", accept: ".wasm,application/wasm" });
  const name = h("input", { id: "upload-name", name: "name" });
  const labels = h("input", { id: "upload-labels", name: "labels" });
  const progress = h("progress", { id: "upload-progress", max: 1, value: 0 });
  const result = h("p", { id: "upload-result" });
  let dropped = null;
  const zone = h("div", { id: "drop-zone", class: "drop-zone" }, T.modules.drop);
  zone.addEventListener("dragover", (event) => { event.preventDefault(); zone.classList.add("over"); });
  zone.addEventListener("dragleave", () => zone.classList.remove("over"));
  zone.addEventListener("drop", (event) => {
    event.preventDefault();
    zone.classList.remove("over");
    dropped = event.dataTransfer.files[0] || null;
    if (dropped) zone.textContent = dropped.name;
  });
  file.addEventListener("change", () => { dropped = null; });
  const send = h("button", { id: "upload-submit", type: "submit" }, T.modules.send);
  const form = h("form", { id: "upload-form", class: "upload" },
    zone, file, field(T.modules.name, name), field(T.modules.labels, labels), send, progress, result);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const chosen = dropped || file.files[0];
    if (!chosen) return;
    const data = new FormData();
    data.append("module", chosen);
    if (name.value.trim()) data.append("name", name.value.trim());
    if (labels.value.trim()) data.append("labels", labels.value.trim());
    const request = new XMLHttpRequest();
    request.open("POST", "/api/v1/modules");
    request.setRequestHeader("x-csrf-token", session.csrf_token || "");
    request.upload.addEventListener("progress", (e) => {
      if (e.lengthComputable) progress.value = e.loaded / e.total;
    });
    request.addEventListener("load", () => {
      let body = null;
      try { body = JSON.parse(request.responseText); } catch { body = null; }
      if (request.status === 201) {
        progress.value = 1;
        result.textContent = body.name
          ? T.modules.uploaded(body.name, body.version, body.jobs_moved || 0)
          : T.modules.uploadedDigest(body.digest);
        result.className = "ok";
        if (body.name) {
          result.append(" ", link(`#/modules/${encodeURIComponent(body.name)}`, T.modules.seeVersions));
        }
      } else {
        result.textContent = T.common.failed(body && body.message ? body.message : request.status);
        result.className = "error";
      }
    });
    send.disabled = true;
    request.addEventListener("loadend", () => { send.disabled = false; });
    request.send(data);
  });
  return section(T.modules.upload, form);
}

export async function modulesPage() {
  const modules = await get("/api/v1/modules");
  const rows = modules.map((m) => h("tr", { "data-module": m.name },
    h("td", {}, link(`#/modules/${encodeURIComponent(m.name)}`, m.name)),
    h("td", {}, m.tenant),
    h("td", {}, m.version),
    h("td", {}, shortDigest(m.digest)),
    h("td", {}, m.labels.join(", ")),
    h("td", {}, m.pushed_by || "—"),
    h("td", {}, formatTime(m.created_at_ms))));
  return h("div", { id: "modules" }, h("h1", {}, T.modules.title),
    canWrite() ? uploadForm() : null,
    table(T.modules.columns, rows, T.modules.empty));
}

/** Puts a label on one version of a module (taking it off another). */
export function labelForm(name, version) {
  const label = h("input", { name: "label", placeholder: T.modules.label, size: 10 });
  const form = h("form", { class: "inline label-form", "data-version": version }, label,
    h("button", { type: "submit" }, T.modules.setLabel));
  form.addEventListener("submit", action(async () => {
    await call("PUT", `/api/v1/modules/${encodeURIComponent(name)}/labels/${encodeURIComponent(label.value)}`,
      { version });
    flash(T.modules.labelled(label.value, version));
    refresh();
  }));
  return form;
}

export async function modulePage(name) {
  const [versions, jobs] = await Promise.all([
    get(`/api/v1/modules/${encodeURIComponent(name)}/versions`),
    get(`/api/v1/jobs${query({ module: name, limit: 100 })}`),
  ]);
  const rows = versions.map((v) => h("tr", { "data-version": v.version },
    h("td", {}, v.version),
    h("td", { title: v.digest }, shortDigest(v.digest)),
    h("td", {}, v.labels.join(", ")),
    h("td", {}, v.note),
    h("td", { class: "pushed-by" }, v.pushed_by || "—"),
    h("td", {}, formatTime(v.created_at_ms)),
    h("td", {}, canWrite() ? labelForm(name, v.version) : null, canWrite() ? h("button", {
      class: "rollback", "data-version": v.version,
      on: { click: action(async () => {
        const answer = await call("POST", `/api/v1/modules/${encodeURIComponent(name)}/rollback`,
          { version: v.version });
        flash(T.modules.rolledBack(answer.version.version, answer.jobs_moved));
        refresh();
      }) },
    }, T.modules.rollback) : null)));
  const jobRows = jobs.map((job) => h("tr", {},
    h("td", {}, link(`#/jobs/${job.id}`, job.id)),
    h("td", {}, job.name),
    h("td", {}, job.module_version ? T.modules.pins(job.module_version) : T.modules.follows)));
  return h("div", { id: "module" },
    h("h1", {}, T.modules.versions(name)),
    table(T.modules.versionColumns, rows),
    section(T.modules.jobs, table(["Id", "Name", ""], jobRows)));
}

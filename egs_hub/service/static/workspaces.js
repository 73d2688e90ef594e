// Workspaces: ask a project's admins for a workspace (POST /workspace-requests), and the requests
// the caller may see: their own, and those of the projects they manage, which they approve or deny.
"use strict";

import { act, api, el, live, localTime, page, patch } from "./api.js";

const form = document.getElementById("ask-form");
const list = (text) => text.split(",").map((v) => v.trim()).filter(Boolean);

form.addEventListener("submit", (e) => {
  e.preventDefault();
  const f = form.elements;
  const body = { project: f.project.value.trim(), name: f.name.value.trim(), display_name: f.display_name.value.trim(),
    purpose: f.purpose.value.trim(), members: list(f.members.value), clusters: list(f.clusters.value), quota: {} };
  if (f.max_gpus.value) body.quota.max_gpus = Number(f.max_gpus.value);
  act("Workspace asked for", async () => {
    const asked = await api("POST", "workspace-requests", body);
    form.reset();
    return `Workspace request ${asked.id} for ${asked.name} is pending: the admins of project ${asked.project} decide`;
  });
});

function decide(request, decision) {
  const reason = decision === "deny" ? prompt(`Why deny workspace ${request.name} to ${request.requested_by}?`) : "";
  if (reason === null) return;
  act(`Workspace request ${request.id} ${decision === "approve" ? "approved" : "denied"}`,
    () => api("POST", `workspace-requests/${request.id}/${decision}`, { reason }));
}

function actions(request, managed) {
  if (request.status !== "pending" || request.requested_by === page.user || !managed.has(request.project)) return [];
  return [
    el("button", { type: "button", "aria-label": `Approve workspace request ${request.id}`,
      onclick: () => decide(request, "approve") }, "Approve"),
    el("button", { type: "button", "aria-label": `Deny workspace request ${request.id}`,
      onclick: () => decide(request, "deny") }, "Deny"),
  ];
}

live(
  () => Promise.all([api("GET", "workspace-requests"), api("GET", "projects")]),
  ([requests, projects]) => {
    const managed = new Set(projects.projects.map((p) => p.name));
    const rows = requests.workspace_requests;
    patch(document.querySelector("#workspace-requests tbody"), rows.map((r) => el("tr", { "data-request": r.id },
      el("td", {}, r.id), el("th", { scope: "row" }, r.display_name ? `${r.display_name} (${r.name})` : r.name),
      el("td", {}, r.project), el("td", {}, r.requested_by), el("td", {}, r.purpose),
      el("td", {}, r.quota.max_gpus ?? "no limit"), el("td", {}, r.status),
      el("td", {}, r.decided_by ? `${r.decided_by}, ${localTime(r.decided_at)}${r.reason ? `: ${r.reason}` : ""}` : ""),
      el("td", { class: "actions" }, actions(r, managed)))));
    document.getElementById("requests-note").textContent = rows.length ? "" : "No workspace request yet.";
  },
);

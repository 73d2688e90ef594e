// GPRs as every page shows them, and the actions on one (through the REST API); check runs as the
// GPR view and the Nodes page show them (a status chip whose tooltip tells the rest).
"use strict";

import { act, api, el, localTime, refresh, span } from "./api.js";

export const FINISHED = ["complete", "cancelled", "rejected", "failed"];
export const STATUSES = ["pending-approval", "queued", "provisioning", "provisioned", "releasing", "complete",
  "rejected", "cancelled", "failed"];

export function asked(gpr) {
  const what = gpr.gpus !== null ? `${gpr.gpus} GPU${gpr.gpus === 1 ? "" : "s"}` : `${gpr.nodes} node(s)`;
  return `${what} · ${span(gpr.duration)}${gpr.shape ? " · " + gpr.shape : ""} · p${gpr.priority}`;
}

export function when(gpr) {
  if (gpr.status === "queued") {
    return gpr.estimated_start
      ? `#${gpr.queue_position} · starts ~${localTime(gpr.estimated_start)}`
      : `#${gpr.queue_position} · cannot be placed now`;
  }
  if (gpr.status === "provisioning" || gpr.status === "provisioned") {
    const left = (new Date(gpr.window_end) - Date.now()) / 1000;
    const last = gpr.replaced.at(-1);
    const moved = last ? ` · node ${last.failed_node} replaced by ${last.node} at ${localTime(last.at)}: restart from your checkpoint` : "";
    return `${localTime(gpr.window_start)} → ${localTime(gpr.window_end)} (${span(left)} left)${moved}`;
  }
  if (gpr.status === "pending-approval") return gpr.status_reason;
  return gpr.ended_at ? `ended ${localTime(gpr.ended_at)}${gpr.end_reason ? " · " + gpr.end_reason : ""}` : "";
}

export const release = (id, reason) => api("POST", `gprs/${id}/release`, { reason });
export const cancel = (id) => api("DELETE", `gprs/${id}`);
export const approve = (id, reason = "") => api("POST", `gprs/${id}/approve`, { reason });
export const deny = (id, reason) => api("POST", `gprs/${id}/deny`, { reason });
export const setPriority = (id, priority) => api("PATCH", `gprs/${id}`, { priority });

// The controls of a GPR's row: Release or Cancel for members; Approve and Deny for admins
// (`admin`), asking `denyReason()` for the reason (null: not denied after all); then the GPR's
// checklist, once it has one (gprChecklist).
export function gprButtons(gpr, { admin = false, denyReason, from = "the portal" } = {}) {
  const buttons = [];
  if (["provisioning", "provisioned"].includes(gpr.status)) {
    buttons.push(el("button", { type: "button", "aria-label": `Release GPR ${gpr.id}`,
      onclick: () => act(`GPR ${gpr.id} released`, () => release(gpr.id, `released from ${from}`)) }, "Release"));
  }
  if (["pending-approval", "queued"].includes(gpr.status)) {
    buttons.push(el("button", { type: "button", "aria-label": `Cancel GPR ${gpr.id}`,
      onclick: () => act(`GPR ${gpr.id} cancelled`, () => cancel(gpr.id)) }, "Cancel"));
  }
  if (admin && gpr.status === "pending-approval") {
    buttons.push(el("button", { type: "button", class: "primary", "aria-label": `Approve GPR ${gpr.id}`,
      onclick: () => act(`GPR ${gpr.id} approved`, () => approve(gpr.id)) }, "Approve"));
    buttons.push(el("button", { type: "button", "aria-label": `Deny GPR ${gpr.id}`, onclick: () => {
      const reason = denyReason();
      if (reason !== null) act(`GPR ${gpr.id} denied`, () => deny(gpr.id, reason));
    } }, "Deny"));
  }
  const checklist = gprChecklist(gpr);
  if (checklist) buttons.push(checklist);
  return buttons;
}

// Check runs (a GPR's checklist, a node's last checks).
export const CHECK_ACTIVE = ["pending", "running"];

export function checkDuration(run) {
  if (run.duration === null) return CHECK_ACTIVE.includes(run.status) ? `${run.status}…` : "";
  return run.duration < 60 ? `${run.duration.toFixed(2)} s` : span(run.duration);
}

export const checkValues = (run) => Object.entries(run.values).map(([name, value]) => `${name}=${value}`).join(", ");

// What a chip's tooltip says: the check, where and when it ran, how long, what it measured, its log.
export function checkTooltip(run) {
  return [
    `${run.name} (${run.kind}) at ${run.phase} on ${run.node}: ${run.status}`,
    run.gpr === null ? "asked for by an admin" : `for GPR ${run.gpr}`,
    run.started_at ? `started ${localTime(run.started_at)}` : "not started yet",
    run.duration === null ? "" : `took ${checkDuration(run)}`,
    `values: ${checkValues(run) || "none"}`,
    `log: ${run.log || "none"}`,
  ].filter(Boolean).join("\n");
}

export function checkChip(run, text = run.status) {
  return el("span", { class: `chip check-${run.status}`, title: checkTooltip(run), tabindex: 0,
    "data-check": `${run.name}/${run.phase}`, "data-status": run.status }, text);
}

// A GPR's checklist (GET /gprs/{id}/checks): asked for GPRs that hold or held nodes (finished ones
// for a day), again when the GPR's status changes, and every CHECK_FOLLOW_MS while a check is pending
// or running; the page is redrawn when the answer changes. Each check with its node, phase, status,
// duration and values, its log collapsed.
const CHECKED = ["provisioning", "provisioned", "releasing", "complete", "failed"];
const CHECK_FOLLOW_MS = 1000;
const checklists = new Map(); // GPR id -> { status: the GPR's when asked, checks or error }
const asking = new Set(); // GPR ids asked for now
const openLogs = new Set(); // check run ids whose log is shown

function askChecklist(id, status) {
  if (asking.has(id)) return;
  asking.add(id);
  api("GET", `gprs/${id}/checks`)
    .then((answer) => ({ checks: answer.checks }), (e) => ({ error: e.message }))
    .then((found) => {
      asking.delete(id);
      const before = checklists.get(id);
      checklists.set(id, { status, ...found });
      if (JSON.stringify(before && (before.checks || before.error)) !== JSON.stringify(found.checks || found.error)) {
        refresh();
      }
      if (found.checks && found.checks.some((c) => CHECK_ACTIVE.includes(c.status))) {
        setTimeout(() => askChecklist(id, status), CHECK_FOLLOW_MS);
      }
    });
}

function logOf(run) {
  return el("details", { class: "log", open: openLogs.has(run.id) ? "" : null,
    ontoggle: (e) => (e.target.open ? openLogs.add(run.id) : openLogs.delete(run.id)) },
  el("summary", { "aria-label": `Log of ${run.name} at ${run.phase} on ${run.node}` }, "log"), el("pre", {}, run.log));
}

export function gprChecklist(gpr) {
  if (!CHECKED.includes(gpr.status)) return null;
  const ended = gpr.ended_at || (["complete", "failed"].includes(gpr.status) ? gpr.updated_at : null);
  if (ended && Date.now() - new Date(ended) > 86400e3) return null;
  const known = checklists.get(gpr.id);
  if (!known || known.status !== gpr.status) askChecklist(gpr.id, gpr.status);
  if (!known) return null;
  if (known.error) {
    return el("div", { class: "gpr-checklist", "data-checklist": gpr.id }, el("span", { class: "error" }, `Checks: ${known.error}`));
  }
  if (!known.checks.length) return null;
  return el("div", { class: "gpr-checklist", "data-checklist": gpr.id },
    el("span", { class: "muted" }, "Checks"),
    el("ul", { class: "plain checks", "aria-label": `Checks of GPR ${gpr.id}` }, known.checks.map((run) => {
      const facts = [run.node, `${run.name} at ${run.phase}`, checkDuration(run), checkValues(run)].filter(Boolean);
      return el("li", { "data-check-run": run.id }, checkChip(run), " ", facts.join(" · "), run.log ? logOf(run) : null);
    })));
}

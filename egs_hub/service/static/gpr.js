// GPRs as every page shows them, and the actions on one (through the REST API).
"use strict";

import { act, api, el, localTime, span } from "./api.js";

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
    return `${localTime(gpr.window_start)} → ${localTime(gpr.window_end)} (${span(left)} left)`;
  }
  if (gpr.status === "pending-approval") return gpr.status_reason;
  return gpr.ended_at ? `ended ${localTime(gpr.ended_at)}${gpr.end_reason ? " · " + gpr.end_reason : ""}` : "";
}

export const release = (id, reason) => api("POST", `gprs/${id}/release`, { reason });
export const cancel = (id) => api("DELETE", `gprs/${id}`);
export const approve = (id, reason = "") => api("POST", `gprs/${id}/approve`, { reason });
export const deny = (id, reason) => api("POST", `gprs/${id}/deny`, { reason });
export const setPriority = (id, priority) => api("PATCH", `gprs/${id}`, { priority });

// The buttons of a GPR's row: Release or Cancel for members; Approve and Deny for admins
// (`admin`), asking `denyReason()` for the reason (null: not denied after all).
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
  return buttons;
}

// GPU requests: every GPR the caller may see, filtered; details and events per row; admin
// actions on admin pages (priority, queue moves, approve/deny with a reason, evictions).
"use strict";

import { act, adminView, api, apiAll, el, live, localTime, notify, patch, span } from "./api.js";
import { FINISHED, approve, asked, deny, gprButtons, setPriority, when } from "./gpr.js";
import { priorityToFallBehind, priorityToPass } from "./queue-moves.js";
import { renderRequestChoices, setUpRequestForm } from "./request-form.js";

const SHOWN_MAX = 200;
const filters = document.getElementById("filters");
const open = new Set(); // GPR ids whose details are shown
let last = null; // the latest loaded data, redrawn when a filter changes

const params = new URLSearchParams(location.search);
for (const name of ["q", "slice", "status", "shape", "band"]) {
  if (params.has(name)) filters.elements[name].value = params.get(name);
}
// The slice and shape selects get their choices with the first answer; the URL's picks are applied then.
const pendingPicks = { slice: params.get("slice") || "", shape: params.get("shape") || "" };
if (params.has("gpr")) {
  open.add(Number(params.get("gpr")));
  filters.elements.q.value = params.get("gpr");
}

async function load() {
  const [gprs, slices, inventory, queue, evictions, templates] = await Promise.all([
    apiAll("gprs", "gprs"), api("GET", "slices"), api("GET", "inventory"), apiAll("queue", "queue"),
    adminView ? api("GET", "queue/evictions") : null, api("GET", "templates"),
  ]);
  const events = new Map(await Promise.all([...open].map(async (id) =>
    [id, (await apiAll(`events?gpr=${id}`, "events", { backwards: true }).catch(() => ({ events: [] }))).events])));
  return { gprs: gprs.gprs, slices: slices.slices, inventory, queue: queue.queue, evictions, events,
    templates: templates.templates, projectOf: new Map(slices.slices.map((s) => [s.name, s.project])) };
}

function matches(g, f) {
  const q = f.q.value.trim().toLowerCase();
  if (q && ![g.id, g.name, g.slice, g.requested_by, g.shape, g.status].some((v) => v && String(v).toLowerCase().includes(q))) {
    return false;
  }
  if (f.slice.value && g.slice !== f.slice.value) return false;
  if (f.project.value && last.projectOf.get(g.slice) !== f.project.value) return false;
  if (f.status.value === "active" ? FINISHED.includes(g.status) : f.status.value && g.status !== f.status.value) return false;
  if (f.shape.value && !(g.shape && f.shape.value.startsWith(g.shape))) return false;
  if (f.band.value && Math.floor((g.priority - 1) / 100) !== Number(f.band.value)) return false;
  return true;
}

function priorityControls(g, queue) {
  if (FINISHED.includes(g.status)) return [];
  const input = el("input", { type: "number", min: 1, max: 300, value: g.priority, class: "priority",
    "aria-label": `Priority of GPR ${g.id}` });
  const controls = [input, el("button", { type: "button", "aria-label": `Set priority of GPR ${g.id}`, "data-priority": g.priority, onclick: () =>
    act(`GPR ${g.id} now has priority ${input.value}`, () => setPriority(g.id, Number(input.value))) }, "Set")];
  const at = queue.findIndex((q) => q.id === g.id);
  if (at >= 0) {
    const entry = queue[at];
    const up = at > 0 ? priorityToPass(entry, queue[at - 1]) : null;
    const down = at < queue.length - 1 ? priorityToFallBehind(entry, queue[at + 1]) : null;
    controls.push(el("button", { type: "button", disabled: up === null, "data-priority": up, "aria-label": `Move GPR ${g.id} up the queue`,
      onclick: () => act(`GPR ${g.id} moved up (priority ${up})`, () => setPriority(g.id, up)) }, "Move up"));
    controls.push(el("button", { type: "button", disabled: down === null, "data-priority": down, "aria-label": `Move GPR ${g.id} down the queue`,
      onclick: () => act(`GPR ${g.id} moved down (priority ${down})`, () => setPriority(g.id, down)) }, "Move down"));
  }
  return controls;
}

function decisionControls(g) {
  if (g.status !== "pending-approval") return [];
  const reason = el("input", { name: "reason", "aria-label": `Reason for GPR ${g.id}`, placeholder: "reason",
    autocomplete: "off" });
  return [reason,
    el("button", { type: "button", class: "primary", "aria-label": `Approve GPR ${g.id}`,
      onclick: () => act(`GPR ${g.id} approved`, () => approve(g.id, reason.value.trim())) }, "Approve"),
    el("button", { type: "button", "aria-label": `Deny GPR ${g.id}`, onclick: () => {
      if (!reason.value.trim()) {
        reason.focus();
        notify(`Say why GPR ${g.id} is denied in its reason field.`, true);
        return;
      }
      act(`GPR ${g.id} denied`, () => deny(g.id, reason.value.trim()));
    } }, "Deny")];
}

function actions(g, queue) {
  const own = gprButtons(g, { from: "the GPU requests page" }); // Release / Cancel
  if (!adminView) return own;
  return [...priorityControls(g, queue), ...decisionControls(g), ...own];
}

const DETAIL_FIELDS = [
  ["Name", (g) => g.name], ["Cluster", (g) => g.cluster || "any"], ["Shape", (g) => g.shape || "any"],
  ["Priority", (g) => g.priority], ["Duration", (g) => span(g.duration)],
  ["Start after", (g) => localTime(g.start_after)], ["Idle timeout", (g) => (g.idle_timeout ? span(g.idle_timeout) : "")],
  ["Preemptible", (g) => (g.preemptible ? "yes" : "no")], ["Status reason", (g) => g.status_reason],
  ["Estimated start", (g) => localTime(g.estimated_start)], ["Planned nodes", (g) => g.planned_nodes.join(" ")],
  ["Window", (g) => (g.window_start ? `${localTime(g.window_start)} → ${localTime(g.window_end)}` : "")],
  ["Bound nodes", (g) => g.bound_nodes.join(" ")], ["End reason", (g) => g.end_reason],
  ["Avoided nodes", (g) => g.avoid_nodes.map((n) => `${n.cluster}/${n.node}`).join(" ")],
  ["Replaced nodes", (g) => g.replaced.map((r) => `${r.failed_node} → ${r.node} at ${localTime(r.at)}`).join("; ")],
  ["Submitted", (g) => localTime(g.created_at)], ["Updated", (g) => localTime(g.updated_at)],
];

function details(g, events) {
  const fields = DETAIL_FIELDS.map(([name, value]) => [name, value(g)]).filter(([, v]) => v !== null && v !== "" && v !== undefined);
  return el("tr", { class: "details", id: `details-${g.id}` }, el("td", { colspan: 8 },
    el("dl", { class: "fields" }, fields.flatMap(([name, value]) => [el("dt", {}, name), el("dd", {}, value)])),
    el("table", { class: "events" }, el("caption", {}, `Events of GPR ${g.id}`),
      el("thead", {}, el("tr", {}, ["Time", "Event", "By", "Status", "Reason"].map((h) => el("th", {}, h)))),
      el("tbody", {}, (events || []).map((e) => el("tr", {}, el("td", {}, localTime(e.time)), el("td", {}, e.kind),
        el("td", {}, e.actor), el("td", {}, e.to_status ? `${e.from_status || ""} → ${e.to_status}` : ""),
        el("td", {}, e.reason)))))));
}

function toggle(id) {
  if (open.has(id)) open.delete(id);
  else open.add(id);
  act("", async () => {});
}

function drawRequests() {
  const f = filters.elements;
  const shown = last.gprs.filter((g) => matches(g, f)).sort((a, b) => b.id - a.id);
  const rows = [];
  for (const g of shown.slice(0, SHOWN_MAX)) {
    const expanded = open.has(g.id);
    rows.push(el("tr", { "data-gpr": g.id },
      el("td", {}, el("button", { type: "button", class: "link", "aria-expanded": String(expanded),
        "aria-controls": `details-${g.id}`, "aria-label": `Details of GPR ${g.id}`, onclick: () => toggle(g.id) }, g.id)),
      el("td", {}, g.slice), el("td", {}, g.requested_by), el("td", {}, asked(g)),
      el("td", { class: `status-${g.status}` }, g.status), el("td", {}, when(g)),
      el("td", {}, g.bound_gpus.length ? el("code", {}, g.bound_gpus.join(" ")) : ""),
      el("td", { class: "actions" }, actions(g, last.queue))));
    if (expanded) rows.push(details(g, last.events.get(g.id)));
  }
  patch(document.querySelector("#requests tbody"),
    rows.length ? rows : [el("tr", {}, el("td", { colspan: 8, class: "muted" }, "No GPU requests match."))]);
  document.getElementById("shown").textContent = shown.length > SHOWN_MAX
    ? `Showing the newest ${SHOWN_MAX} of ${shown.length} matching GPU requests; narrow the filters to see others.`
    : `${shown.length} of ${last.gprs.length} GPU requests match.`;
}

function drawFilterChoices() {
  const f = filters.elements;
  patch(f.slice, [el("option", { value: "" }, "any"), ...last.slices.map((s) => el("option", { value: s.name }, s.name))]);
  const projects = [...new Set(last.slices.map((s) => s.project))].sort();
  patch(f.project, [el("option", { value: "" }, "any"), ...projects.map((p) => el("option", { value: p }, p))]);
  patch(f.shape, [el("option", { value: "" }, "any"),
    ...[...new Set(last.inventory.shapes.map((s) => s.name))].map((name) => el("option", { value: name }, name))]);
  for (const name of ["slice", "shape"]) {
    if (pendingPicks[name]) f[name].value = pendingPicks[name];
    pendingPicks[name] = "";
  }
}

function drawEvictions(evictions, gprs) {
  const box = document.getElementById("evictions");
  const byId = new Map(gprs.map((g) => [g.id, g]));
  patch(box, evictions.length ? evictions.map((e) => {
    const gpr = byId.get(e.gpr_id);
    const victims = e.victims.map((v) => v.id);
    return el("div", { class: "card", "data-eviction": e.gpr_id },
      el("h3", {}, `GPR ${e.gpr_id}${gpr ? ` (${gpr.slice}, ${asked(gpr)})` : ""} could start now by evicting:`),
      el("table", {}, el("thead", {}, el("tr", {}, ["GPR", "Workspace", "Priority", "GPUs", "Window ends"].map((h) => el("th", {}, h)))),
        el("tbody", {}, e.victims.map((v) => el("tr", { "data-victim": v.id }, el("td", {}, v.id), el("td", {}, v.slice),
          el("td", {}, v.priority), el("td", {}, v.gpus), el("td", {}, localTime(v.window_end)))))),
      e.automatic ? el("p", { class: "muted" }, "Its workspace evicts automatically; the planner acts on its own.")
        : el("button", { type: "button", class: "primary", "data-gpr": e.gpr_id, "data-victims": victims.join(" "), onclick: () =>
          act(`Evicted GPR ${victims.join(", ")} for GPR ${e.gpr_id}`,
            () => api("POST", "queue/evictions", { gpr_id: e.gpr_id, victims })) },
        `Evict ${victims.length} GPR${victims.length === 1 ? "" : "s"} for GPR ${e.gpr_id}`));
  }) : [el("p", { class: "muted" }, "No eviction proposed: every queued GPR that cannot start now waits for queued work, not for preemptible GPRs.")]);
}

filters.addEventListener("input", () => last && drawRequests());
filters.addEventListener("submit", (e) => e.preventDefault());
setUpRequestForm();
live(load, (data) => {
  last = data;
  drawFilterChoices();
  drawRequests();
  renderRequestChoices(data.slices, data.inventory, data.templates);
  if (adminView) drawEvictions(data.evictions.evictions, data.gprs);
});

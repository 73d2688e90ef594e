// The audit log: GET /events by workspace and GPR (server side), by project, actor and kind (here,
// on the events loaded: GET /events has no project parameter; a project hides events without a slice).
"use strict";

import { adminView, api, apiAll, el, live, localTime, page, patch, query } from "./api.js";

// Pages of the audit log (GET /events goes back in time a page at a time): the newest LIMIT at
// first, LIMIT more each time "Show older events" is pressed, until its next_cursor is null.
const LIMIT = 1000;
let pages = 1;
const older = document.getElementById("older");
const f = document.getElementById("event-filters").elements;
const params = new URLSearchParams(location.search);
for (const name of ["gpr", "actor"]) if (params.has(name)) f[name].value = params.get(name);
// Choices of the selects come with the first answer; the URL's picks are applied then.
const initial = { slice: params.get("slice") || "", kind: params.get("kind") || "" };
let last = null;

async function load() {
  const [slices, events] = await Promise.all([
    api("GET", "slices"),
    apiAll(`events${query({ slice: f.slice.value || initial.slice, gpr: f.gpr.value })}`, "events",
      { pages, backwards: true, limit: LIMIT }),
  ]);
  return { slices: slices.slices, events: events.events, more: events.next_cursor !== null,
    projectOf: new Map(slices.slices.map((s) => [s.name, s.project])) };
}

function draw() {
  const { slices, events, more, projectOf } = last;
  const wantedSlice = f.slice.value || initial.slice;
  patch(f.slice, [el("option", { value: "" }, "any"), ...slices.map((s) => el("option", { value: s.name }, s.name))]);
  f.slice.value = wantedSlice;
  const projects = [...new Set(slices.map((s) => s.project))].sort();
  patch(f.project, [el("option", { value: "" }, "any"), ...projects.map((p) => el("option", { value: p }, p))]);
  const kinds = [...new Set(events.map((e) => e.kind))].sort();
  const wantedKind = f.kind.value || initial.kind;
  patch(f.kind, [el("option", { value: "" }, "any"), ...kinds.map((k) => el("option", { value: k }, k))]);
  f.kind.value = wantedKind;
  initial.slice = initial.kind = "";
  const actor = f.actor.value.trim().toLowerCase();
  const project = f.project.value;
  const shown = events.filter((e) => (!wantedKind || e.kind === wantedKind) && (!actor || e.actor.toLowerCase().includes(actor))
    && (!project || (e.slice && projectOf.get(e.slice) === project))).reverse();
  const requests = page.base + (adminView ? "admin/requests" : "requests");
  patch(document.querySelector("#events tbody"), shown.length ? shown.map((e) => el("tr", { "data-event": e.id },
    el("td", {}, localTime(e.time)), el("td", {}, e.kind), el("td", {}, e.actor), el("td", {}, e.slice || ""),
    el("td", {}, e.gpr ? el("a", { href: `${requests}?gpr=${e.gpr}` }, e.gpr) : ""),
    el("td", {}, e.to_status ? `${e.from_status || ""} → ${e.to_status}` : ""), el("td", {}, e.reason)))
    : [el("tr", {}, el("td", { colspan: 7, class: "muted" }, "No events match."))]);
  document.getElementById("shown").textContent =
    `${shown.length} of ${more ? `the latest ${events.length}` : `all ${events.length}`} events.`;
  older.hidden = !more;
}

const refreshNow = live(load, (data) => { last = data; draw(); });
const refilter = () => { pages = 1; refreshNow(); };
f.slice.addEventListener("change", refilter);
f.gpr.addEventListener("change", refilter);
older.addEventListener("click", () => { pages += 1; refreshNow(); });
f.actor.addEventListener("input", () => last && draw());
f.kind.addEventListener("change", () => last && draw());
f.project.addEventListener("change", () => last && draw());
document.getElementById("event-filters").addEventListener("submit", (e) => { e.preventDefault(); refilter(); });

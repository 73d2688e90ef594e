// The inventory schedule as a Gantt chart: one row per node, one bar per GPR window, coloured
// by slice. Rows come a page at a time (PAGE_SIZE nodes), so 500 nodes stay readable and light.
// The project filter keeps the bars of its slices' GPRs; every node's row stays.
// A node (machine) whose GPUs are split is planned as several planning nodes, <node>:<profile> or
// <node>:shared (MIG instances, time-sliced shares); it shows as a heading with one row per GPU of
// each, whose bars are the windows on that GPU's units, and a row for windows whose GPU is not known.
"use strict";

import { api, el, live, localTime, page, patch, query } from "./api.js";

const PAGE_SIZE = 50;
const COLOURS = 10; // .slice-c0 ... .slice-c9 in portal.css
const TICKS = 6;
const form = document.getElementById("range");
let first = 0; // index of the first node (machine) shown
let last = null;

function localInput(date) {
  const pad = (n) => String(n).padStart(2, "0");
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}T${pad(date.getHours())}:${pad(date.getMinutes())}`;
}

const now = Date.now();
form.elements.from.value = localInput(new Date(now - 12 * 3600e3));
form.elements.to.value = localInput(new Date(now + 36 * 3600e3));

export function colourOf(slice) {
  let hash = 0;
  for (const c of slice) hash = (hash * 31 + c.charCodeAt(0)) >>> 0;
  return `slice-c${hash % COLOURS}`;
}

// Lanes: windows that overlap in time on one node go on separate lanes (first fit by start).
function lanes(windows) {
  const ends = [];
  return windows.slice().sort((a, b) => a.start.localeCompare(b.start) || a.gpr - b.gpr).map((w) => {
    let lane = ends.findIndex((end) => end <= w.start);
    if (lane < 0) lane = ends.length;
    ends[lane] = w.end;
    return [w, lane];
  });
}

async function load() {
  const from = new Date(form.elements.from.value), to = new Date(form.elements.to.value);
  const [schedule, slices] = await Promise.all([
    api("GET", `inventory/schedule${query({ start: from.toISOString(), end: to.toISOString() })}`), api("GET", "slices"),
  ]);
  return { schedule, from: from.getTime(), to: to.getTime(), slices: slices.slices,
    projectOf: new Map(slices.slices.map((s) => [s.name, s.project])) };
}

function bar(w, lane, from, to) {
  const start = Math.max(new Date(w.start).getTime(), from), end = Math.min(new Date(w.end).getTime(), to);
  const label = `GPR ${w.gpr}, ${w.slice}, ${w.gpu_count} GPU${w.gpu_count === 1 ? "" : "s"}, ${w.state}: ` +
    `${localTime(w.start)} → ${localTime(w.end)}`;
  return el("a", { class: `window ${w.state} ${colourOf(w.slice)}`, href: `${page.base}admin/requests?gpr=${w.gpr}`,
    "data-gpr": w.gpr, "aria-label": label, title: label,
    style: { left: `${(100 * (start - from)) / (to - from)}%`, width: `${Math.max(0.3, (100 * (end - start)) / (to - from))}%`,
      top: `${lane * 1.5}em` } }, `${w.gpr}`);
}

// A node's maintenance: its own bar behind the windows, the whole height of the row.
function maintenanceBar(m, node, from, to) {
  const start = Math.max(new Date(m.start).getTime(), from), end = Math.min(new Date(m.end).getTime(), to);
  const label = `Maintenance of ${node}: ${localTime(m.start)} → ${localTime(m.end)}${m.reason ? `, ${m.reason}` : ""}`;
  return el("span", { class: "maintenance", role: "img", "aria-label": label, title: label,
    style: { left: `${(100 * (start - from)) / (to - from)}%`, width: `${Math.max(0.3, (100 * (end - start)) / (to - from))}%` } },
  "maintenance");
}

// The machines of the schedule's planning nodes, in their order: { machine, cluster, nodes }.
function machinesOf(nodes) {
  const machines = new Map();
  for (const n of nodes) {
    const key = `${n.cluster}/${n.machine}`;
    if (!machines.has(key)) machines.set(key, { machine: n.machine, cluster: n.cluster, nodes: [] });
    machines.get(key).nodes.push(n);
  }
  return [...machines.values()];
}

const unitsText = (count, profile) => (profile === "shared"
  ? `${count} share${count === 1 ? "" : "s"}` : `${count} x ${profile}`);

// The rows of a split machine's planning node: { gpu, label, windows }, one per GPU with the windows on
// its units, then one (gpu null) for the windows on no GPU listed: planned ones whose units are not
// chosen yet, or units whose GPU the cluster does not name.
function gpuRows(n, windows) {
  if (n.profile === null) return [{ gpu: null, label: "whole GPUs", windows }];
  const known = n.gpus.filter((g) => g.gpu !== null);
  const rows = known.map((g) => ({ gpu: g.gpu, label: `GPU ${g.index} · ${unitsText(g.instances.length, n.profile)}`,
    windows: windows.filter((w) => w.on_gpus.includes(g.gpu)) }));
  const listed = new Set(known.map((g) => g.gpu));
  const unknown = n.gpus.find((g) => g.gpu === null);
  const elsewhere = windows.filter((w) => !w.on_gpus.some((gpu) => listed.has(gpu)));
  if (unknown || elsewhere.length) {
    rows.push({ gpu: null, windows: elsewhere,
      label: unknown ? `GPU not known · ${unitsText(unknown.instances.length, n.profile)}` : "GPU not chosen yet" });
  }
  return rows;
}

function drawProjects() {
  const projects = [...new Set(last.slices.map((s) => s.project))].sort();
  patch(form.elements.project, [el("option", { value: "" }, "any"), ...projects.map((p) => el("option", { value: p }, p))]);
}

function draw() {
  const { schedule, from, to, projectOf } = last;
  const wanted = form.elements.node.value.trim().toLowerCase();
  const project = form.elements.project.value;
  const windowsOf = (n) => n.windows.filter((w) => !project || projectOf.get(w.slice) === project);
  const machines = machinesOf(schedule.nodes).filter((m) => !wanted || m.machine.toLowerCase().includes(wanted));
  if (first >= machines.length) first = Math.max(0, machines.length - PAGE_SIZE);
  const shown = machines.slice(first, first + PAGE_SIZE);
  document.getElementById("page-of").textContent = machines.length
    ? `Nodes ${first + 1}-${first + shown.length} of ${machines.length}` : "No node matches.";
  document.getElementById("previous").disabled = first === 0;
  document.getElementById("next").disabled = first + PAGE_SIZE >= machines.length;

  const ticks = Array.from({ length: TICKS + 1 }, (_, i) => from + ((to - from) * i) / TICKS);
  patch(document.querySelector(".gantt-axis"), [
    ...ticks.map((t, i) => el("span", { class: "tick", style: { left: `${(100 * i) / TICKS}%` } },
      new Date(t).toLocaleString(undefined, { dateStyle: "short", timeStyle: "short" }))),
  ]);
  const nowAt = Date.now();
  const nowLine = () => (nowAt > from && nowAt < to
    ? el("span", { class: "now", "aria-hidden": "true", style: { left: `${(100 * (nowAt - from)) / (to - from)}%` } }) : null);
  // A row: its name, then its windows on lanes over the node's maintenance.
  const row = (attrs, name, n, windows) => {
    const placed = lanes(windows);
    const height = Math.max(1, ...placed.map(([, lane]) => lane + 1));
    return el("li", attrs, name,
      el("div", { class: "lane-box", style: { height: `${height * 1.5}em` } }, nowLine(),
        (n.maintenance || []).map((m) => maintenanceBar(m, n.node, from, to)),
        placed.map(([w, lane]) => bar(w, lane, from, to))));
  };
  const heading = (name, cluster, className = "node-name") => el("span", { class: className }, name,
    el("span", { class: "muted" }, ` ${cluster}`));
  patch(document.querySelector(".gantt-rows"), shown.map((m) => {
    const [only] = m.nodes;
    if (m.nodes.length === 1 && only.profile === null) {
      return row({ "data-node": only.node }, heading(only.node, only.cluster), only, windowsOf(only));
    }
    return el("li", { class: "machine", "data-machine": m.machine },
      heading(m.machine, m.cluster, "node-name machine-name"),
      el("ol", { class: "gpu-rows" }, m.nodes.flatMap((n) => gpuRows(n, windowsOf(n)).map((r) =>
        row({ "data-node": n.node, "data-gpu": r.gpu }, el("span", { class: "node-name gpu-name" }, r.label), n,
          r.windows)))));
  }));
  const slices = [...new Set(schedule.nodes.flatMap((n) => windowsOf(n).map((w) => w.slice)))].sort();
  patch(document.getElementById("legend"), slices.length
    ? slices.map((s) => el("span", { class: `legend ${colourOf(s)}` }, s))
    : [el("span", { class: "muted" }, project ? `No windows of project ${project} in this range.` : "No windows in this range.")]);
}

form.addEventListener("submit", (e) => {
  e.preventDefault();
  first = 0;
  refreshNow();
});
form.elements.node.addEventListener("input", () => { first = 0; if (last) draw(); });
form.elements.project.addEventListener("change", () => { if (last) draw(); });
document.getElementById("previous").addEventListener("click", () => { first = Math.max(0, first - PAGE_SIZE); draw(); });
document.getElementById("next").addEventListener("click", () => { first += PAGE_SIZE; draw(); });
const refreshNow = live(load, (data) => { last = data; drawProjects(); draw(); });

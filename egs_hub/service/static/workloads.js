// AI workloads: per slice its servers, pods and processes with their GPUs' live readings,
// the hottest first, and one GPU's time series as an inline SVG chart. The workspace filter asks
// GET /workloads for one slice; the project filter keeps the rows (workloads, GPUs) of its slices here.
"use strict";

import { api, apiAll, el, live, patch, query } from "./api.js";
import { lineChart } from "./chart.js";

const filter = document.getElementById("workload-filter").elements.slice;
const project = document.getElementById("workload-filter").elements.project;
const series = document.getElementById("series-form").elements;
const METRICS = {
  utilization: { label: "Utilisation", unit: "%", max: 100 },
  temperature_c: { label: "Temperature", unit: "°C" },
  power_w: { label: "Power", unit: " W" },
  memory_used_mib: { label: "Memory used", unit: " MiB" },
};
const reading = (value, unit) => (value === null || value === undefined ? "—" : `${Math.round(value)}${unit}`);
const gpuName = (g) => `${g.node} #${g.index}`;

async function load() {
  const wanted = filter.value;
  const [slices, workloads, gpus] = await Promise.all([
    api("GET", "slices"), apiAll(`workloads${query({ slice: wanted })}`, "workloads"), api("GET", "gpus?sort=temperature"),
  ]);
  const uuid = series.gpu.value;
  const points = uuid && gpus.gpus.some((g) => g.uuid === uuid)
    ? (await api("GET", `gpus/${encodeURIComponent(uuid)}/metrics`)).points : null;
  return { slices: slices.slices, workloads, gpus, points, uuid, metric: series.metric.value,
    projectOf: new Map(slices.slices.map((s) => [s.name, s.project])) };
}

function hottestFirst(a, b) {
  const t = (w) => w.hottest_gpu?.temperature_c ?? -Infinity;
  const u = (w) => w.utilization ?? -Infinity;
  return t(b) - t(a) || u(b) - u(a) || a.slice.localeCompare(b.slice) || a.name.localeCompare(b.name);
}

function drawSource(source) {
  const text = !source.name ? "No GPU metrics source is configured: workloads and GPUs show without live readings."
    : source.error ? `GPU metrics from ${source.name} are failing: ${source.error}`
      : `Live readings from ${source.name}, sampled every ${source.interval} s.`;
  document.getElementById("source").textContent = text;
}

function draw({ slices, workloads, gpus, points, uuid, metric, projectOf }) {
  drawSource(gpus.source);
  patch(filter, [el("option", { value: "" }, "all"), ...slices.map((s) => el("option", { value: s.name }, s.name))]);
  const projects = [...new Set(slices.map((s) => s.project))].sort();
  patch(project, [el("option", { value: "" }, "all"), ...projects.map((p) => el("option", { value: p }, p))]);
  const inProject = (slice) => !project.value || (slice && projectOf.get(slice) === project.value);
  const byUuid = new Map(gpus.gpus.map((g) => [g.uuid, g]));
  const rows = workloads.workloads.filter((w) => inProject(w.slice)).sort(hottestFirst).map((w) => el("tr", { "data-workload": `${w.slice}/${w.kind}/${w.name}` },
    el("td", {}, w.slice), el("td", {}, w.kind), el("td", {}, w.name), el("td", {}, w.user || ""),
    el("td", {}, w.gpus.map((u) => (byUuid.has(u) ? gpuName(byUuid.get(u)) : u)).join(", ")),
    el("td", {}, reading(w.utilization, "%")),
    el("td", {}, w.hottest_gpu ? `${reading(w.hottest_gpu.temperature_c, "°C")} on ${byUuid.has(w.hottest_gpu.uuid)
      ? gpuName(byUuid.get(w.hottest_gpu.uuid)) : w.hottest_gpu.uuid}` : "—"),
    el("td", {}, w.processes.length ? w.processes.map((p) => `pid ${p.pid} (${p.used_mib ?? "?"} MiB)`).join(", ") : "")));
  patch(document.querySelector("#workloads tbody"), rows.length ? rows
    : [el("tr", {}, el("td", { colspan: 8, class: "muted" }, project.value ? `No workloads in project ${project.value} now.`
      : "No workloads: no server, pod or process uses a workspace's GPUs now."))]);

  const shown = gpus.gpus.filter((g) => (!filter.value || g.slice === filter.value) && inProject(g.slice));
  patch(document.querySelector("#gpus tbody"), shown.length ? shown.map((g) => el("tr", { "data-gpu": g.uuid },
    el("td", {}, gpuName(g), " ", el("code", {}, g.uuid)), el("td", {}, g.node), el("td", {}, g.slice ? `${g.slice} (GPR ${g.gpr})` : "free"),
    el("td", {}, reading(g.sample?.utilization, "%")),
    el("td", {}, g.sample?.memory_used_mib != null ? `${Math.round(g.sample.memory_used_mib)} / ${Math.round(g.sample.memory_total_mib)} MiB` : "—"),
    el("td", {}, reading(g.sample?.temperature_c, "°C")), el("td", {}, reading(g.sample?.power_w, " W")),
    el("td", {}, el("button", { type: "button", "aria-label": `Chart of ${gpuName(g)}`, onclick: () => {
      series.gpu.value = g.uuid;
      refreshNow();
    } }, "Chart"))))
    : [el("tr", {}, el("td", { colspan: 8, class: "muted" }, "No GPUs to show."))]);

  patch(series.gpu, [el("option", { value: "" }, "pick a GPU"),
    ...gpus.gpus.map((g) => el("option", { value: g.uuid }, `${gpuName(g)}${g.slice ? ` (${g.slice})` : ""}`))]);
  if (uuid && byUuid.has(uuid)) series.gpu.value = uuid;
  const box = document.getElementById("series");
  if (!points) {
    patch(box, [el("p", { class: "muted" }, "Pick a GPU to see its last hour.")]);
  } else if (!gpus.source.name) {
    patch(box, [el("p", { class: "muted" }, "No GPU metrics source is configured, so there is no time series.")]);
  } else {
    const m = METRICS[metric];
    box.replaceChildren(el("h3", {}, `${m.label} of ${gpuName(byUuid.get(uuid))}, last hour`),
      lineChart(points.map((p) => ({ time: p.time, value: p[metric] })), m));
  }
}

let last = null;
// A workspace is asked of the API; a project filters what is loaded.
document.getElementById("workload-filter").addEventListener("change", (e) => (e.target === project ? last && draw(last) : refreshNow()));
document.getElementById("series-form").addEventListener("change", () => refreshNow());
for (const f of ["workload-filter", "series-form"]) {
  document.getElementById(f).addEventListener("submit", (e) => e.preventDefault());
}
const refreshNow = live(load, (data) => { last = data; draw(data); });

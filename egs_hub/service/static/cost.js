// Cost and usage (admins): GET /usage as a table, a chart per period and a CSV download, and the
// clusters' prices per GPU-hour (PUT /clusters/{name}/prices).
"use strict";

import { act, api, el, hours, live, page, patch, query } from "./api.js";

const form = document.getElementById("usage-form");
const f = form.elements;
const WIDTH = 600, HEIGHT = 180, PAD = 40;
const money = (value) => (value === null ? "no price" : value.toFixed(2));

// Six periods back unless a date is picked.
function since() {
  if (f.since.value) return new Date(`${f.since.value}T00:00:00Z`).toISOString();
  const start = new Date();
  if (f.period.value === "week") start.setUTCDate(start.getUTCDate() - 7 * 5);
  else start.setUTCMonth(start.getUTCMonth() - 5, 1);
  return start.toISOString();
}

function usagePath(format) {
  return `usage${query({ group_by: f.group_by.value, period: f.period.value, since: since(), format })}`;
}

// The report's periods, from its since to its until (the API's ISO times).
function periodsOf(report) {
  const periods = [];
  for (let start = new Date(report.since); start < new Date(report.until);) {
    periods.push(start.toISOString().replace(".000Z", "Z"));
    if (report.period === "week") start.setUTCDate(start.getUTCDate() + 7);
    else start.setUTCMonth(start.getUTCMonth() + 1);
  }
  return periods;
}

// One bar per period, stacked by who used it, tallest period at full height.
function barChart(report) {
  const rows = report.rows;
  if (!rows.length) return el("p", { class: "muted" }, "No GPU was held in these periods.");
  const periods = periodsOf(report);
  const keys = [...new Set(rows.map((r) => r.key))].sort();
  const total = (p) => rows.filter((r) => r.period_start === p).reduce((sum, r) => sum + r.gpu_hours_used, 0);
  const top = Math.max(...periods.map(total), 1e-9);
  const width = (WIDTH - 2 * PAD) / periods.length;
  const bars = periods.flatMap((p, i) => {
    let y = HEIGHT - PAD / 2;
    return rows.filter((r) => r.period_start === p).map((r) => {
      const height = ((HEIGHT - PAD) * r.gpu_hours_used) / top;
      y -= height;
      return el("rect", { class: `bar bar-${keys.indexOf(r.key) % 6}`, x: PAD + i * width + 2, y, width: width - 4, height },
        el("title", {}, `${p.slice(0, 10)} ${r.key}: ${hours(r.gpu_hours_used)} GPU-hours`));
    });
  });
  const labels = periods.map((p, i) => el("text", { x: PAD + i * width + width / 2, y: HEIGHT - 2, "text-anchor": "middle" }, p.slice(0, 10)));
  const summary = `GPU-hours used per ${report.period}, ${periods.length} periods, at most ${hours(top)}`;
  return el("svg", { class: "chart", viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: "img", "aria-label": summary },
    el("title", {}, summary), el("text", { x: 2, y: 12 }, hours(top)), ...bars, ...labels);
}

function drawUsage(report) {
  patch(document.querySelector("#usage tbody"), report.rows.map((r) => el("tr", {},
    el("td", {}, r.period_start.slice(0, 10)), el("th", { scope: "row" }, r.key),
    el("td", {}, hours(r.gpu_hours_reserved)), el("td", {}, hours(r.gpu_hours_used)),
    el("td", {}, money(r.cost)), el("td", {}, money(r.reserved_cost)), el("td", {}, hours(r.unpriced_gpu_hours)),
    el("td", {}, r.mean_utilization === null ? "no readings" : `${Math.round(r.mean_utilization)}%`))));
  document.getElementById("usage-note").textContent = report.rows.length ? "" : "No GPU was held in these periods.";
  patch(document.getElementById("chart"), [barChart(report)]);
  document.getElementById("csv").href = page.api + usagePath("csv");
}

// The price inputs keep what the admin typed between refreshes: only new rows are drawn.
function drawPrices(inventory, prices) {
  const body = document.querySelector("#prices tbody");
  for (const s of inventory.shapes) {
    const id = `price-${s.cluster}-${s.name}`.replace(/[^A-Za-z0-9-]/g, "_");
    if (document.getElementById(id)) continue;
    const price = prices[s.cluster]?.[s.name];
    body.append(el("tr", { "data-cluster": s.cluster, "data-shape": s.name },
      el("td", {}, s.cluster), el("td", {}, s.name),
      el("td", {}, el("input", { id, type: "number", min: "0", step: "0.01", value: price ?? "",
        "aria-label": `Price per GPU-hour of ${s.name} on ${s.cluster}` }))));
  }
  const clusters = [...new Set(inventory.shapes.map((s) => s.cluster))];
  patch(document.getElementById("price-actions"), clusters.map((c) => el("button", { type: "button",
    onclick: () => savePrices(c) }, `Save prices of ${c}`)));
}

function savePrices(cluster) {
  const table = {};
  for (const row of document.querySelectorAll(`#prices tr[data-cluster="${cluster}"]`)) {
    const value = row.querySelector("input").value.trim();
    if (value !== "") table[row.dataset.shape] = Number(value);
  }
  act(`Prices of ${cluster} saved`, () => api("PUT", `clusters/${encodeURIComponent(cluster)}/prices`, table));
}

async function load() {
  const [report, inventory] = await Promise.all([api("GET", usagePath("json")), api("GET", "inventory")]);
  const clusters = [...new Set(inventory.shapes.map((s) => s.cluster))];
  const prices = Object.fromEntries(await Promise.all(clusters.map(async (c) =>
    [c, (await api("GET", `clusters/${encodeURIComponent(c)}/prices`)).prices])));
  return { report, inventory, prices };
}

const refresh = live(load, ({ report, inventory, prices }) => {
  drawUsage(report);
  drawPrices(inventory, prices);
});
form.addEventListener("input", () => refresh());
form.addEventListener("submit", (e) => e.preventDefault());

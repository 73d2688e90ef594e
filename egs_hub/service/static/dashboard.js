// The admin dashboard: capacity, utilisation, queue, approvals, alerts and the week's top users.
"use strict";

import { api, apiAll, el, hours, live, localTime, page, patch, query, span } from "./api.js";
import { clustersTable, loadClusters } from "./kubernetes.js";
import { lineChart } from "./chart.js";
import { capacity, gpuSecondsBy, nodeEquivalents, percent, top } from "./usage.js";

const DAY = 86400e3;
const TOP = 5;

async function load() {
  const now = Date.now();
  const week = query({ start: new Date(now - 7 * DAY).toISOString(), end: new Date(now).toISOString() });
  const [inventory, queue, pending, alerts, gpus, used, slices, schedule, gprs, clusters, projects, usage] =
    await Promise.all([
      api("GET", "inventory"), apiAll("queue", "queue"), apiAll("gprs?status=pending-approval", "gprs"),
      apiAll("alerts?active=true", "alerts"), api("GET", "gpus"), api("GET", "gpus/utilization"), api("GET", "slices"),
      api("GET", `inventory/schedule${week}`), apiAll("gprs", "gprs"), loadClusters(), api("GET", "projects"),
      api("GET", "usage?group_by=project&period=month"),
    ]);
  return { now, inventory, queue, pending, alerts, gpus, used, slices, schedule, gprs, clusters, projects, usage };
}

const figure = (name, value, id) => [el("dt", {}, name), el("dd", { "data-figure": id }, value)];

// The sum of a capacity column over its rows in GPU-equivalents (a MIG instance or a share is part of a GPU).
const equivalentSum = (rows, k) => rows.reduce((n, r) => n + r[k] * r.equivalents, 0);
const gpuCount = (n) => String(Math.round(n * 100) / 100);

function drawCapacity(inventory) {
  const rows = capacity(inventory);
  const shared = rows.some((r) => r.equivalents !== 1);
  const sum = (k) => gpuCount(equivalentSum(rows, k));
  patch(document.querySelector("#capacity tbody"), [
    ...rows.map((r) => el("tr", {}, el("td", {}, r.cluster), el("td", {}, r.shape), el("td", {}, r.total),
      el("td", {}, r.bound), el("td", {}, r.free), el("td", {}, r.unusable))),
    el("tr", { class: "total" }, el("th", { scope: "row", colspan: 2 }, shared ? "All, in GPU-equivalents" : "All"),
      el("td", {}, sum("total")), el("td", {}, sum("bound")), el("td", {}, sum("free")), el("td", {}, sum("unusable"))),
  ]);
}

// The used utilisation of the day the service keeps in memory (since it started, 24 h at most).
function usedDay(used) {
  if (!used.source.name) return "not known: no GPU metrics source is configured";
  const known = used.points.filter((p) => p.utilization !== null);
  if (!known.length) return `no readings from ${used.source.name} since the service started`;
  const mean = known.reduce((sum, p) => sum + p.utilization, 0) / known.length;
  // Each step's mean held flat from its start to its end, so that one step is a line too.
  const steps = used.points.flatMap((p) => [{ time: p.time, value: p.utilization },
    { time: new Date(new Date(p.time).getTime() + used.step * 1000).toISOString(), value: p.utilization }]);
  const chart = lineChart(steps, { label: "Used utilisation", unit: "%", max: 100 });
  return [`${Math.round(mean)}% mean over ${span(known.length * used.step)} with readings (${used.source.name}; ` +
    "kept in memory since the service started)", chart];
}

// Bound and its share of the whole in GPU-equivalents: a MIG instance or a share counts its part of a GPU.
function drawUtilisation({ now, inventory, gpus, used, schedule }) {
  const rows = capacity(inventory);
  const total = equivalentSum(rows, "total");
  const bound = equivalentSum(rows, "bound");
  const day = gpuSecondsBy(schedule, now - DAY, now, () => "all", nodeEquivalents(inventory)).get("all") || 0;
  const readings = gpus.gpus.map((g) => g.sample?.utilization).filter((u) => u !== null && u !== undefined);
  const usedNow = gpus.source.name
    ? (readings.length ? `${Math.round(readings.reduce((a, b) => a + b, 0) / readings.length)}% mean over ${readings.length} GPU(s) with readings (${gpus.source.name})`
      : `no readings yet from ${gpus.source.name}`)
    : "not known: no GPU metrics source is configured";
  patch(document.getElementById("utilisation"), [
    ...figure("Bound now", `${percent(bound, total)} (${gpuCount(bound)} of ${gpuCount(total)} GPUs)`, "bound-now"),
    ...figure("Used now", usedNow, "used-now"),
    ...figure("Bound, last 24 h", `${percent(day, total * 86400)} (${hours(day / 3600)} GPU-hours)`, "bound-24h"),
    ...figure("Used, last 24 h", usedDay(used), "used-24h"),
  ]);
}

function drawQueue({ now, queue, pending }) {
  const waiting = queue.queue;
  const oldest = waiting.reduce((o, g) => (!o || g.created_at < o ? g.created_at : o), null);
  const requests = page.base + "admin/requests";
  patch(document.getElementById("queue"), [
    ...figure("Queued GPRs", waiting.length, "queued"),
    ...figure("Oldest wait", oldest ? `${span((now - new Date(oldest)) / 1000)} (since ${localTime(oldest)})` : "none",
      "oldest-wait"),
    ...figure("Pending approvals", pending.gprs.length
      ? el("a", { href: `${requests}?status=pending-approval` }, `${pending.gprs.length} waiting for an admin`) : "none",
    "pending"),
  ]);
}

function drawAlerts(alerts) {
  const box = document.getElementById("alerts");
  if (!alerts.source.name) {
    patch(box, [el("p", { class: "muted" }, "No GPU metrics source is configured, so no GPU alerts are raised.")]);
    return;
  }
  patch(box, alerts.alerts.length ? [el("table", {},
    el("thead", {}, el("tr", {}, ["Raised", "Kind", "GPU", "Node", "Workspace", "Message"].map((h) => el("th", {}, h)))),
    el("tbody", {}, alerts.alerts.map((a) => el("tr", { "data-alert": a.id },
      el("td", {}, localTime(a.raised_at)), el("td", {}, a.kind), el("td", {}, el("code", {}, a.gpu)),
      el("td", {}, a.node), el("td", {}, a.slice || ""), el("td", {}, a.message)))))]
    : [el("p", { class: "muted" }, "No active alerts.")]);
}

function drawTop({ now, inventory, slices, schedule, gprs }) {
  const bySlice = slices.slices.map((s) => [s, s.usage.gpu_hours_week])
    .sort((a, b) => b[1] - a[1] || a[0].name.localeCompare(b[0].name)).slice(0, TOP);
  patch(document.querySelector("#top-slices tbody"), bySlice.length
    ? bySlice.map(([s, h]) => el("tr", {}, el("td", {}, s.name), el("td", {}, hours(h)),
      el("td", {}, s.usage.fair_share_factor.toFixed(2))))
    : [el("tr", {}, el("td", { colspan: 3, class: "muted" }, "No workspaces yet."))]);
  const askedBy = new Map(gprs.gprs.map((g) => [g.id, g.requested_by]));
  const week = gpuSecondsBy(schedule, now - 7 * DAY, now, (w) => askedBy.get(w.gpr) || "?", nodeEquivalents(inventory));
  const users = top(week, TOP);
  patch(document.querySelector("#top-users tbody"), users.length
    ? users.map(([user, seconds]) => el("tr", {}, el("td", {}, user), el("td", {}, hours(seconds / 3600))))
    : [el("tr", {}, el("td", { colspan: 2, class: "muted" }, "No GPUs held this week."))]);
}

// Per project: its workspaces, admins and quota (GET /projects), and this month's use (GET /usage).
function drawProjects({ projects, usage }) {
  const month = new Map(usage.rows.map((r) => [r.key, r]));
  patch(document.querySelector("#projects tbody"), projects.projects.map((p) => {
    const used = month.get(p.name);
    return el("tr", { "data-project": p.name }, el("th", { scope: "row" }, p.display_name || p.name),
      el("td", {}, p.slices.length), el("td", {}, p.admins.join(", ") || "none"),
      el("td", {}, p.quota.max_gpus ?? "no limit"), el("td", {}, hours(used?.gpu_hours_used ?? 0)),
      el("td", {}, used?.cost == null ? "no price" : used.cost.toFixed(2)),
      el("td", {}, used?.mean_utilization == null ? "no readings" : `${Math.round(used.mean_utilization)}%`));
  }));
}

live(load, (data) => {
  drawProjects(data);
  drawCapacity(data.inventory);
  drawUtilisation(data);
  drawQueue(data);
  drawAlerts(data.alerts);
  drawTop(data);
  patch(document.getElementById("clusters"), [clustersTable(data.clusters)]);
});

// Capacity planning (admins): POST /capacity-plans runs a what-if in the background; the page follows
// GET /capacity-plans/{id} with a progress bar, then shows the waits per workspace and GPUs bound over
// time, what really happened beside the replays.
"use strict";

import { act, api, el, live, localTime, patch, span } from "./api.js";

const form = document.getElementById("plan-form");
const f = form.elements;
const WIDTH = 600, HEIGHT = 180, PAD = 40;
const CASES = [["recorded", "what happened"], ["current", "replayed as they are"], ["changed", "replayed changed"]];
let shown = null;  // the plan shown: the one just started, or one picked in the list

const wait = (seconds) => (seconds === null ? "-" : span(Math.round(seconds)));
const changes = (plan) => [
  ...plan.add_nodes.map((c) => `+${c.count} ${c.shape}`), ...plan.remove_nodes.map((c) => `-${c.count} ${c.shape}`),
].join(", ") || "none";

// GPUs bound over time, one line per case, as a share of the GPUs.
function boundChart(result) {
  const cases = CASES.filter(([key]) => result[key]);
  const end = Math.max(...cases.map(([key]) => result[key].bound.at(-1)[0]), 1);
  const x = (t) => PAD + ((WIDTH - 2 * PAD) * t) / end;
  const y = (share) => HEIGHT - PAD / 2 - (HEIGHT - PAD) * share;
  const lines = cases.map(([key, label], i) => el("polyline", { class: `series series-${i}`,
    points: result[key].bound.map(([t, share]) => `${x(t).toFixed(1)},${y(share).toFixed(1)}`).join(" ") },
  el("title", {}, label)));
  const summary = `GPUs bound over the ${span(end)} replayed: ${cases.map(([key, label]) =>
    `${label} ${Math.round(100 * mean(result[key].bound))}% on average`).join(", ")}`;
  return el("svg", { class: "chart", viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: "img", "aria-label": summary },
    el("title", {}, summary),
    el("line", { class: "axis", x1: PAD, y1: y(0), x2: WIDTH - PAD, y2: y(0) }),
    el("line", { class: "axis", x1: PAD, y1: y(1), x2: PAD, y2: y(0) }),
    el("text", { x: 2, y: y(1) + 4 }, "100%"), el("text", { x: 2, y: y(0) }, "0%"),
    el("text", { x: WIDTH - PAD, y: HEIGHT - 2, "text-anchor": "end" }, span(end)),
    ...lines);
}

const mean = (points) => points.reduce((sum, [, share]) => sum + share, 0) / points.length;

// Each case with its nodes and what they cost over the period (where every shape has a price).
function legend(result) {
  const about = (c) => [c.nodes && ` (${c.nodes})`, c.capacity_cost != null && `, costing ${c.capacity_cost.toFixed(2)} over the period`]
    .filter(Boolean).join("");
  return el("ul", { class: "plain series-legend" }, ...CASES.filter(([key]) => result[key]).map(([key, label], i) =>
    el("li", { class: `series-${i}` }, `${label}${about(result[key])}`)));
}

// Mean / p95 wait of every workspace, one column per case.
function waitsTable(result) {
  const cases = CASES.filter(([key]) => result[key]);
  const names = [...new Set(cases.flatMap(([key]) => Object.keys(result[key].slices)))].sort();
  const cell = (waits) => el("td", {}, waits && waits.gprs ? `${wait(waits.wait_mean_s)} / ${wait(waits.wait_p95_s)}` : "-");
  return el("table", { id: "waits" },
    el("thead", {}, el("tr", {}, el("th", {}, "Workspace"), ...cases.map(([, label]) => el("th", {}, `${label}: mean / p95 wait`)))),
    el("tbody", {},
      el("tr", {}, el("th", { scope: "row" }, "all"), ...cases.map(([key]) => cell(result[key]))),
      ...names.map((name) => el("tr", {}, el("th", { scope: "row" }, name),
        ...cases.map(([key]) => cell(result[key].slices[name]))))));
}

function drawPlan(plan) {
  const head = el("p", {}, `Plan ${plan.id}: the last ${span(plan.since)}, changes ${changes(plan)}; started ${localTime(plan.started_at)} by ${plan.started_by}.`);
  if (plan.status === "running") {
    return [head, el("progress", { max: "1", value: String(plan.progress), "aria-label": "Replay progress" }),
      el("span", {}, ` ${Math.round(100 * plan.progress)}%`)];
  }
  if (plan.status === "failed") return [head, el("p", { class: "error" }, `Failed: ${plan.error}`)];
  const r = plan.result;
  return [head, el("p", {}, `GPU requests replayed: ${r.gprs}.`), legend(r), boundChart(r), waitsTable(r)];
}

function drawPlans(plans) {
  patch(document.querySelector("#plans tbody"), plans.map((p) => el("tr", {},
    el("th", { scope: "row" }, el("button", { type: "button", onclick: () => { shown = p.id; refresh(); } }, `Plan ${p.id}`)),
    el("td", {}, localTime(p.started_at)), el("td", {}, p.started_by), el("td", {}, span(p.since)),
    el("td", {}, changes(p)), el("td", {}, p.status === "running" ? `running, ${Math.round(100 * p.progress)}%` : p.status))));
}

async function load() {
  const [plans, inventory] = await Promise.all([api("GET", "capacity-plans"), api("GET", "inventory")]);
  shown = shown ?? plans.plans[0]?.id ?? null;
  const plan = shown === null ? null : plans.plans.find((p) => p.id === shown) ?? await api("GET", `capacity-plans/${shown}`);
  return { plans: plans.plans, plan, shapes: [...new Set(inventory.shapes.map((s) => s.name))] };
}

const refresh = live(load, ({ plans, plan, shapes }) => {
  patch(document.getElementById("shapes"), shapes.map((s) => el("option", { value: s })));
  drawPlans(plans);
  if (plan) patch(document.getElementById("plan"), drawPlan(plan));
});

form.addEventListener("submit", (e) => {
  e.preventDefault();
  const change = (shape, count, price) => (shape.value.trim() && Number(count.value) > 0
    ? [{ shape: shape.value.trim(), count: Number(count.value), ...(price?.value ? { price: Number(price.value) } : {}) }]
    : []);
  const body = { since: f.since.value, add_nodes: change(f.add_shape, f.add_count, f.add_price),
    remove_nodes: change(f.remove_shape, f.remove_count) };
  act("What-if started", async () => {
    const plan = await api("POST", "capacity-plans", body);
    shown = plan.id;
    return `Plan ${plan.id} started`;
  });
});
// A running plan's progress moves faster than the page's refresh.
setInterval(() => { if (!document.hidden && document.querySelector("#plan progress")) refresh(); }, 1000);

// Nodes (admins): every node with its health, GPUs, holders, next maintenance and last checks,
// filtered by cluster and health (the URL's ?cluster= and ?health=); per node Quarantine, Clear,
// Run checks (followed until they end) and Change layout (its machine's MIG layout); each cluster's
// checklist, edited as JSON.
"use strict";

import { act, api, el, live, localTime, notify, page, patch, query, refresh, span } from "./api.js";
import { CHECK_ACTIVE, checkChip } from "./gpr.js";

const FOLLOW_MS = 1000; // how often the page refreshes while a node's checks are pending or running
const filters = document.getElementById("filters");
const f = filters.elements;
const params = new URLSearchParams(location.search);
f.health.value = params.get("health") || "";
// The cluster select gets its choices with the first answer; the URL's pick is applied then.
let pendingCluster = params.get("cluster") || "";
const following = new Map(); // "cluster/node" -> ids of the check runs started here, until they end
const refusals = new Map(); // cluster -> { message, field } of the last refused checklist
let followTimer = null;

const nodeKey = (n) => `${n.cluster}/${n.name}`;
const active = (n) => n.checks.some((c) => CHECK_ACTIVE.includes(c.status));
const nodePath = (n) => `nodes/${encodeURIComponent(n.cluster)}/${encodeURIComponent(n.name)}`;
const plural = (count, noun) => `${count} ${noun}${count === 1 ? "" : "s"}`;

async function load() {
  const cluster = pendingCluster || f.cluster.value;
  const [nodes, clusters] = await Promise.all([
    api("GET", `nodes${query({ cluster, health: f.health.value })}`), api("GET", "clusters"),
  ]);
  const checklists = await Promise.all(clusters.clusters.map((c) =>
    api("GET", `clusters/${encodeURIComponent(c.name)}/checks`).catch((e) => ({ cluster: c.name, error: e.message }))));
  return { nodes: nodes.nodes, clusters: clusters.clusters, checklists };
}

function healthCell(n) {
  const why = n.health === "quarantined"
    ? `since ${localTime(n.quarantined_at)}${n.quarantine_reason ? `: ${n.quarantine_reason}` : ""}`
    : n.health === "unhealthy" ? (n.schedulable ? "a GPU is failing or missing" : "not schedulable (cordoned)")
      : n.health === "unknown" ? "not found in its cluster now" : null;
  return el("td", {}, el("span", { class: `badge health-${n.health}` }, n.health),
    why ? el("div", { class: "muted reason" }, why) : null);
}

function heldBy(n) {
  if (!n.held_by.length) return el("span", { class: "muted" }, "free");
  return n.held_by.flatMap((id, i) => [i ? ", " : "", el("a", { href: `${page.base}admin/requests?gpr=${id}` }, `GPR ${id}`)]);
}

function nextMaintenance(n) {
  const windows = n.maintenance.slice().sort((a, b) => a.start.localeCompare(b.start));
  if (!windows.length) return el("span", { class: "muted" }, "none");
  const w = windows[0];
  const when = new Date(w.start) <= Date.now()
    ? `now, until ${localTime(w.end)}` : `${localTime(w.start)} → ${localTime(w.end)}`;
  return [when, w.reason ? el("div", { class: "muted" }, w.reason) : null,
    windows.length > 1 ? el("div", { class: "muted" }, `and ${windows.length - 1} more`) : null];
}

function lastChecks(n) {
  if (!n.checks.length) return el("span", { class: "muted" }, "never checked");
  const runs = n.checks.slice().sort((a, b) => a.phase.localeCompare(b.phase) || a.name.localeCompare(b.name));
  return el("ul", { class: "chips", "aria-label": `Last checks of ${n.name}` },
    runs.map((run) => el("li", {}, checkChip(run, `${run.name} ${run.phase}: ${run.status}`))));
}

function quarantine(n) {
  const reason = prompt(`Why quarantine node ${n.name} (${n.cluster})? Nothing is planned on it until it is cleared.`, "");
  if (reason === null) return;
  act(`Node ${n.name} quarantined`, () => api("POST", `${nodePath(n)}/quarantine`, { reason: reason.trim() }));
}

function clear(n) {
  const reason = prompt(`Why clear node ${n.name} (${n.cluster})? GPRs are planned on it again.`, "");
  if (reason === null) return;
  act(`Node ${n.name} cleared`, () => api("POST", `${nodePath(n)}/clear`, { reason: reason.trim() }));
}

function runChecks(n) {
  act("", async () => {
    const answer = await api("POST", `${nodePath(n)}/checks`);
    const started = answer.checks.filter((c) => CHECK_ACTIVE.includes(c.status)).map((c) => c.id);
    following.set(nodeKey(n), started);
    return `Checks of node ${n.name} started: ${plural(started.length, "check")} pending or running`;
  });
}

// "1g.10gb=3, 2g.20gb=2" -> {"1g.10gb": 3, "2g.20gb": 2}; nothing: null (whole GPUs). The service
// judges the profiles and counts; an entry without "=" and a count is an Error naming it.
export function parseLayout(text) {
  const entries = text.split(",").map((e) => e.trim()).filter(Boolean);
  if (!entries.length) return null;
  const layout = {};
  for (const entry of entries) {
    const match = /^(\S+)\s*=\s*(\d+)$/.exec(entry);
    if (!match) throw new Error(`"${entry}" is not a MIG profile and a count, like 1g.10gb=7`);
    layout[match[1]] = Number(match[2]);
  }
  return layout;
}

function changeLayout(n) {
  const host = n.name.split(":")[0];
  const text = prompt(`New MIG layout of node ${host} (${n.cluster}): instances per GPU, like 1g.10gb=7 or `
    + "1g.10gb=3, 2g.20gb=2; empty for whole GPUs. The node must be free; it is out of service while it is "
    + "re-partitioned.", "");
  if (text === null) return;
  act("", async () => {
    const change = await api("POST", `nodes/${encodeURIComponent(n.cluster)}/${encodeURIComponent(host)}/layout`,
      { mig: parseLayout(text) });
    return `Node ${host} is being re-partitioned into ${change.layout}, back by ${localTime(change.ready_by)}`;
  });
}

function actions(n) {
  const quarantined = n.quarantined_at !== null;
  return [
    quarantined
      ? el("button", { type: "button", "aria-label": `Clear node ${n.name}`, onclick: () => clear(n) }, "Clear")
      : el("button", { type: "button", "aria-label": `Quarantine node ${n.name}`, onclick: () => quarantine(n) }, "Quarantine"),
    el("button", { type: "button", "aria-label": `Run checks on node ${n.name}`, disabled: active(n),
      title: active(n) ? "its checks are running" : null, onclick: () => runChecks(n) }, "Run checks"),
    n.shape.includes(" shared/") ? null : el("button", { type: "button", "aria-label": `Change the layout of node ${n.name}`,
      disabled: n.held_by.length > 0, title: n.held_by.length ? "held: its layout changes when it is free" : null,
      onclick: () => changeLayout(n) }, "Change layout"),
  ];
}

function nodeRow(n) {
  const healthy = n.gpus.filter((g) => g.healthy && g.present).length;
  return el("tr", { "data-cluster": n.cluster, "data-node": n.name, "data-health": n.health },
    el("td", {}, n.cluster), el("th", { scope: "row" }, n.name), el("td", {}, n.shape), healthCell(n),
    el("td", {}, `${healthy}/${n.gpus.length}`), el("td", {}, heldBy(n)), el("td", {}, nextMaintenance(n)),
    el("td", {}, lastChecks(n)), el("td", { class: "actions" }, actions(n)));
}

// Checks started here: say when they have all ended (an answer older than the start does not show
// them); refresh every FOLLOW_MS while any check shown is pending or running.
function follow(nodes) {
  for (const n of nodes) {
    const started = following.get(nodeKey(n));
    if (!started) continue;
    const runs = started.map((id) => n.checks.find((c) => c.id === id));
    if (runs.some((run) => !run || CHECK_ACTIVE.includes(run.status))) continue;
    following.delete(nodeKey(n));
    const said = ["failed", "passed", "skipped"].map((status) => [status, runs.filter((r) => r.status === status).length])
      .filter(([, count]) => count).map(([status, count]) => `${count} ${status}`).join(", ");
    notify(`Checks of node ${n.name} ended: ${said || "none ran"}`, runs.some((r) => r.status === "failed"));
  }
  if (followTimer === null && nodes.some(active)) {
    followTimer = setTimeout(() => { followTimer = null; refresh(); }, FOLLOW_MS);
  }
}

// PUT /clusters/{name}/checks (DELETE: the default again); a refusal keeps its message and the field it names apart.
async function putChecklist(cluster, checks, method = "PUT") {
  const response = await fetch(`${page.api}clusters/${encodeURIComponent(cluster)}/checks`, {
    method,
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-XSRFToken": page.xsrf },
    body: method === "PUT" ? JSON.stringify({ checks }) : undefined,
  });
  const data = await response.json().catch(() => ({}));
  if (!response.ok) {
    throw Object.assign(new Error(data.message || response.statusText), { status: response.status, field: data.field || null });
  }
  return data;
}

async function saveChecklist(cluster, form) {
  let checks;
  try {
    const parsed = JSON.parse(form.elements.checks.value);
    checks = Array.isArray(parsed) ? parsed : parsed && parsed.checks;
    if (!Array.isArray(checks)) throw new Error("give a JSON list of checks");
  } catch (e) {
    refusals.set(cluster, { message: `The checklist is not a JSON list of checks: ${e.message}`, field: null });
    refresh();
    return;
  }
  try {
    const saved = await putChecklist(cluster, checks);
    refusals.delete(cluster);
    form.elements.checks.value = JSON.stringify(saved.checks, null, 2);
    notify(`Checklist of ${cluster} saved: ${saved.checks.map((c) => c.name).join(", ") || "no checks"}`);
  } catch (e) {
    refusals.set(cluster, { message: e.message, field: e.field || null, status: e.status });
    notify(`The checklist of ${cluster} was refused: ${e.message}`, true);
  }
  refresh();
}

function checklistTable(answer) {
  if (!answer.checks.length) return el("p", { class: "muted" }, "No checks: nodes are bound and returned unchecked.");
  return el("table", { class: "checklist" },
    el("thead", {}, el("tr", {}, ["Check", "Kind", "At", "Timeout", "Thresholds", "Command"].map((h) => el("th", {}, h)))),
    el("tbody", {}, answer.checks.map((c) => el("tr", { "data-check": c.name },
      el("th", { scope: "row" }, c.name), el("td", {}, c.kind), el("td", {}, c.at.join(" and ")), el("td", {}, span(c.timeout)),
      el("td", {}, Object.entries(c.thresholds).map(([k, v]) => `${k} ${v}`).join(", ") || el("span", { class: "muted" }, "defaults")),
      el("td", {}, c.command ? el("code", {}, c.command.join(" ")) : "")))));
}

function refusal(cluster) {
  const r = refusals.get(cluster);
  if (!r) return null;
  return el("div", { class: "refusal", role: "alert" },
    el("strong", {}, r.status ? `Refused (${r.status}): ` : "Not sent: "), r.message,
    r.field ? el("div", {}, "Field: ", el("code", { class: "field" }, r.field)) : null);
}

function checklistCard(answer) {
  const name = answer.cluster;
  const head = el("h3", {}, `Checklist of ${name}`);
  if (answer.error) return el("div", { class: "card", "data-checklist": name }, head, el("p", { class: "error" }, answer.error));
  const text = JSON.stringify(answer.checks, null, 2);
  return el("div", { class: "card", "data-checklist": name }, head,
    el("p", { class: "muted" }, answer.default ? "egs-hub's default checklist (no admin set one)." : "Set by an admin.",
      ` Kinds this cluster runs: ${answer.runs_here.join(", ")}.`),
    checklistTable(answer),
    el("form", { class: "editor checklist-editor", "aria-label": `Edit the checklist of ${name}`,
      onsubmit: (e) => { e.preventDefault(); saveChecklist(name, e.target); } },
    el("label", {}, `Checks of ${name} (JSON)`,
      el("textarea", { name: "checks", rows: 10, cols: 80, spellcheck: "false", autocomplete: "off" }, text)),
    refusal(name),
    el("p", { class: "actions" },
      el("button", { type: "submit" }, `Save checklist of ${name}`),
      el("button", { type: "button", onclick: (e) => {
        const area = e.target.form.elements.checks;
        area.value = area.defaultValue;
        refusals.delete(name);
        refresh();
      } }, "Reset"),
      answer.default ? null : el("button", { type: "button", onclick: () => useDefault(name) }, "Use the default"))));
}

async function useDefault(cluster) {
  try {
    const saved = await putChecklist(cluster, null, "DELETE");
    refusals.delete(cluster);
    notify(`Checklist of ${cluster}: egs-hub's default again (${saved.checks.map((c) => c.name).join(", ")})`);
  } catch (e) {
    notify(`The checklist of ${cluster} was not reset: ${e.message}`, true);
  }
  refresh();
}

function drawFilterChoices(clusters) {
  patch(f.cluster, [el("option", { value: "" }, "any"), ...clusters.map((c) => el("option", { value: c.name }, c.name))]);
  if (pendingCluster) f.cluster.value = pendingCluster;
  pendingCluster = "";
}

filters.addEventListener("change", () => {
  history.replaceState(null, "", location.pathname + query({ cluster: f.cluster.value, health: f.health.value }));
  refresh();
});
filters.addEventListener("submit", (e) => e.preventDefault());

live(load, ({ nodes, clusters, checklists }) => {
  drawFilterChoices(clusters);
  patch(document.querySelector("#nodes tbody"),
    nodes.length ? nodes.map(nodeRow) : [el("tr", {}, el("td", { colspan: 9, class: "muted" }, "No nodes match."))]);
  const where = [f.health.value, f.cluster.value && `in ${f.cluster.value}`].filter(Boolean).join(" ");
  document.getElementById("shown").textContent = `${plural(nodes.length, "node")}${where ? ` ${where}` : ""}.`;
  patch(document.getElementById("checklists"), checklists.map(checklistCard));
  follow(nodes);
});

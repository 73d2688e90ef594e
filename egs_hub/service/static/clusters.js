// Clusters: the registered clusters with health, nodes, GPUs and shapes; register and remove. Their
// dynamic node pools: size, nodes, what was asked of the autoscaler and why it last failed; add and delete.
"use strict";

import { act, api, durationText, el, live, localTime, patch } from "./api.js";
import { registerCluster, removeCluster } from "./kubernetes.js";

const form = document.getElementById("cluster-form");
const f = form.elements;

const NOT_REMOVABLE = { local: "this host: not removable", config: "from the config: not removable" };

function shapesOf(cluster, shapes) {
  const mine = shapes.filter((s) => s.cluster === cluster);
  if (!mine.length) return el("span", { class: "muted" }, "none");
  return el("ul", { class: "plain" }, mine.map((s) => el("li", {}, `${s.name}: ${s.free} of ${s.gpus} GPUs free`)));
}

function health(c) {
  if (c.health === "ok") return el("td", { class: "health-ok" }, "ok");
  return el("td", { class: "health-unavailable" }, "unavailable", el("div", { class: "message" }, c.message || ""));
}

function remove(name) {
  if (!confirm(`Remove cluster ${name} from egs-hub? GPU requests can no longer use its nodes.`)) return;
  act(`Cluster ${name} removed`, async () => {
    try {
      await removeCluster(name);
    } catch (e) {
      throw new Error(`Cluster ${name} was not removed: ${e.message}`);
    }
  });
}

function move(name, project) {
  act(`Cluster ${name} is project ${project}'s`, () => api("PATCH", `clusters/${encodeURIComponent(name)}`, { project }));
}

// A cluster's project: chosen here, except a config cluster's (the config says it).
function projectCell(c, projects) {
  if (c.origin === "config") return el("td", {}, c.project, el("div", { class: "muted" }, "from the config"));
  const choices = projects.map((p) => el("option", { value: p.name, selected: p.name === c.project }, p.name));
  return el("td", {}, el("select", { "aria-label": `Project of cluster ${c.name}`,
    onchange: (e) => move(c.name, e.target.value) }, choices));
}

function clusterRow(c, shapes, projects) {
  const action = c.origin === "api"
    ? el("button", { type: "button", "aria-label": `Remove cluster ${c.name}`, onclick: () => remove(c.name) }, "Remove")
    : el("span", { class: "muted" }, NOT_REMOVABLE[c.origin] || "not removable");
  return el("tr", { "data-cluster": c.name, class: c.health === "ok" ? null : "unavailable" },
    el("th", { scope: "row" }, c.name), el("td", {}, c.kind), el("td", {}, c.origin), projectCell(c, projects),
    el("td", {}, el("code", {}, c.where), c.node_selector === null ? null
      : el("div", { class: "muted" }, `nodes ${c.node_selector} · exit grace ${c.exit_grace} s`)), health(c), el("td", {}, c.nodes), el("td", {}, c.gpus),
    el("td", {}, shapesOf(c.name, shapes)), el("td", { class: "actions" }, action));
}

// The body of POST /clusters: in-cluster, or a kubeconfig path with an optional context; the
// settings left empty take the service's defaults.
function registration() {
  const name = f.name.value.trim();
  const body = f.in_cluster.checked ? { name, in_cluster: true } : { name, kubeconfig: f.kubeconfig.value.trim() };
  for (const field of ["context", "node_selector", "exit_grace", "project"]) {
    if (!f[field].disabled && f[field].value.trim()) body[field] = f[field].value.trim();
  }
  return body;
}

f.in_cluster.addEventListener("change", () => {
  for (const name of ["kubeconfig", "context"]) f[name].disabled = f.in_cluster.checked;
});

form.addEventListener("submit", (e) => {
  e.preventDefault();
  const body = registration();
  act(`Cluster ${body.name} registered`, async () => {
    const c = await registerCluster(body);
    form.reset();
    for (const name of ["kubeconfig", "context"]) f[name].disabled = false;
    return c.health === "ok"
      ? `Cluster ${c.name} registered: ${c.nodes} node(s), ${c.gpus} GPU(s)`
      : `Cluster ${c.name} registered, but it is unavailable: ${c.message}`;
  });
});

const poolForm = document.getElementById("pool-form");
const p = poolForm.elements;

function poolNodes(pool) {
  const live = pool.nodes.filter((n) => n.schedulable);
  const text = `${live.length} (min ${pool.min_nodes}, max ${pool.max_nodes})`;
  if (!pool.nodes.length) return text;
  return [text, el("ul", { class: "plain" }, pool.nodes.map((n) => el("li", {}, n.name,
    el("span", { class: "muted" }, !n.schedulable ? " (given back)" : n.idle_since ? ` idle since ${localTime(n.idle_since)}` : " (held)"))))];
}

function lastAsk(pool) {
  const asked = pool.asked_at ? localTime(pool.asked_at) : el("span", { class: "muted" }, "never");
  if (!pool.last_error) return asked;
  return [asked, el("div", { class: "error", role: "note" }, `failed: ${pool.last_error}`),
    pool.retry_at ? el("div", { class: "muted" }, `asking again after ${localTime(pool.retry_at)}`) : null];
}

function deletePool(pool) {
  if (!confirm(`Delete pool ${pool.name} of ${pool.cluster}? Its requests to the autoscaler go; its nodes stay.`)) return;
  act(`Pool ${pool.name} deleted`,
    () => api("DELETE", `clusters/${encodeURIComponent(pool.cluster)}/pools/${encodeURIComponent(pool.name)}`));
}

function poolRow(pool) {
  return el("tr", { "data-pool": `${pool.cluster}/${pool.name}` },
    el("th", { scope: "row" }, pool.name), el("td", {}, pool.cluster), el("td", {}, pool.shape), el("td", {}, poolNodes(pool)),
    el("td", {}, String(pool.coming)), el("td", {}, durationText(pool.scale_up_delay)), el("td", {}, durationText(pool.scale_down_idle)),
    el("td", {}, lastAsk(pool)),
    el("td", { class: "actions" }, el("button", { type: "button", "aria-label": `Delete pool ${pool.name}`,
      onclick: () => deletePool(pool) }, "Delete")));
}

poolForm.addEventListener("submit", (e) => {
  e.preventDefault();
  const body = { name: p.name.value.trim(), shape: p.shape.value.trim(), min_nodes: Number(p.min_nodes.value || 0),
    max_nodes: Number(p.max_nodes.value) };
  for (const field of ["scale_up_delay", "scale_down_idle"]) if (p[field].value.trim()) body[field] = p[field].value.trim();
  act("", async () => {
    let made;
    try {
      made = await api("POST", `clusters/${encodeURIComponent(p.cluster.value)}/pools`, body);
    } catch (error) {
      throw new Error(`Pool ${body.name} was not added: ${error.message}`);
    }
    poolForm.reset();
    return `Pool ${made.name} added to ${made.cluster}: up to ${made.max_nodes} node(s) of ${made.shape}`;
  });
});

function drawClusterChoices(clusters) {
  const chosen = p.cluster.value;
  patch(p.cluster, clusters.map((c) => el("option", { value: c.name, selected: c.name === chosen }, c.name)));
}

live(
  async () => {
    const [clusters, inventory, projects] = await Promise.all([api("GET", "clusters"), api("GET", "inventory"), api("GET", "projects")]);
    const pools = await Promise.all(clusters.clusters.map((c) => api("GET", `clusters/${encodeURIComponent(c.name)}/pools`)));
    return [clusters, inventory, projects, pools.flatMap((answer) => answer.pools)];
  },
  ([clusters, inventory, projects, pools]) => {
    patch(document.querySelector("#clusters tbody"),
      clusters.clusters.map((c) => clusterRow(c, inventory.shapes, projects.projects)));
    patch(document.querySelector("#pools tbody"),
      pools.length ? pools.map(poolRow) : [el("tr", {}, el("td", { colspan: 9, class: "muted" }, "No node pools."))]);
    drawClusterChoices(clusters.clusters);
  },
);

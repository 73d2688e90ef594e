// Clusters: the registered clusters with health, nodes, GPUs and shapes; register and remove.
"use strict";

import { act, api, el, live, patch } from "./api.js";
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

live(
  () => Promise.all([api("GET", "clusters"), api("GET", "inventory"), api("GET", "projects")]),
  ([clusters, inventory, projects]) => {
    patch(document.querySelector("#clusters tbody"),
      clusters.clusters.map((c) => clusterRow(c, inventory.shapes, projects.projects)));
  },
);

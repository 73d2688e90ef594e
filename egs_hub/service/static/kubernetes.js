// The Kubernetes clusters the service knows (GET /clusters), where a page shows them, and
// registering and removing them (admins).
"use strict";

import { api, apiOptional, el } from "./api.js";

// {clusters: [...]} from GET /clusters; an empty list when this service has no such endpoint.
export async function loadClusters() {
  return (await apiOptional("clusters", { clusters: [] })).clusters.filter((c) => c.kind === "kubernetes");
}

export const registerCluster = (body) => api("POST", "clusters", body);
export const removeCluster = (name) => api("DELETE", `clusters/${encodeURIComponent(name)}`);

export const NO_KUBERNETES = "No Kubernetes cluster is configured: GPUs come from this host only.";

export function clustersTable(clusters) {
  if (!clusters.length) return el("p", { class: "muted", id: "no-kubernetes" }, NO_KUBERNETES);
  return el("table", {},
    el("caption", {}, "Registered Kubernetes clusters"),
    el("thead", {}, el("tr", {}, ["Cluster", "Health", "Nodes", "GPUs", "Message"].map((h) => el("th", {}, h)))),
    el("tbody", {}, clusters.map((c) => el("tr", { "data-cluster": c.name },
      el("td", {}, c.name), el("td", { class: `health-${c.health}` }, c.health),
      el("td", {}, c.nodes ?? ""), el("td", {}, c.gpus ?? ""), el("td", {}, c.message || "")))));
}

// Endpoints: serve a model from a workspace's GPUs (POST /endpoints), and the endpoints of the caller's
// workspaces (all of them on the admin page) with their status, replicas and their GPRs, load and
// latency, and the cluster each runs on (none given: the service picks); scale one (POST .../scale) or delete it.
"use strict";

import { act, adminView, api, el, live, localTime, patch } from "./api.js";

const form = document.getElementById("serve-form");
const seconds = (value) => (value === null || value === undefined ? "—"
  : value < 1 ? `${Math.round(value * 1000)} ms` : `${value.toFixed(1)} s`);
const path = (e) => `endpoints/${encodeURIComponent(e.slice)}/${encodeURIComponent(e.name)}`;

form.addEventListener("submit", (e) => {
  e.preventDefault();
  const f = form.elements;
  const body = { slice: f.slice.value, name: f.name.value.trim(), runtime: f.runtime.value,
    gpus: Number(f.gpus.value), min_replicas: Number(f.min_replicas.value), max_replicas: Number(f.max_replicas.value),
    idle_timeout: f.idle_timeout.value.trim() };
  if (f.model.value.trim()) body.model = f.model.value.trim();
  if (f.command.value.trim()) body.command = f.command.value.trim().split(/\s+/);
  // Left empty, the service picks the cluster, and the runtime's own image.
  if (f.cluster.value.trim()) body.cluster = f.cluster.value.trim();
  if (f.image.value.trim()) body.image = f.image.value.trim();
  act("Endpoint made", async () => {
    const made = await api("POST", "endpoints", body);
    form.reset();
    return `Endpoint ${made.name} is ${made.status}: it answers at ${made.url}`;
  });
});

function status(e) {
  const waiting = e.replica_states.filter((r) => r.estimated_start).map((r) => r.estimated_start).sort();
  if (e.status === "pending" && waiting.length) return `pending: GPUs about ${localTime(waiting[0])}`;
  if (e.status === "failed" && e.message) return `failed: ${e.message.split("\n")[0]}`;
  return e.status;
}

function scale(e) {
  const wanted = prompt(`Scale endpoint ${e.name} to how many replicas (${e.min_replicas} to ${e.max_replicas})?`,
    String(Math.max(e.wanted_replicas, 1)));
  if (wanted === null) return;
  act(`Endpoint ${e.name} scaled to ${wanted}`, () => api("POST", `${path(e)}/scale`, { replicas: Number(wanted) }));
}

function remove(e) {
  if (!confirm(`Delete endpoint ${e.name}? Its replicas' GPUs are given back.`)) return;
  act(`Endpoint ${e.name} deleted`, () => api("DELETE", path(e)));
}

live(
  () => Promise.all([api("GET", "endpoints"), api("GET", "slices")]),
  ([endpoints, slices]) => {
    const chosen = form.elements.slice.value;
    patch(form.elements.slice, slices.slices.map((s) => el("option", { value: s.name }, s.name)));
    if (chosen) form.elements.slice.value = chosen;
    const rows = endpoints.endpoints;
    patch(document.querySelector("#endpoints tbody"), rows.map((e) => el("tr", { "data-endpoint": `${e.slice}/${e.name}` },
      el("th", { scope: "row" }, e.name, " ",
        el("span", { class: "muted" }, `${e.runtime} ${e.model}${e.image ? ` in ${e.image}` : ""}`)),
      el("td", {}, e.slice), el("td", {}, e.cluster || el("span", { class: "muted" }, "any")),
      el("td", {}, status(e)),
      el("td", {}, `${e.replicas} ready of ${e.wanted_replicas} (${e.min_replicas} to ${e.max_replicas})`),
      el("td", {}, e.requests_per_second.toFixed(2)),
      el("td", {}, `${seconds(e.latency_p50)} / ${seconds(e.latency_p95)}`), el("td", {}, String(e.errors)),
      el("td", {}, e.replica_states.map((r) => `${r.gpr} ${r.state}`).join(", ")),
      el("td", {}, el("a", { href: e.url }, e.url)),
      el("td", { class: "actions" },
        el("button", { type: "button", "aria-label": `Scale endpoint ${e.name}`, onclick: () => scale(e) }, "Scale"),
        el("button", { type: "button", "aria-label": `Delete endpoint ${e.name}`, onclick: () => remove(e) }, "Delete")))));
    document.getElementById("endpoints-note").textContent = rows.length ? ""
      : adminView ? "No endpoint yet." : "No endpoint in your workspaces yet: serve a model above, or with %egs serve in a notebook.";
  },
);

// The egs-hub portal: the caller's workspaces, asking for GPUs, their GPRs and the GPUs.
"use strict";

import { act, api, apiAll, asNodes, el, hours, isAdmin, live, patch, refresh, span } from "./api.js";
import { FINISHED, asked, gprButtons, when } from "./gpr.js";
import { kubeconfigControls } from "./kubeconfig.js";
import { loadClusters } from "./kubernetes.js";
import { renderRequestChoices, setUpRequestForm } from "./request-form.js";
import { addMember, createSlice, removeMember } from "./slice.js";

function renderGPRs(gprs) {
  const rows = gprs
    .filter((g) => !FINISHED.includes(g.status) || Date.now() - new Date(g.updated_at) < 86400e3)
    .sort((a, b) => b.id - a.id)
    .map((g) => el("tr", { "data-gpr": g.id },
      el("td", {}, g.id), el("td", {}, g.slice), el("td", {}, g.requested_by), el("td", {}, asked(g)),
      el("td", { class: `status-${g.status}` }, g.status), el("td", {}, when(g)),
      el("td", {}, g.bound_gpus.length ? el("code", {}, g.bound_gpus.join(" ")) : ""),
      el("td", {}, gprButtons(g, { admin: isAdmin, denyReason: () => prompt(`Why deny GPR ${g.id}?`, "") }))));
  patch(document.querySelector("#gprs tbody"),
    rows.length ? rows : [el("tr", {}, el("td", { colspan: 8, class: "muted" }, "No GPU requests yet."))]);
}

function renderSlices(slices, clusters) {
  const box = document.getElementById("slices");
  if (!slices.length) {
    patch(box, [el("p", { class: "muted" }, isAdmin
      ? "No workspaces yet: create one below."
      : "You are not in a workspace yet: ask an admin to add you to one.")]);
    return;
  }
  patch(box, slices.map((s) => {
    const members = s.members.map((m) => el("li", {}, m, isAdmin
      ? el("button", { type: "button", "aria-label": `Remove ${m} from ${s.name}`, onclick: () =>
          act(`${m} removed from ${s.name}`, () => removeMember(s.name, m)) }, "×")
      : null));
    const addForm = isAdmin ? el("form", { class: "add-member", onsubmit: (e) => {
      e.preventDefault();
      const form = e.target;
      const user = form.elements.user.value.trim();
      if (user) {
        act(`${user} added to ${s.name}`, async () => {
          await addMember(s.name, user);
          form.reset();
        });
      }
    } }, el("label", {}, "Add member", el("input", { name: "user", required: true, autocomplete: "off",
      "aria-describedby": `members-${s.name}` })),
    el("button", { type: "submit" }, "Add")) : null;
    // A share of a time-sliced GPU is "<GPU UUID>::<k>" (core/sharing.py replica_uuid).
    const shared = s.gpus.filter((uuid) => uuid.includes("::"));
    const gpus = s.gpus.length
      ? [`${s.gpus.length} GPU(s) bound now: `, el("code", {}, s.gpus.join(" ")),
         " — servers started from now on see them; restart a running server to use them.",
         shared.length ? el("strong", { class: "shared-gpus" }, ` ${shared.length} of them are shares of time-sliced ` +
           "GPUs: other workspaces that allow sharing run on the same GPUs, with no memory isolation.") : ""]
      : ["No GPUs bound now."];
    const limits = [
      s.quota.max_gpus ? `max ${s.quota.max_gpus} GPUs at once` : "no GPU quota",
      s.policy.max_duration ? `max ${span(s.policy.max_duration)} per request` : null,
      s.policy.auto_approve_max_gpus ? `approval above ${s.policy.auto_approve_max_gpus} GPUs` : null,
      `max ${s.policy.max_active_gprs} request(s) holding GPUs at once`,
      s.quota.max_gpu_hours
        ? `${hours(s.usage.gpu_hours_week)} of ${hours(s.quota.max_gpu_hours)} GPU-hours used this week`
        : `${hours(s.usage.gpu_hours_week)} GPU-hours used this week`,
      `fair-share factor ${s.usage.fair_share_factor.toFixed(2)}`,
      s.policy.auto_gpr ? `starting a server with GPUs files a GPR from template ${s.policy.auto_gpr}` : null,
      s.policy.gpu_sharing ? "may ask for shares of time-sliced GPUs (gpu_share)" : null,
    ].filter(Boolean).join(" · ");
    return el("div", { class: "card", "data-slice": s.name },
      el("h3", {}, s.display_name || s.name, " ", el("span", { class: "muted" }, `(${s.name}, hub group ${s.group})`)),
      el("p", {}, ...gpus), el("p", { class: "muted" }, limits),
      kubeconfigControls(s.name, s.namespaces, clusters),
      el("div", { id: `members-${s.name}` }, "Members: ",
        s.members.length ? el("ul", {}, members) : el("span", { class: "muted" }, "none")),
      homeVolumes(s),
      addForm);
  }));
}

// slice name -> its GET /slices/{name}/volumes answer (or {error}), asked once per page load and on "Check again":
// listing volumes asks each of its Kubernetes clusters, too much for every refresh.
const volumes = new Map();

function loadVolumes(name) {
  volumes.set(name, null);
  api("GET", `slices/${encodeURIComponent(name)}/volumes`)
    .then((found) => volumes.set(name, found), (error) => volumes.set(name, { error: error.message }))
    .then(() => refresh());
}

function homeVolumes(s) {
  const onKubernetes = Object.keys(s.namespaces).length > 0;
  if (!onKubernetes) {
    return el("p", { class: "muted home-volumes", "data-volumes": s.name },
      "Home directories: servers on this host keep each member's home directory on the host.");
  }
  if (!s.policy.home_volume_size) {
    return el("p", { class: "muted home-volumes", "data-volumes": s.name },
      "Home volumes: none (the workspace's policy gives none); a server's files go with its pod.");
  }
  if (!volumes.has(s.name)) loadVolumes(s.name);
  const found = volumes.get(s.name);
  const again = el("button", { type: "button", "aria-label": `Check ${s.name}'s home volumes again`,
    onclick: () => loadVolumes(s.name) }, "Check again");
  const head = `Home volumes (${s.policy.home_volume_size} each${s.policy.home_volume_class
    ? `, class ${s.policy.home_volume_class}` : ""}): `;
  if (found === null) return el("div", { class: "home-volumes", "data-volumes": s.name }, head, "loading…");
  if (found.error) return el("div", { class: "home-volumes", "data-volumes": s.name }, head, found.error, " ", again);
  const rows = found.volumes.map((v) => el("li", { "data-volume": v.name },
    `${v.user}${v.server ? ` (server ${v.server})` : ""}: ${v.name} in ${v.cluster}/${v.namespace}, `,
    `${v.size ?? "size unknown"}${v.phase ? `, ${v.phase}` : ""}`));
  const unavailable = Object.entries(found.unavailable).map(([c, why]) => el("li", { class: "error" }, `${c}: ${why}`));
  return el("div", { class: "home-volumes", "data-volumes": s.name }, head,
    rows.length || unavailable.length ? el("ul", {}, ...rows, ...unavailable)
      : el("span", { class: "muted" }, "none yet (made at a member's first server start). "),
    again);
}

function renderInventory(inventory) {
  const declared = inventory.clusters.some((c) => c.nodes.some((n) => n.declared));
  patch(document.getElementById("inventory-summary"), asNodes([
    `${inventory.free} of ${inventory.gpus} GPUs free now.`,
    declared ? el("span", { class: "declared" }, " Declared inventory: these GPUs come from config, not NVML.") : ""]));
  const rows = [];
  for (const cluster of inventory.clusters) {
    for (const node of cluster.nodes) {
      for (const gpu of node.gpus) {
        rows.push(el("tr", {},
          el("td", {}, cluster.name), el("td", {}, node.name, node.declared ? el("span", { class: "declared" }, " declared") : ""),
          el("td", {}, el("code", {}, `${gpu.index} ${gpu.uuid}`)), el("td", {}, gpu.product),
          el("td", {}, `${Math.round(gpu.memory_mib / 1024)} GiB`),
          el("td", {}, gpu.slice ? `${gpu.slice} (GPR ${gpu.gpr})`
            : el("span", { class: "muted" }, gpu.bound ? "another workspace's" : "free"))));
      }
    }
  }
  patch(document.querySelector("#inventory tbody"), rows);
}

const sliceForm = document.getElementById("slice-form");
if (sliceForm) {
  sliceForm.addEventListener("submit", (e) => {
    e.preventDefault();
    const f = e.target.elements;
    const body = { name: f.name.value.trim(), display_name: f.display_name.value.trim(),
      members: f.members.value.split(",").map((m) => m.trim()).filter(Boolean), quota: {}, policy: {} };
    if (f.max_gpus.value) body.quota.max_gpus = Number(f.max_gpus.value);
    if (f.max_duration.value.trim()) body.policy.max_duration = f.max_duration.value.trim();
    if (f.auto_approve_max_gpus.value) body.policy.auto_approve_max_gpus = Number(f.auto_approve_max_gpus.value);
    act(`Workspace ${body.name} created`, async () => { await createSlice(body); e.target.reset(); });
  });
}
setUpRequestForm();
live(
  () => Promise.all([api("GET", "slices"), apiAll("gprs", "gprs"), api("GET", "inventory"), loadClusters(),
    api("GET", "templates")]),
  ([slices, gprs, inventory, clusters, templates]) => {
    renderSlices(slices.slices, clusters);
    renderRequestChoices(slices.slices, inventory, templates.templates);
    renderGPRs(gprs.gprs);
    renderInventory(inventory);
  },
);

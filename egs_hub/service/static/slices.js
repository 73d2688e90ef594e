// Slices (workspaces): create, edit, delete; members; quota, policy and namespaces.
"use strict";

import { act, api, durationText, el, hours, live, notify, patch, span } from "./api.js";
import { kubeconfigControls } from "./kubeconfig.js";
import { NO_KUBERNETES, loadClusters } from "./kubernetes.js";
import { addMember, createSlice, deleteSlice, removeMember, updateSlice } from "./slice.js";

const form = document.getElementById("slice-editor");
const heading = document.getElementById("h-editor");
const submit = document.getElementById("editor-submit");
const stop = document.getElementById("editor-cancel");
let editing = null; // the slice name being edited, or null: the form creates one
const latest = new Map(); // slice name -> its latest GET /slices entry (buttons outlive a refresh)
const filter = document.getElementById("slice-filter").elements;

// "cluster: ns-a, ns-b" per line <-> {cluster: [ns-a, ns-b]}
export function parseNamespaces(text) {
  const namespaces = {};
  for (const [i, line] of text.split("\n").entries()) {
    if (!line.trim()) continue;
    const [cluster, names] = line.split(":");
    if (names === undefined || !cluster.trim()) throw new Error(`Namespaces line ${i + 1}: write "cluster: namespace, ..."`);
    namespaces[cluster.trim()] = names.split(",").map((n) => n.trim()).filter(Boolean);
  }
  return namespaces;
}

const namespacesText = (namespaces) => Object.entries(namespaces).map(([c, ns]) => `${c}: ${ns.join(", ")}`).join("\n");

// The body of a create (empty fields left out: the API's defaults) or of an edit (empty
// optional limits sent as null: no limit).
function sliceBody(f, create) {
  const blank = (name) => !f[name].value.trim();
  const number = (name) => (blank(name) ? null : Number(f[name].value));
  const text = (name) => (blank(name) ? null : f[name].value.trim());
  const quota = { max_gpus: number("max_gpus"), max_gpu_hours: number("max_gpu_hours") };
  const policy = {
    max_duration: text("max_duration"), auto_approve_max_gpus: number("auto_approve_max_gpus"),
    share: number("share"), idle_timeout: text("idle_timeout"), max_idle_timeout: text("max_idle_timeout"),
    eviction: f.eviction.value, requeue_evicted: f.requeue_evicted.checked, restart_servers: f.restart_servers.checked,
    gpu_sharing: f.gpu_sharing.checked,
    reject_over_limits: f.reject_over_limits.checked, bind_failure: f.bind_failure.value,
    remediation: f.remediation.value, maintenance_crossing: f.maintenance_crossing.value,
    auto_gpr: text("auto_gpr"), home_volume_class: text("home_volume_class"),
  };
  if (!blank("max_priority")) policy.max_priority = number("max_priority");
  if (!blank("max_active_gprs")) policy.max_active_gprs = number("max_active_gprs");
  const body = { display_name: f.display_name.value.trim(), quota, policy, namespaces: parseNamespaces(f.namespaces.value) };
  if (!create) return { ...body, policy: { ...policy, home_volume_size: text("home_volume_size") } };
  for (const part of [quota, policy]) for (const key of Object.keys(part)) if (part[key] === null) delete part[key];
  policy.home_volume_size = text("home_volume_size"); // empty: none, also when creating (the API's default is 10Gi)
  return { ...body, name: f.name.value.trim(), group: text("group"),
    members: f.members.value.split(",").map((m) => m.trim()).filter(Boolean) };
}

function edit(name) {
  const s = latest.get(name);
  editing = s.name;
  const f = form.elements;
  form.reset();
  f.name.value = s.name;
  f.display_name.value = s.display_name;
  f.group.value = s.group;
  for (const name of ["name", "group", "members"]) f[name].disabled = true;
  f.max_gpus.value = s.quota.max_gpus ?? "";
  f.max_gpu_hours.value = s.quota.max_gpu_hours ?? "";
  for (const name of ["max_duration", "idle_timeout", "max_idle_timeout"]) {
    f[name].value = s.policy[name] === null ? "" : durationText(s.policy[name]);
  }
  for (const name of ["max_priority", "auto_approve_max_gpus", "max_active_gprs", "share", "auto_gpr", "home_volume_size",
    "home_volume_class"]) f[name].value = s.policy[name] ?? "";
  f.eviction.value = s.policy.eviction;
  f.bind_failure.value = s.policy.bind_failure;
  f.remediation.value = s.policy.remediation;
  f.maintenance_crossing.value = s.policy.maintenance_crossing;
  for (const name of ["requeue_evicted", "restart_servers", "reject_over_limits", "gpu_sharing"]) {
    f[name].checked = s.policy[name];
  }
  f.namespaces.value = namespacesText(s.namespaces);
  heading.textContent = `Edit workspace ${s.name}`;
  submit.textContent = "Save changes";
  stop.hidden = false;
  f.display_name.focus();
}

function stopEditing() {
  editing = null;
  form.reset();
  for (const name of ["name", "group", "members"]) form.elements[name].disabled = false;
  heading.textContent = "Create a workspace";
  submit.textContent = "Create workspace";
  stop.hidden = true;
}

function limits(s) {
  const p = s.policy;
  return [
    s.quota.max_gpus ? `max ${s.quota.max_gpus} GPUs at once` : "no GPU quota",
    s.quota.max_gpu_hours ? `${hours(s.usage.gpu_hours_week)} of ${hours(s.quota.max_gpu_hours)} GPU-hours this week`
      : `${hours(s.usage.gpu_hours_week)} GPU-hours this week`,
    p.max_duration ? `max ${span(p.max_duration)} per request` : "no duration limit",
    `priority up to ${p.max_priority}`,
    p.auto_approve_max_gpus ? `approval above ${p.auto_approve_max_gpus} GPUs` : "no approval needed",
    `max ${p.max_active_gprs} active GPR(s)`, `eviction ${p.eviction}`,
    p.requeue_evicted ? "evicted GPRs re-queued" : "evicted GPRs end",
    p.bind_failure === "move" ? "moved off nodes failing pre-checks" : "failed when nodes fail pre-checks",
    { replace: "a failing GPU's node replaced", notify: "told of a failing GPU", off: "failing GPUs: alert only" }[
      p.remediation],
    { ask: null, shorten: "windows crossing a maintenance end at its start", move: "moved off nodes under maintenance" }[
      p.maintenance_crossing],
    p.idle_timeout ? `idle timeout ${span(p.idle_timeout)}` : null,
    p.restart_servers ? "servers restarted on GPU changes" : null,
    p.gpu_sharing ? "may share time-sliced GPUs" : null,
    p.reject_over_limits ? "over-limit GPRs rejected" : null,
    p.auto_gpr ? `a server asking for GPUs files a GPR from template ${p.auto_gpr}` : null,
    p.home_volume_size ? `home volumes ${p.home_volume_size}${p.home_volume_class ? ` (${p.home_volume_class})` : ""}`
      : "no home volumes",
    `fair-share factor ${s.usage.fair_share_factor.toFixed(2)}`,
  ].filter(Boolean).join(" · ");
}

function sliceCard(s, clusters) {
  const members = s.members.map((m) => el("li", {}, m, el("button", { type: "button", "aria-label": `Remove ${m} from ${s.name}`,
    onclick: () => act(`${m} removed from ${s.name}`, () => removeMember(s.name, m)) }, "×")));
  const addForm = el("form", { class: "add-member", onsubmit: (e) => {
    e.preventDefault();
    const input = e.target.elements.user;
    const user = input.value.trim();
    if (user) act(`${user} added to ${s.name}`, async () => { await addMember(s.name, user); input.value = ""; });
  } }, el("label", {}, `Add member to ${s.name}`, el("input", { name: "user", required: true, autocomplete: "off" })),
  el("button", { type: "submit" }, "Add"));
  const namespaces = Object.entries(s.namespaces);
  return el("div", { class: "card", "data-slice": s.name },
    el("h3", {}, s.display_name || s.name, " ", el("span", { class: "muted" }, `(${s.name}, hub group ${s.group})`)),
    el("p", { class: "muted" }, limits(s)),
    el("p", {}, namespaces.length ? `Namespaces: ${namespaces.map(([c, ns]) => `${c}: ${ns.join(", ")}`).join("; ")}`
      : "No namespaces."),
    kubeconfigControls(s.name, s.namespaces, clusters),
    el("p", {}, s.gpus.length ? `${s.gpus.length} GPU(s) bound now.` : "No GPUs bound now."),
    el("div", {}, "Members: ", s.members.length ? el("ul", {}, members) : el("span", { class: "muted" }, "none")),
    addForm,
    el("p", { class: "actions" },
      el("button", { type: "button", "aria-label": `Edit ${s.name}`, onclick: () => edit(s.name) }, "Edit"),
      el("button", { type: "button", "aria-label": `Delete ${s.name}`, onclick: () => {
        if (confirm(`Delete workspace ${s.name}? Its hub group goes too if egs-hub made it.`)) {
          act(`Workspace ${s.name} deleted`, async () => { await deleteSlice(s.name); if (editing === s.name) stopEditing(); });
        }
      } }, "Delete")));
}

let shownSlices = null; // the last GET /slices and clusters, drawn again when the project filter changes

function drawSlices() {
  const { slices, clusters } = shownSlices;
  const shown = slices.filter((s) => !filter.project.value || s.project === filter.project.value);
  patch(document.getElementById("slice-list"), shown.length ? shown.map((s) => sliceCard(s, clusters))
    : [el("p", { class: "muted" }, slices.length ? "No workspaces in this project." : "No workspaces yet: create one below.")]);
}

filter.project.addEventListener("change", () => shownSlices && drawSlices());
document.getElementById("slice-filter").addEventListener("submit", (e) => e.preventDefault());

form.addEventListener("submit", (e) => {
  e.preventDefault();
  let body;
  try {
    body = sliceBody(form.elements, editing === null);
  } catch (error) {
    notify(error.message, true);
    return;
  }
  if (editing === null) {
    act(`Workspace ${body.name} created`, async () => { await createSlice(body); stopEditing(); });
  } else {
    const name = editing;
    act(`Workspace ${name} saved`, async () => { await updateSlice(name, body); stopEditing(); });
  }
});
stop.addEventListener("click", stopEditing);

// "get, list" on "pods, services" of "" (core) and "apps"
function ruleText(rule) {
  const groups = rule.apiGroups.map((g) => (g === "" ? "core" : g)).join(", ");
  return `${rule.verbs.join(", ")} on ${rule.resources.join(", ")} (${groups})`;
}

function roleTemplatesTable(templates) {
  return el("table", { "aria-label": "Role templates" },
    el("thead", {}, el("tr", {}, ...["Template", "Bound to", "May"].map((h) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, ...templates.map((t) => el("tr", { "data-template": t.name },
      el("td", {}, t.name, t.builtin ? el("span", { class: "muted" }, " (built in)") : null),
      el("td", {}, t.subjects.map((s) => `${s.kind} ${s.name}`).join("; ") || "nobody"),
      el("td", {}, el("ul", {}, ...t.rules.map((r) => el("li", {}, ruleText(r)))))))));
}

live(
  () => Promise.all([api("GET", "slices"), loadClusters(), api("GET", "role-templates")]),
  ([slices, clusters, roles]) => {
    patch(document.getElementById("role-templates"), [roleTemplatesTable(roles.role_templates)]);
    latest.clear();
    for (const s of slices.slices) latest.set(s.name, s);
    const chosen = filter.project.value;
    const projects = [...new Set(slices.slices.map((s) => s.project))].sort();
    patch(filter.project, [el("option", { value: "" }, "any"), ...projects.map((p) => el("option", { value: p }, p))]);
    filter.project.value = projects.includes(chosen) ? chosen : "";
    shownSlices = { slices: slices.slices, clusters };
    drawSlices();
    document.getElementById("kubernetes").textContent = clusters.length
      ? `Kubernetes clusters: ${clusters.map((c) => `${c.name} (${c.health})`).join(", ")}. ` +
        "A workspace with namespaces on one has a kubeconfig to download for it."
      : NO_KUBERNETES;
  },
);

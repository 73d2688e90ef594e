// The egs-hub portal: every read and write goes through the REST API v1.
"use strict";

const page = document.body.dataset;
const isAdmin = page.admin === "true";
const REFRESH_MS = 5000;

async function api(method, path, body) {
  const response = await fetch(page.api + path, {
    method,
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-XSRFToken": page.xsrf },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (response.status === 204) return null;
  const data = await response.json().catch(() => ({}));
  if (!response.ok) {
    const field = data.field ? ` (${data.field})` : "";
    throw new Error(`${data.message || response.statusText}${field}`);
  }
  return data;
}

function notify(message, isError = false) {
  const notice = document.getElementById("notice");
  notice.textContent = message;
  notice.className = isError ? "error" : "";
}

async function act(what, fn) {
  try {
    await fn();
    notify(what);
    await refresh();
  } catch (e) {
    notify(e.message, true);
  }
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (value !== undefined && value !== null && value !== false) node.setAttribute(key, value);
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined) node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

const localTime = (iso) => (iso ? new Date(iso).toLocaleString() : "");

function span(seconds) {
  seconds = Math.max(0, Math.round(seconds));
  const d = Math.floor(seconds / 86400), h = Math.floor((seconds % 86400) / 3600);
  const m = Math.floor((seconds % 3600) / 60), s = seconds % 60;
  const parts = [d && `${d}d`, h && `${h}h`, m && `${m}m`, !d && !h && s && `${s}s`].filter(Boolean);
  return parts.join("") || "0s";
}

function asked(gpr) {
  const what = gpr.gpus !== null ? `${gpr.gpus} GPU${gpr.gpus === 1 ? "" : "s"}` : `${gpr.nodes} node(s)`;
  return `${what} · ${span(gpr.duration)}${gpr.shape ? " · " + gpr.shape : ""} · p${gpr.priority}`;
}

function when(gpr) {
  if (gpr.status === "queued") {
    return gpr.estimated_start
      ? `#${gpr.queue_position} · starts ~${localTime(gpr.estimated_start)}`
      : `#${gpr.queue_position} · cannot be placed now`;
  }
  if (gpr.status === "provisioning" || gpr.status === "provisioned") {
    const left = (new Date(gpr.window_end) - Date.now()) / 1000;
    return `${localTime(gpr.window_start)} → ${localTime(gpr.window_end)} (${span(left)} left)`;
  }
  if (gpr.status === "pending-approval") return gpr.status_reason;
  return gpr.ended_at ? `ended ${localTime(gpr.ended_at)}${gpr.end_reason ? " · " + gpr.end_reason : ""}` : "";
}

function gprActions(gpr) {
  const buttons = [];
  if (["provisioning", "provisioned"].includes(gpr.status)) {
    buttons.push(el("button", { type: "button", onclick: () => act(`GPR ${gpr.id} released`,
      () => api("POST", `gprs/${gpr.id}/release`, { reason: "released from the portal" })) }, "Release"));
  }
  if (["pending-approval", "queued"].includes(gpr.status)) {
    buttons.push(el("button", { type: "button", onclick: () => act(`GPR ${gpr.id} cancelled`,
      () => api("DELETE", `gprs/${gpr.id}`)) }, "Cancel"));
  }
  if (isAdmin && gpr.status === "pending-approval") {
    buttons.push(el("button", { type: "button", class: "primary", onclick: () => act(`GPR ${gpr.id} approved`,
      () => api("POST", `gprs/${gpr.id}/approve`, {})) }, "Approve"));
    buttons.push(el("button", { type: "button", onclick: () => {
      const reason = prompt(`Why deny GPR ${gpr.id}?`, "");
      if (reason !== null) act(`GPR ${gpr.id} denied`, () => api("POST", `gprs/${gpr.id}/deny`, { reason }));
    } }, "Deny"));
  }
  return buttons;
}

function renderGPRs(gprs) {
  const rows = gprs
    .filter((g) => !["complete", "cancelled", "rejected", "failed"].includes(g.status) ||
      Date.now() - new Date(g.updated_at) < 86400e3)
    .sort((a, b) => b.id - a.id)
    .map((g) => el("tr", { "data-gpr": g.id },
      el("td", {}, g.id), el("td", {}, g.slice), el("td", {}, g.requested_by), el("td", {}, asked(g)),
      el("td", { class: `status-${g.status}` }, g.status), el("td", {}, when(g)),
      el("td", {}, g.bound_gpus.length ? el("code", {}, g.bound_gpus.join(" ")) : ""),
      el("td", {}, gprActions(g))));
  document.querySelector("#gprs tbody").replaceChildren(
    ...(rows.length ? rows : [el("tr", {}, el("td", { colspan: 8, class: "muted" }, "No GPU requests yet."))]));
}

function renderSlices(slices) {
  const box = document.getElementById("slices");
  if (!slices.length) {
    box.replaceChildren(el("p", { class: "muted" }, isAdmin
      ? "No workspaces yet: create one below."
      : "You are not in a workspace yet: ask an admin to add you to one."));
    return;
  }
  box.replaceChildren(...slices.map((s) => {
    const members = s.members.map((m) => el("li", {}, m, isAdmin
      ? el("button", { type: "button", "aria-label": `Remove ${m} from ${s.name}`, onclick: () =>
          act(`${m} removed from ${s.name}`, () => api("DELETE", `slices/${s.name}/members/${encodeURIComponent(m)}`)) }, "×")
      : null));
    const addForm = isAdmin ? el("form", { onsubmit: (e) => {
      e.preventDefault();
      const user = e.target.elements.user.value.trim();
      if (user) act(`${user} added to ${s.name}`, () => api("PUT", `slices/${s.name}/members/${encodeURIComponent(user)}`));
    } }, el("label", {}, "Add member", el("input", { name: "user", required: true })), el("button", { type: "submit" }, "Add")) : null;
    const gpus = s.gpus.length
      ? [`${s.gpus.length} GPU(s) bound now: `, el("code", {}, s.gpus.join(" ")),
         " — servers started from now on see them; restart a running server to use them."]
      : ["No GPUs bound now."];
    const limits = [
      s.quota.max_gpus ? `max ${s.quota.max_gpus} GPUs at once` : "no GPU quota",
      s.policy.max_duration ? `max ${span(s.policy.max_duration)} per request` : null,
      s.policy.auto_approve_max_gpus ? `approval above ${s.policy.auto_approve_max_gpus} GPUs` : null,
      `${s.policy.max_active_gprs} active request(s)`,
    ].filter(Boolean).join(" · ");
    return el("div", { class: "card", "data-slice": s.name },
      el("h3", {}, s.display_name || s.name, " ", el("span", { class: "muted" }, `(${s.name}, hub group ${s.group})`)),
      el("p", {}, ...gpus), el("p", { class: "muted" }, limits),
      el("div", {}, "Members: ", s.members.length ? el("ul", {}, members) : el("span", { class: "muted" }, "none")),
      addForm);
  }));
  const select = document.querySelector("#request-form select[name=slice]");
  const chosen = select.value;
  select.replaceChildren(...slices.map((s) => el("option", { value: s.name }, s.display_name || s.name)));
  if (slices.some((s) => s.name === chosen)) select.value = chosen;
}

function renderInventory(inventory) {
  const declared = inventory.clusters.some((c) => c.nodes.some((n) => n.declared));
  document.getElementById("inventory-summary").replaceChildren(
    `${inventory.free} of ${inventory.gpus} GPUs free now.`,
    declared ? el("span", { class: "declared" }, " Declared inventory: these GPUs come from config, not NVML.") : "");
  const rows = [];
  for (const cluster of inventory.clusters) {
    for (const node of cluster.nodes) {
      for (const gpu of node.gpus) {
        rows.push(el("tr", {},
          el("td", {}, cluster.name), el("td", {}, node.name, node.declared ? el("span", { class: "declared" }, " declared") : ""),
          el("td", {}, el("code", {}, `${gpu.index} ${gpu.uuid}`)), el("td", {}, gpu.product),
          el("td", {}, `${Math.round(gpu.memory_mib / 1024)} GiB`),
          el("td", {}, gpu.slice ? `${gpu.slice} (GPR ${gpu.gpr})` : el("span", { class: "muted" }, "free"))));
      }
    }
  }
  document.querySelector("#inventory tbody").replaceChildren(...rows);
  const shapes = document.querySelector("#request-form select[name=shape]");
  const chosen = shapes.value;
  shapes.replaceChildren(el("option", { value: "" }, "any"),
    ...inventory.shapes.map((s) => el("option", { value: s.name }, `${s.name} (${s.cluster})`)));
  shapes.value = chosen;
}

function requestBody(form) {
  const f = form.elements;
  const body = { slice: f.slice.value, gpus: Number(f.gpus.value), duration: f.duration.value.trim() };
  if (f.priority.value) body.priority = Number(f.priority.value);
  if (f.shape.value) body.shape = f.shape.value;
  if (f.start_after && f.start_after.value) body.start_after = new Date(f.start_after.value).toISOString();
  return body;
}

async function showWaitTimes() {
  const form = document.getElementById("request-form");
  try {
    const body = requestBody(form);
    delete body.name;
    const result = await api("POST", "wait-times", body);
    const table = document.getElementById("wait-times");
    table.hidden = false;
    table.tBodies[0].replaceChildren(...result.options.map((o, i) => el("tr", {},
      el("td", {}, el("input", { type: "radio", name: "pick", value: o.shape.name, checked: i === 0,
        "aria-label": `${o.cluster} ${o.shape.name}`, onchange: () => { form.elements.shape.value = o.shape.name; } })),
      el("td", {}, o.cluster), el("td", {}, o.shape.name), el("td", {}, localTime(o.estimated_start)),
      el("td", {}, o.wait_seconds ? span(o.wait_seconds) : "now"))));
    if (result.options.length) form.elements.shape.value = result.options[0].shape.name;
    document.getElementById("approval-note").textContent = result.needs_approval.length
      ? `An admin must approve this: ${result.needs_approval.join("; ")}.` : "";
    notify("");
  } catch (e) {
    notify(e.message, true);
  }
}

async function refresh() {
  try {
    const [slices, gprs, inventory] = await Promise.all([api("GET", "slices"), api("GET", "gprs"), api("GET", "inventory")]);
    renderSlices(slices.slices);
    renderGPRs(gprs.gprs);
    renderInventory(inventory);
  } catch (e) {
    notify(`Could not refresh: ${e.message}`, true);
  }
}

document.getElementById("wait-times-button").addEventListener("click", showWaitTimes);
document.getElementById("request-form").addEventListener("submit", (e) => {
  e.preventDefault();
  act("GPU request submitted", async () => {
    const gpr = await api("POST", "gprs", requestBody(e.target));
    notify(`GPR ${gpr.id} is ${gpr.status}`);
  });
});
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
    act(`Workspace ${body.name} created`, async () => { await api("POST", "slices", body); e.target.reset(); });
  });
}
refresh();
setInterval(() => { if (!document.hidden) refresh(); }, REFRESH_MS);

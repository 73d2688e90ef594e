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

// Run one user action: on success show `what`, or the message `fn` returns (for
// example "GPR 7 is queued"), then refresh; on failure show the error.
async function act(what, fn) {
  try {
    const message = await fn();
    notify(typeof message === "string" && message ? message : what);
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

// Refreshes every REFRESH_MS must not destroy what someone is doing: a focused
// button, a half-typed "Add member", an open select. So the page is never rebuilt;
// new content is patched into the old. An element is reused only when its tag and
// every attribute are the same (its event handlers then act on the same GPR or
// slice, which the attributes name); its children are patched the same way; text
// changes in place; anything else is replaced. Input values are properties, not
// attributes, so typed text survives.
function sameElement(a, b) {
  if (a.nodeType !== b.nodeType) return false;
  if (a.nodeType === Node.TEXT_NODE) return true;
  if (a.nodeType !== Node.ELEMENT_NODE || a.tagName !== b.tagName) return false;
  if (a.attributes.length !== b.attributes.length) return false;
  for (const { name, value } of b.attributes) if (a.getAttribute(name) !== value) return false;
  return true;
}

function patch(parent, wanted) {
  const old = [...parent.childNodes];
  let next = 0;
  for (const node of wanted) {
    const found = old.findIndex((o, i) => i >= next && sameElement(o, node));
    if (found < 0) {
      parent.insertBefore(node, old[next] || null);
      continue;
    }
    for (const stale of old.slice(next, found)) stale.remove();
    const kept = old[found];
    if (kept.nodeType === Node.TEXT_NODE) {
      if (kept.data !== node.data) kept.data = node.data;
    } else {
      patch(kept, [...node.childNodes]);
    }
    next = found + 1;
  }
  for (const stale of old.slice(next)) stale.remove();
}

const asNodes = (children) => children.flat().filter((c) => c !== null && c !== undefined && c !== "")
  .map((c) => (c instanceof Node ? c : document.createTextNode(String(c))));

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
    buttons.push(el("button", { type: "button", "aria-label": `Release GPR ${gpr.id}`, onclick: () => act(`GPR ${gpr.id} released`,
      () => api("POST", `gprs/${gpr.id}/release`, { reason: "released from the portal" })) }, "Release"));
  }
  if (["pending-approval", "queued"].includes(gpr.status)) {
    buttons.push(el("button", { type: "button", "aria-label": `Cancel GPR ${gpr.id}`, onclick: () => act(`GPR ${gpr.id} cancelled`,
      () => api("DELETE", `gprs/${gpr.id}`)) }, "Cancel"));
  }
  if (isAdmin && gpr.status === "pending-approval") {
    buttons.push(el("button", { type: "button", class: "primary", "aria-label": `Approve GPR ${gpr.id}`, onclick: () => act(`GPR ${gpr.id} approved`,
      () => api("POST", `gprs/${gpr.id}/approve`, {})) }, "Approve"));
    buttons.push(el("button", { type: "button", "aria-label": `Deny GPR ${gpr.id}`, onclick: () => {
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
  patch(document.querySelector("#gprs tbody"),
    rows.length ? rows : [el("tr", {}, el("td", { colspan: 8, class: "muted" }, "No GPU requests yet."))]);
}

function renderSlices(slices) {
  const box = document.getElementById("slices");
  const select = document.querySelector("#request-form select[name=slice]");
  patch(select, slices.map((s) => el("option", { value: s.name }, s.display_name || s.name)));
  if (!slices.length) {
    patch(box, [el("p", { class: "muted" }, isAdmin
      ? "No workspaces yet: create one below."
      : "You are not in a workspace yet: ask an admin to add you to one.")]);
    return;
  }
  patch(box, slices.map((s) => {
    const members = s.members.map((m) => el("li", {}, m, isAdmin
      ? el("button", { type: "button", "aria-label": `Remove ${m} from ${s.name}`, onclick: () =>
          act(`${m} removed from ${s.name}`, () => api("DELETE", `slices/${s.name}/members/${encodeURIComponent(m)}`)) }, "×")
      : null));
    const addForm = isAdmin ? el("form", { class: "add-member", onsubmit: (e) => {
      e.preventDefault();
      const form = e.target;
      const user = form.elements.user.value.trim();
      if (user) {
        act(`${user} added to ${s.name}`, async () => {
          await api("PUT", `slices/${s.name}/members/${encodeURIComponent(user)}`);
          form.reset();
        });
      }
    } }, el("label", {}, "Add member", el("input", { name: "user", required: true, autocomplete: "off",
      "aria-describedby": `members-${s.name}` })),
    el("button", { type: "submit" }, "Add")) : null;
    const gpus = s.gpus.length
      ? [`${s.gpus.length} GPU(s) bound now: `, el("code", {}, s.gpus.join(" ")),
         " — servers started from now on see them; restart a running server to use them."]
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
    ].filter(Boolean).join(" · ");
    return el("div", { class: "card", "data-slice": s.name },
      el("h3", {}, s.display_name || s.name, " ", el("span", { class: "muted" }, `(${s.name}, hub group ${s.group})`)),
      el("p", {}, ...gpus), el("p", { class: "muted" }, limits),
      el("div", { id: `members-${s.name}` }, "Members: ",
        s.members.length ? el("ul", {}, members) : el("span", { class: "muted" }, "none")),
      addForm);
  }));
}

function hours(value) {
  return Number(value.toFixed(2)).toString();
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
          el("td", {}, gpu.slice ? `${gpu.slice} (GPR ${gpu.gpr})` : el("span", { class: "muted" }, "free"))));
      }
    }
  }
  patch(document.querySelector("#inventory tbody"), rows);
  patch(document.querySelector("#request-form select[name=shape]"), [el("option", { value: "" }, "any"),
    ...inventory.shapes.map((s) => el("option", { value: s.name }, `${s.name} (${s.cluster})`))]);
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
    // Every shape that could serve the request, whatever the Shape field says: the
    // table is where one is picked (asking again must not narrow it to the last pick).
    const body = requestBody(form);
    delete body.shape;
    const result = await api("POST", "wait-times", body);
    const table = document.getElementById("wait-times");
    const wanted = form.elements.shape.value;
    const picked = result.options.some((o) => o.shape.name === wanted) ? wanted : result.options[0]?.shape.name;
    table.tBodies[0].replaceChildren(...result.options.map((o) => el("tr", {},
      el("td", {}, el("input", { type: "radio", name: "pick", value: o.shape.name, checked: o.shape.name === picked,
        "aria-label": `${o.cluster} ${o.shape.name}`, onchange: () => { form.elements.shape.value = o.shape.name; } })),
      el("td", {}, o.cluster), el("td", {}, o.shape.name), el("td", {}, localTime(o.estimated_start)),
      el("td", {}, o.wait_seconds ? span(o.wait_seconds) : "now"))));
    table.hidden = false;
    if (picked) form.elements.shape.value = picked;
    document.getElementById("approval-note").textContent = result.needs_approval.length
      ? `An admin must approve this: ${result.needs_approval.join("; ")}.` : "";
    notify("");
  } catch (e) {
    notify(e.message, true);
  }
}

// Refreshes overlap (the timer's and an action's); only the latest one is drawn.
let refreshes = 0;
let refreshFailed = false;

async function refresh() {
  const mine = ++refreshes;
  try {
    const [slices, gprs, inventory] = await Promise.all([api("GET", "slices"), api("GET", "gprs"), api("GET", "inventory")]);
    if (mine !== refreshes) return;
    renderSlices(slices.slices);
    renderGPRs(gprs.gprs);
    renderInventory(inventory);
    document.getElementById("updated").textContent =
      `Updated ${new Date().toLocaleTimeString()}; refreshes every ${REFRESH_MS / 1000} s.`;
    if (refreshFailed) notify("");
    refreshFailed = false;
  } catch (e) {
    if (mine !== refreshes) return;
    refreshFailed = true;
    notify(`Could not refresh: ${e.message}`, true);
  }
}

document.getElementById("wait-times-button").addEventListener("click", showWaitTimes);
document.getElementById("request-form").addEventListener("submit", (e) => {
  e.preventDefault();
  act("GPU request submitted", async () => {
    const gpr = await api("POST", "gprs", requestBody(e.target));
    return `GPR ${gpr.id} is ${gpr.status}`;
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

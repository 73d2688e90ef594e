// The "Ask for GPUs" form with its wait-time table (templates/_request_form.html), on every
// page that has it.
"use strict";

import { act, api, el, localTime, notify, patch, span } from "./api.js";

export function requestBody(form) {
  const f = form.elements;
  const body = { slice: f.slice.value, gpus: Number(f.gpus.value), duration: f.duration.value.trim() };
  if (f.priority.value) body.priority = Number(f.priority.value);
  if (f.shape.value) body.shape = f.shape.value;
  if (f.start_after && f.start_after.value) body.start_after = new Date(f.start_after.value).toISOString();
  return body;
}

async function showWaitTimes(form) {
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

export function setUpRequestForm() {
  const form = document.getElementById("request-form");
  document.getElementById("wait-times-button").addEventListener("click", () => showWaitTimes(form));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    act("GPU request submitted", async () => {
      const gpr = await api("POST", "gprs", requestBody(form));
      return `GPR ${gpr.id} is ${gpr.status}`;
    });
  });
}

// The form's workspace and shape choices: `slices` from GET /slices, `inventory` from GET /inventory.
export function renderRequestChoices(slices, inventory) {
  const form = document.getElementById("request-form");
  patch(form.elements.slice, slices.map((s) => el("option", { value: s.name }, s.display_name || s.name)));
  patch(form.elements.shape, [el("option", { value: "" }, "any"),
    ...inventory.shapes.map((s) => el("option", { value: s.name }, `${s.name} (${s.cluster})`))]);
}

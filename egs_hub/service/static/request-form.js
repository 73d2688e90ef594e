// The "Ask for GPUs" form with its wait-time table (templates/_request_form.html), on every
// page that has it.
"use strict";

import { act, api, durationText, el, localTime, notify, patch, span } from "./api.js";

// GET /templates (the ones the caller's slices may use) and the slices' projects, by name.
let templates = new Map();
let projectOf = new Map();
// The form's values a template filled in: a field still holding its template's value is left
// out of the body, so the template gives it exactly (a whole-node template keeps its nodes).
let filled = {};

const money = (value) => (value === null ? "no price" : value.toFixed(2));

function pickedTemplate(form) {
  return templates.get(form.elements.template.value);
}

export function requestBody(form) {
  const f = form.elements;
  const body = { slice: f.slice.value };
  const template = pickedTemplate(form);
  if (template) body.template = template.name;
  const given = (name, value) => !template || value !== filled[name];
  if (given("gpus", f.gpus.value)) body.gpus = Number(f.gpus.value);
  if (given("duration", f.duration.value.trim())) body.duration = f.duration.value.trim();
  if (f.priority.value && given("priority", f.priority.value)) body.priority = Number(f.priority.value);
  if (f.shape.value) body.shape = f.shape.value;
  if (f.start_after && f.start_after.value) body.start_after = new Date(f.start_after.value).toISOString();
  return body;
}

// Fill the form from the picked template (its size, duration and priority), noting what it filled.
function fillFromTemplate(form) {
  const f = form.elements;
  const template = pickedTemplate(form);
  filled = {};
  if (!template) return;
  filled = {
    gpus: template.gpus ? String(template.gpus) : f.gpus.value,
    duration: durationText(template.duration),
    priority: String(template.priority ?? 101),
  };
  for (const [name, value] of Object.entries(filled)) f[name].value = value;
  const described = [template.description, template.nodes ? `${template.nodes} whole node(s)` : "",
    template.shape ? `shape ${template.shape}` : "", template.cluster ? `cluster ${template.cluster}` : ""];
  notify(`Template ${template.name}: ${described.filter(Boolean).join("; ")}`);
}

function usableIn(template, sliceName) {
  if (template.slice) return template.slice === sliceName;
  return !template.project || template.project === projectOf.get(sliceName);
}

function renderTemplateChoices(form) {
  const sliceName = form.elements.slice.value;
  const usable = [...templates.values()].filter((t) => usableIn(t, sliceName));
  patch(form.elements.template, [el("option", { value: "" }, "none"),
    ...usable.map((t) => el("option", { value: t.name }, t.description ? `${t.name}: ${t.description}` : t.name))]);
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
      el("td", {}, o.wait_seconds ? span(o.wait_seconds) : "now"),
      el("td", {}, money(o.cost_per_hour)), el("td", {}, money(o.estimated_cost)))));
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
  form.elements.template.addEventListener("change", () => fillFromTemplate(form));
  form.elements.slice.addEventListener("change", () => renderTemplateChoices(form));
  document.getElementById("wait-times-button").addEventListener("click", () => showWaitTimes(form));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    act("GPU request submitted", async () => {
      const gpr = await api("POST", "gprs", requestBody(form));
      return `GPR ${gpr.id} is ${gpr.status}`;
    });
  });
}

// The form's workspace, template and shape choices: `slices` from GET /slices, `inventory` from
// GET /inventory, `templateList` from GET /templates.
export function renderRequestChoices(slices, inventory, templateList) {
  const form = document.getElementById("request-form");
  patch(form.elements.slice, slices.map((s) => el("option", { value: s.name }, s.display_name || s.name)));
  projectOf = new Map(slices.map((s) => [s.name, s.project]));
  templates = new Map(templateList.map((t) => [t.name, t]));
  renderTemplateChoices(form);
  patch(form.elements.shape, [el("option", { value: "" }, "any"),
    ...inventory.shapes.map((s) => el("option", { value: s.name }, `${s.name} (${s.cluster})`))]);
}

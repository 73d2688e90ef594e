// A small inline SVG line chart of one GPU metric over time (no library, no inline styles).
"use strict";

import { el } from "./api.js";

const WIDTH = 600, HEIGHT = 160, PAD = 36;

// points: [{time, value}] with value null where there was no reading; unit: "%", "°C", ...
export function lineChart(points, { label, unit, max = null }) {
  const known = points.filter((p) => p.value !== null && p.value !== undefined);
  if (!known.length) return el("p", { class: "muted" }, `No ${label.toLowerCase()} readings in this range.`);
  const times = known.map((p) => new Date(p.time).getTime());
  const t0 = Math.min(...times), t1 = Math.max(...times, t0 + 1);
  const top = max ?? Math.max(...known.map((p) => p.value), 1);
  const x = (t) => PAD + ((WIDTH - 2 * PAD) * (t - t0)) / (t1 - t0);
  const y = (v) => HEIGHT - PAD / 2 - ((HEIGHT - PAD) * v) / top;
  const line = known.map((p) => `${x(new Date(p.time).getTime()).toFixed(1)},${y(p.value).toFixed(1)}`).join(" ");
  const lastPoint = known[known.length - 1];
  const summary = `${label}: ${known.length} points from ${new Date(t0).toLocaleTimeString()} to ` +
    `${new Date(t1).toLocaleTimeString()}, last ${Math.round(lastPoint.value)}${unit}`;
  return el("svg", { class: "chart", viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: "img", "aria-label": summary },
    el("title", {}, summary),
    el("line", { class: "axis", x1: PAD, y1: y(0), x2: WIDTH - PAD, y2: y(0) }),
    el("line", { class: "axis", x1: PAD, y1: y(top), x2: PAD, y2: y(0) }),
    el("text", { x: 2, y: y(top) + 4 }, `${Math.round(top)}${unit}`),
    el("text", { x: 2, y: y(0) }, `0${unit}`),
    el("text", { x: PAD, y: HEIGHT - 2 }, new Date(t0).toLocaleTimeString()),
    el("text", { x: WIDTH - PAD, y: HEIGHT - 2, "text-anchor": "end" }, new Date(t1).toLocaleTimeString()),
    el("polyline", { class: "series", points: line }));
}

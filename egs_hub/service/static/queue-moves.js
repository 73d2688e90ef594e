// Moving a queued GPR one place up or down is a priority change (core/queue.py): the queue is
// ordered by band (high first), then the slice's fair-share factor (higher first), then
// priority (higher first), then submit time. Pure functions over GET /queue entries.
"use strict";

const BAND_WIDTH = 100;
const bandOf = (priority) => Math.floor((priority - 1) / BAND_WIDTH);
const lowest = (band) => band * BAND_WIDTH + 1;
const highest = (band) => band * BAND_WIDTH + BAND_WIDTH;
const clamp = (value, band) => Math.min(Math.max(value, lowest(band)), highest(band));

// The priority that puts `gpr` just ahead of `ahead` (the entry before it), nearest its own;
// null when no priority can (`ahead` is in the high band with a higher fair-share factor).
export function priorityToPass(gpr, ahead) {
  const band = bandOf(ahead.priority);
  if (gpr.fair_share_factor > ahead.fair_share_factor) return clamp(gpr.priority, band);
  if (gpr.fair_share_factor === ahead.fair_share_factor && ahead.priority < highest(band)) return ahead.priority + 1;
  return band < 2 ? lowest(band + 1) : null;
}

// The priority that puts `gpr` just behind `behind` (the entry after it); null when none can.
export function priorityToFallBehind(gpr, behind) {
  const band = bandOf(behind.priority);
  if (gpr.fair_share_factor < behind.fair_share_factor) return clamp(gpr.priority, band);
  if (gpr.fair_share_factor === behind.fair_share_factor && behind.priority > lowest(band)) return behind.priority - 1;
  return band > 0 ? highest(band - 1) : null;
}

/**
 * Text for people: spans of time ("1h12m"), clock times in the browser's time zone
 * ("14:20"), GPU counts and readings. No I/O; ``now`` is always a parameter.
 */

const MINUTE = 60;
const HOUR = 3600;
const DAY = 86400;

/**
 * A span of seconds, largest units first: ``2d3h``, ``1h12m``, ``45m``, ``30s``.
 * Seconds show only below an hour, or always with ``precise`` (a countdown).
 */
export function formatSpan(seconds: number, precise = false): string {
  const total = Math.max(0, Math.round(seconds));
  const d = Math.floor(total / DAY);
  const h = Math.floor((total % DAY) / HOUR);
  const m = Math.floor((total % HOUR) / MINUTE);
  const s = total % MINUTE;
  const parts: string[] = [];
  if (d) {
    parts.push(`${d}d`);
  }
  if (h) {
    parts.push(`${h}h`);
  }
  if (m) {
    parts.push(`${m}m`);
  }
  if (s && (precise || (!d && !h))) {
    parts.push(`${String(s).padStart(parts.length ? 2 : 1, '0')}s`);
  }
  return parts.join('') || '0s';
}

/** Seconds from ``now`` (ms since the epoch) until ``iso``; negative when it has passed. */
export function secondsUntil(iso: string, now: number): number {
  return (Date.parse(iso) - now) / 1000;
}

const pad = (n: number): string => String(n).padStart(2, '0');

/**
 * A clock time in the browser's time zone: ``14:20`` on the day of ``now``,
 * ``Tue 14:20`` within a week, else ``2024-05-14 14:20``.
 */
export function formatClock(iso: string, now: number): string {
  const when = new Date(iso);
  const today = new Date(now);
  const hm = `${pad(when.getHours())}:${pad(when.getMinutes())}`;
  if (when.toDateString() === today.toDateString()) {
    return hm;
  }
  if (Math.abs(when.getTime() - now) < 6 * DAY * 1000) {
    return `${when.toLocaleDateString('en-US', { weekday: 'short' })} ${hm}`;
  }
  return `${when.getFullYear()}-${pad(when.getMonth() + 1)}-${pad(when.getDate())} ${hm}`;
}

/** ``2 GPUs``, ``1 GPU``, ``3 nodes``. */
export function plural(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? '' : 's'}`;
}

/** A GPU model as people say it: ``NVIDIA H100 80GB HBM3`` -> ``H100 80GB HBM3``. */
export function shortModel(model: string): string {
  return model.replace(/^NVIDIA\s+/i, '').trim() || model;
}

/** A reading with its unit, or an en dash when the source gave none. */
export function formatReading(value: number | null, unit: string, digits = 0): string {
  return value === null || value === undefined ? '–' : `${value.toFixed(digits)}${unit}`;
}

/** MiB as GiB with one decimal: ``40.5 GiB``. */
export function formatMemory(mib: number | null): string {
  return mib === null || mib === undefined ? '–' : `${(mib / 1024).toFixed(1)} GiB`;
}

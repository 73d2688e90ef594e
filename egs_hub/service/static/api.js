// What every egs-hub page shares: REST API v1 calls, building and patching the DOM,
// times in the browser's zone, notices, and the live refresh loop.
"use strict";

export const page = document.body.dataset;
export const isAdmin = page.admin === "true";
// "admin": an admin page (every slice, admin actions); "user": the caller's slices, no admin actions.
export const adminView = page.view === "admin" && isAdmin;
export const REFRESH_MS = 5000;

export class APIError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export async function api(method, path, body) {
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
    throw new APIError(response.status, `${data.message || response.statusText}${field}`);
  }
  return data;
}

// GET path, or `missing` when the service answers 404 (an endpoint this service does not have).
export async function apiOptional(path, missing = null) {
  try {
    return await api("GET", path);
  } catch (e) {
    if (e instanceof APIError && e.status === 404) return missing;
    throw e;
  }
}

// GET a list endpoint (gprs, events, queue, alerts, workloads) page by page, following its
// next_cursor: one answer whose `key` holds every page's items. `pages`: stop after this many (the
// answer's next_cursor then says where the rest starts, else it is null); `backwards`: pages go back
// in time and each lists its items oldest first (events), so a later page's items go first;
// `limit`: items per page (the endpoint's default when left out).
export async function apiAll(path, key, { pages = Infinity, backwards = false, limit } = {}) {
  const [base, search = ""] = path.split("?");
  const params = new URLSearchParams(search);
  if (limit !== undefined) params.set("limit", String(limit));
  let answer = null;
  let items = [];
  for (let n = 0; n < pages && (answer === null || answer.next_cursor); n++) {
    if (answer) params.set("cursor", answer.next_cursor);
    const text = params.toString();
    answer = await api("GET", text ? `${base}?${text}` : base);
    items = backwards ? [...answer[key], ...items] : [...items, ...answer[key]];
  }
  return { ...answer, [key]: items };
}

export function query(params) {
  const pairs = Object.entries(params).filter(([, v]) => v !== undefined && v !== null && v !== "");
  return pairs.length ? "?" + new URLSearchParams(pairs).toString() : "";
}

export function notify(message, isError = false) {
  const notice = document.getElementById("notice");
  notice.textContent = message;
  notice.className = isError ? "error" : "";
}

const SVG_NS = "http://www.w3.org/2000/svg";
const SVG_TAGS = new Set(["svg", "g", "polyline", "line", "rect", "text", "title", "path"]);

// el(tag, attrs, ...children): "on*" attributes are listeners, "style" an object set through
// the CSSOM (the CSP forbids style attributes), false/null/undefined are left out.
export function el(tag, attrs = {}, ...children) {
  const node = SVG_TAGS.has(tag) ? document.createElementNS(SVG_NS, tag) : document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "style") Object.assign(node.style, value);
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

export function patch(parent, wanted) {
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

export const asNodes = (children) => children.flat().filter((c) => c !== null && c !== undefined && c !== "")
  .map((c) => (c instanceof Node ? c : document.createTextNode(String(c))));

export const localTime = (iso) => (iso ? new Date(iso).toLocaleString() : "");

export function span(seconds) {
  seconds = Math.max(0, Math.round(seconds));
  const d = Math.floor(seconds / 86400), h = Math.floor((seconds % 86400) / 3600);
  const m = Math.floor((seconds % 3600) / 60), s = seconds % 60;
  const parts = [d && `${d}d`, h && `${h}h`, m && `${m}m`, !d && !h && s && `${s}s`].filter(Boolean);
  return parts.join("") || "0s";
}

export function hours(value) {
  return Number(value.toFixed(2)).toString();
}

// The live loop of a page: `load()` fetches (API calls only), `draw(data)` patches the page.
// Loads overlap (the timer's and an action's); only the latest one is drawn.
let refreshNow = async () => {};

export function live(load, draw) {
  let loads = 0;
  let failed = false;
  refreshNow = async () => {
    const mine = ++loads;
    try {
      const data = await load();
      if (mine !== loads) return;
      draw(data);
      document.getElementById("updated").textContent =
        `Updated ${new Date().toLocaleTimeString()}; refreshes every ${REFRESH_MS / 1000} s.`;
      if (failed) notify("");
      failed = false;
    } catch (e) {
      if (mine !== loads) return;
      failed = true;
      notify(`Could not refresh: ${e.message}`, true);
    }
  };
  refreshNow();
  setInterval(() => { if (!document.hidden) refreshNow(); }, REFRESH_MS);
  return refreshNow;
}

export const refresh = () => refreshNow();

// Run one user action: on success show `what`, or the message `fn` returns (for
// example "GPR 7 is queued"), then refresh; on failure show the error.
export async function act(what, fn) {
  try {
    const message = await fn();
    notify(typeof message === "string" && message ? message : what);
    await refreshNow();
  } catch (e) {
    notify(e.message, true);
  }
}

// Seconds as the API takes a duration back, exactly: "1d2h30m", "45m", "90s" -> "1m30s".
export function durationText(seconds) {
  const d = Math.floor(seconds / 86400), h = Math.floor((seconds % 86400) / 3600);
  const m = Math.floor((seconds % 3600) / 60), s = seconds % 60;
  return [d && `${d}d`, h && `${h}h`, m && `${m}m`, s && `${s}s`].filter(Boolean).join("") || "0s";
}

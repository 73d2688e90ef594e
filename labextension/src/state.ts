/**
 * What the sidebar shows, derived from API answers: per slice its *holding* GPRs (GPUs
 * bound, or being bound or unbound), *waiting* GPRs (pending approval or queued) and
 * recent *history* (ended); the status bar's one line; GPUs hottest first; and the
 * notifications due (notices). Pure: no I/O, ``now`` (ms since the epoch) is a parameter.
 */
import { formatClock, formatSpan, plural, secondsUntil, shortModel } from './format';
import { IEndpoint, IGpr, IGpu, GprStatus, ISlice } from './tokens';

export const HOLDING: readonly GprStatus[] = ['provisioning', 'provisioned', 'releasing'];
export const WAITING: readonly GprStatus[] = ['pending-approval', 'queued'];
export const HISTORY_LENGTH = 5;
/** How long before a window ends its owner is warned. */
export const ENDING_SOON_SECONDS = 10 * 60;
/** A node replaced this recently is told about (a page opened later shows it in the GPR's events). */
export const REPLACED_RECENT_SECONDS = 30 * 60;

export const isHolding = (gpr: IGpr): boolean => HOLDING.includes(gpr.status);
export const isWaiting = (gpr: IGpr): boolean => WAITING.includes(gpr.status);

export interface ISliceView {
  slice: ISlice;
  holding: IGpr[];
  waiting: IGpr[];
  history: IGpr[];
}

/** Waiting GPRs in queue order: by queue position (pending approval last), then id. */
function waitingKey(gpr: IGpr): [number, number] {
  return [gpr.queue_position ?? Number.MAX_SAFE_INTEGER, gpr.id];
}

function byKey<T>(key: (item: T) => (number | string)[]): (a: T, b: T) => number {
  return (a, b) => {
    const ka = key(a);
    const kb = key(b);
    for (let i = 0; i < ka.length; i++) {
      if (ka[i] !== kb[i]) {
        return ka[i] < kb[i] ? -1 : 1;
      }
    }
    return 0;
  };
}

const endedAt = (gpr: IGpr): number => Date.parse(gpr.ended_at ?? gpr.updated_at ?? gpr.created_at ?? '') || 0;

/** Each slice (in the service's order) with its GPRs split into holding, waiting and history. */
export function sliceViews(slices: ISlice[], gprs: IGpr[], historyLength = HISTORY_LENGTH): ISliceView[] {
  return slices.map(slice => {
    const own = gprs.filter(g => g.slice === slice.name);
    return {
      slice,
      holding: own.filter(isHolding).sort(byKey(g => [g.window_end ?? '', g.id])),
      waiting: own.filter(isWaiting).sort(byKey(waitingKey)),
      history: own
        .filter(g => !isHolding(g) && !isWaiting(g))
        .sort(byKey(g => [-endedAt(g), -g.id]))
        .slice(0, historyLength)
    };
  });
}

/** How many GPUs a GPR holds or asks for: bound, else planned, else asked (nodes count as nodes). */
export function gpuCount(gpr: IGpr): number | null {
  if (gpr.bound_gpus.length) {
    return gpr.bound_gpus.length;
  }
  return gpr.planned_gpu_count ?? gpr.gpus;
}

/** ``2 GPUs``, ``1 node``: what a GPR asked for. */
export function askedFor(gpr: IGpr): string {
  return gpr.gpus !== null ? plural(gpr.gpus, 'GPU') : plural(gpr.nodes ?? 0, 'node');
}

/** The model of the GPUs a GPR holds, from the GPU list; else its shape selector; else null. */
export function heldModel(gpr: IGpr, gpus: IGpu[]): string | null {
  const models = new Set(gpus.filter(g => gpr.bound_gpus.includes(g.uuid)).map(g => shortModel(g.model)));
  if (models.size === 1) {
    return [...models][0];
  }
  return models.size === 0 ? gpr.shape : null;
}

/** The GPRs the status bar speaks of: the user's own when known, else every visible one. */
export function ownGprs(gprs: IGpr[], user: string | null): IGpr[] {
  return user === null ? gprs : gprs.filter(g => g.requested_by === user);
}

/**
 * The status bar's text: ``2 x H100 · 1h12m left`` while GPUs are held (the window
 * ending first), else ``queued #3 · starts ~14:20`` for the first in the queue, else
 * ``waiting for approval``, else ``no GPUs``.
 */
export function statusText(gprs: IGpr[], gpus: IGpu[], now: number): string {
  const holding = gprs.filter(g => g.status === 'provisioned' || g.status === 'provisioning');
  if (holding.length) {
    const count = holding.reduce((sum, g) => sum + (gpuCount(g) ?? 0), 0);
    const models = new Set(holding.map(g => heldModel(g, gpus)));
    const model = models.size === 1 ? [...models][0] : null;
    const what = model ? `${count} x ${model}` : plural(count, 'GPU');
    const ends = holding.map(g => g.window_end).filter((e): e is string => e !== null);
    if (!ends.length) {
      return `${what} · starting`;
    }
    const first = ends.reduce((a, b) => (Date.parse(a) <= Date.parse(b) ? a : b));
    return `${what} · ${formatSpan(secondsUntil(first, now))} left`;
  }
  const queued = gprs.filter(g => g.status === 'queued').sort(byKey(waitingKey));
  if (queued.length) {
    const first = queued[0];
    const position = first.queue_position === null ? 'queued' : `queued #${first.queue_position}`;
    return first.estimated_start
      ? `${position} · starts ~${formatClock(first.estimated_start, now)}`
      : `${position} · no start yet`;
  }
  if (gprs.some(g => g.status === 'pending-approval')) {
    return 'waiting for approval';
  }
  return 'no GPUs';
}

/** One line about a GPR's timing: countdown, queue place, or how it ended. */
export function whenText(gpr: IGpr, now: number): string {
  switch (gpr.status) {
    case 'queued':
      return gpr.estimated_start
        ? `#${gpr.queue_position} in queue · starts ~${formatClock(gpr.estimated_start, now)} (in ${formatSpan(
            secondsUntil(gpr.estimated_start, now)
          )})`
        : `#${gpr.queue_position} in queue · cannot be placed now`;
    case 'pending-approval':
      return `waiting for an admin's approval${gpr.status_reason ? `: ${gpr.status_reason}` : ''}`;
    case 'provisioning':
    case 'provisioned':
      return gpr.window_end
        ? `${formatSpan(secondsUntil(gpr.window_end, now), true)} left · until ${formatClock(gpr.window_end, now)}`
        : 'starting';
    case 'releasing':
      return 'giving the GPUs back';
    default: {
      const reason = gpr.end_reason ?? gpr.status_reason;
      const ended = gpr.ended_at ? `ended ${formatClock(gpr.ended_at, now)}` : gpr.status;
      return reason ? `${ended} · ${reason}` : ended;
    }
  }
}

/** Readings of a GPU ordered hottest first: by temperature, then power, then utilisation; GPUs without readings last. */
export function hottestFirst(gpus: IGpu[]): IGpu[] {
  const key = (g: IGpu): (number | string)[] => {
    const s = g.sample;
    return [
      s?.temperature_c === null || s?.temperature_c === undefined ? 1 : 0,
      -(s?.temperature_c ?? 0),
      -(s?.power_w ?? 0),
      -(s?.utilization ?? 0),
      g.node,
      g.index
    ];
  };
  return [...gpus].sort(byKey(key));
}

export type NoticeKind = 'provisioned' | 'ending' | 'evicted' | 'idle-released' | 'failed' | 'replaced';

export interface INotice {
  /** ``<gpr id>:<kind>``: a notice is given once per GPR and kind. */
  key: string;
  kind: NoticeKind;
  gpr: number;
  message: string;
}

/** The notice about ``gpr`` now, if any, and whether it tells of something that already happened;
 * ``tag`` tells one notice of a kind from the next (each replaced node is told once). */
function noticeFor(
  gpr: IGpr,
  now: number
): { kind: NoticeKind; message: string; past: boolean; tag?: string } | null {
  const what = `GPR ${gpr.id} (${askedFor(gpr)} in ${gpr.slice})`;
  const replaced = gpr.replaced?.[gpr.replaced.length - 1];
  if (gpr.status === 'provisioned' && replaced && -secondsUntil(replaced.at, now) <= REPLACED_RECENT_SECONDS) {
    return {
      kind: 'replaced',
      message:
        `${what}: node ${replaced.failed_node} was replaced by ${replaced.node} at ` +
        `${formatClock(replaced.at, now)}; restart from your checkpoint.`,
      past: false,
      tag: replaced.at
    };
  }
  if (gpr.status === 'failed') {
    return { kind: 'failed', message: `${what} failed: ${gpr.status_reason || 'no reason given'}`, past: true };
  }
  if (gpr.status === 'provisioned' && gpr.window_end) {
    const left = secondsUntil(gpr.window_end, now);
    if (left <= 0) {
      return null;
    }
    if (left <= ENDING_SOON_SECONDS) {
      return {
        kind: 'ending',
        message: `${what} ends in ${formatSpan(left)}, at ${formatClock(gpr.window_end, now)}. Save your work.`,
        past: false
      };
    }
    const count = gpuCount(gpr) ?? 0;
    return {
      kind: 'provisioned',
      message: `${what}: ${plural(count, 'GPU')} provisioned until ${formatClock(gpr.window_end, now)}.`,
      past: true
    };
  }
  if (gpr.end_reason === 'evicted') {
    const again = gpr.status === 'queued' ? ' It is queued again.' : '';
    return {
      kind: 'evicted',
      message: `${what} was evicted for a higher-priority request: ${gpr.status_reason || 'no reason given'}.${again}`,
      past: true
    };
  }
  if (gpr.end_reason === 'idle-released') {
    return { kind: 'idle-released', message: `${what} was released because its GPUs stayed idle.`, past: true };
  }
  return null;
}

/**
 * The notices due now and the keys given so far (``sent`` plus these).
 *
 * On the ``first`` look (the page just loaded) what already happened is recorded
 * without a notice (the user saw it, or restarted to get it); what is still ahead
 * (a window ending soon) is announced. A GPR whose window is ending soon is not also
 * announced as provisioned.
 */
export function dueNotices(
  gprs: IGpr[],
  now: number,
  sent: ReadonlySet<string>,
  first: boolean
): { notices: INotice[]; sent: Set<string> } {
  const given = new Set(sent);
  const notices: INotice[] = [];
  for (const gpr of gprs) {
    const notice = noticeFor(gpr, now);
    if (notice === null) {
      continue;
    }
    const key = notice.tag ? `${gpr.id}:${notice.kind}:${notice.tag}` : `${gpr.id}:${notice.kind}`;
    if (given.has(key)) {
      continue;
    }
    given.add(key);
    if (notice.kind === 'ending') {
      given.add(`${gpr.id}:provisioned`);
    }
    if (!(first && notice.past)) {
      notices.push({ key, kind: notice.kind, gpr: gpr.id, message: notice.message });
    }
  }
  return { notices, sent: given };
}

/** Seconds as "230 ms" or "1.4 s"; "-" for none. */
export function latencyText(seconds: number | null): string {
  if (seconds === null) {
    return '-';
  }
  return seconds < 1 ? `${Math.round(seconds * 1000)} ms` : `${seconds.toFixed(1)} s`;
}

/** An endpoint's state in words: "ready · 1/2 replicas", "pending · GPUs ~14:20 (in 1h5m)", "failed: why". */
export function endpointText(endpoint: IEndpoint, now: number): string {
  if (endpoint.status === 'failed') {
    return `failed${endpoint.message ? `: ${endpoint.message.split('\n')[0]}` : ''}`;
  }
  const starts = endpoint.replica_states
    .map(r => r.estimated_start)
    .filter((s): s is string => s !== null)
    .sort();
  if (endpoint.status === 'pending' && starts.length) {
    return `pending · GPUs ~${formatClock(starts[0], now)} (in ${formatSpan(secondsUntil(starts[0], now))})`;
  }
  if (endpoint.status === 'scaled-to-zero') {
    return 'scaled to zero · a request starts it';
  }
  return `${endpoint.status} · ${endpoint.replicas}/${endpoint.wanted_replicas} replicas`;
}

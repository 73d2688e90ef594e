/**
 * The request form's values turned into API bodies (POST gprs, POST wait-times),
 * checked first so that a mistake is named by its field before anything is sent,
 * and the priority choices a slice's policy allows. Pure: no I/O.
 */
import { formatSpan } from './format';
import { IGprRequest, ISlice, ITemplate, IWaitTimeOption } from './tokens';

/** The form as typed: every value a string, as inputs hold them. */
export interface IRequestForm {
  slice: string;
  /** A GPR template's name; '' for none. */
  template: string;
  /** Whole GPUs, whole nodes, or a share of one time-sliced GPU (``count`` is then the share, like 0.25). */
  unit: 'gpus' | 'nodes' | 'share';
  count: string;
  duration: string;
  /** A shape name, GPU type or model; '' for any. */
  shape: string;
  /** The cluster of the picked wait-time row; '' for any. */
  cluster: string;
  priority: string;
  /** A ``datetime-local`` value (browser time zone); '' to start as soon as possible. */
  startAfter: string;
}

export const EMPTY_FORM: IRequestForm = {
  slice: '',
  template: '',
  unit: 'gpus',
  count: '1',
  duration: '1h',
  shape: '',
  cluster: '',
  priority: '',
  startAfter: ''
};

/** A form value that cannot be sent; ``field`` names the form's label. */
export class FormError extends Error {
  constructor(
    readonly field: string,
    message: string
  ) {
    super(message);
    this.name = 'FormError';
  }
}

/** The service's duration syntax (egs_hub/core/units.py): seconds, or units largest first like 1d2h30m. */
const DURATION_RE = /^(?=.*[1-9])(?:([0-9]{1,10})|(?=[0-9])(?:([0-9]{1,4})w)?(?:([0-9]{1,5})d)?(?:([0-9]{1,6})h)?(?:([0-9]{1,7})m)?(?:([0-9]{1,9})s)?)$/;
const UNIT_SECONDS = [604800, 86400, 3600, 60, 1];

/** Seconds a duration names, or null when it is not in the service's syntax. */
export function parseDuration(text: string): number | null {
  const match = DURATION_RE.exec(text.trim());
  if (!match) {
    return null;
  }
  if (match[1] !== undefined) {
    return Number(match[1]);
  }
  return UNIT_SECONDS.reduce((sum, unit, i) => sum + Number(match[i + 2] ?? 0) * unit, 0);
}

export interface IPriorityChoice {
  label: string;
  value: number;
}

/**
 * EGS's priority bands (DESIGN.md): low 1-100, medium 101-200, high 201-300. Each is offered at its
 * lowest priority, as `%egs request --priority` does: medium is the API's default (101), and a band
 * name puts a GPR in that band without jumping others of it.
 */
const BANDS: readonly { name: string; low: number }[] = [
  { name: 'low', low: 1 },
  { name: 'medium', low: 101 },
  { name: 'high', low: 201 }
];

/** The bands a slice's policy allows (those whose lowest priority is within its max_priority). */
export function priorityChoices(slice: ISlice | undefined): IPriorityChoice[] {
  const max = slice?.policy.max_priority ?? 300;
  return BANDS.filter(band => band.low <= max).map(band => ({ label: `${band.name} (${band.low})`, value: band.low }));
}

/** The count input's label for each unit. */
export const COUNT_LABELS: Record<IRequestForm['unit'], string> = {
  gpus: 'GPUs',
  nodes: 'Nodes',
  share: 'Share of a GPU'
};

function parseCount(form: IRequestForm): { gpus: number } | { nodes: number } | { gpu_share: number } {
  const label = COUNT_LABELS[form.unit];
  const text = form.count.trim();
  if (form.unit === 'share') {
    const share = Number(text);
    if (!/^(0?\.[0-9]+|0)$/.test(text) || !(share > 0 && share < 1)) {
      throw new FormError(label, `${label} must be a number above 0 and below 1, like 0.25, not "${form.count}"`);
    }
    if (migProfile(form.shape)) {
      throw new FormError('Shape', `A share is of a whole time-sliced GPU; ${form.shape} names MIG instances`);
    }
    return { gpu_share: share };
  }
  const count = Number(text);
  if (!/^[0-9]+$/.test(text) || !Number.isInteger(count) || count < 1 || count > 100000) {
    throw new FormError(label, `${label} must be a whole number from 1 to 100000, not "${form.count}"`);
  }
  return form.unit === 'gpus' ? { gpus: count } : { nodes: count };
}

function parseStart(text: string, now: number): string | undefined {
  if (!text) {
    return undefined;
  }
  const when = new Date(text);
  if (Number.isNaN(when.getTime())) {
    throw new FormError('Start after', `Start after must be a date and time, not "${text}"`);
  }
  if (when.getTime() < now - 60000) {
    throw new FormError('Start after', 'Start after is in the past; leave it empty to start as soon as possible');
  }
  return when.toISOString();
}

/**
 * The POST gprs body for the form, checked against the slice's policy where the
 * form alone can tell (duration, priority); ``now`` in ms since the epoch.
 */
export function requestBody(form: IRequestForm, slice: ISlice | undefined, now: number): IGprRequest {
  if (!form.slice) {
    throw new FormError('Workspace', 'Pick a workspace (slice) for the request');
  }
  const duration = form.duration.trim();
  const seconds = parseDuration(duration);
  if (seconds === null) {
    throw new FormError('Duration', `Duration must be like "2h", "1h30m" or "90m", not "${form.duration}"`);
  }
  const maxDuration = slice?.policy.max_duration ?? null;
  if (maxDuration !== null && seconds > maxDuration) {
    throw new FormError(
      'Duration',
      `Duration ${formatSpan(seconds)} is longer than ${form.slice} allows (${formatSpan(maxDuration)})`
    );
  }
  const body: IGprRequest = { slice: form.slice, duration, ...parseCount(form) };
  if (form.template) {
    body.template = form.template;
  }
  if (form.priority) {
    const priority = Number(form.priority);
    const max = slice?.policy.max_priority ?? 300;
    if (!Number.isInteger(priority) || priority < 1 || priority > max) {
      throw new FormError('Priority', `Priority must be from 1 to ${max} in ${form.slice}, not "${form.priority}"`);
    }
    body.priority = priority;
  }
  if (form.shape) {
    body.shape = form.shape;
  }
  if (form.cluster) {
    body.cluster = form.cluster;
  }
  const start = parseStart(form.startAfter, now);
  if (start) {
    body.start_after = start;
  }
  return body;
}

/**
 * The POST wait-times body: the request without shape and cluster, so that the
 * answer lists every shape on every cluster that could serve it (asking again must
 * not narrow the table to the last pick). A shape naming MIG instances stays as its
 * GPU type and profile: without it the answer lists whole GPUs only (a share's lists
 * the time-sliced GPUs that can serve it).
 */
export function waitTimesBody(form: IRequestForm, slice: ISlice | undefined, now: number): IGprRequest {
  const profile = form.unit === 'share' ? null : migProfile(form.shape);
  const shape = profile ? `${form.shape.trim().split(/\s+/)[0]} ${profile}` : '';
  return requestBody({ ...form, shape, cluster: '' }, slice, now);
}

/** The MIG profile a shape names after its GPU type ("H100-80GB 1g.10gb x14": "1g.10gb"); null: whole GPUs. */
export function migProfile(shape: string): string | null {
  const words = shape.toLowerCase().trim().split(/\s+/).slice(1);
  return words.find(w => /^[1-7]g\.[1-9][0-9]{0,3}gb(\+me)?$/.test(w)) ?? null;
}

/** The templates a slice may use: its own, its project's and the global ones (GET /templates lists the user's). */
export function usableTemplates(templates: ITemplate[], slice: ISlice | undefined): ITemplate[] {
  if (!slice) {
    return [];
  }
  return templates.filter(t => (t.slice ? t.slice === slice.name : !t.project || t.project === slice.project));
}

/** Seconds as the service's duration text, exactly: 5400 -> "1h30m". */
export function durationText(seconds: number): string {
  const parts: [number, string][] = [
    [Math.floor(seconds / 86400), 'd'],
    [Math.floor((seconds % 86400) / 3600), 'h'],
    [Math.floor((seconds % 3600) / 60), 'm'],
    [seconds % 60, 's']
  ];
  return parts.map(([n, unit]) => (n ? `${n}${unit}` : '')).join('') || '0s';
}

/** The units a slice lets its members ask for: a share of a time-sliced GPU only where its policy allows sharing. */
export function unitChoices(slice: ISlice | undefined): IRequestForm['unit'][] {
  return slice?.policy.gpu_sharing ? ['gpus', 'nodes', 'share'] : ['gpus', 'nodes'];
}

/**
 * The form filled from a template (none: only the template cleared): its size, duration, shape,
 * cluster and priority; the GPR it asks for names the template, which gives the rest.
 */
export function applyTemplate(form: IRequestForm, template: ITemplate | undefined): IRequestForm {
  if (!template) {
    return { ...form, template: '' };
  }
  return {
    ...form,
    template: template.name,
    unit: template.nodes ? 'nodes' : 'gpus',
    count: String(template.nodes ?? template.gpus ?? 1),
    duration: durationText(template.duration),
    shape: template.shape ?? '',
    cluster: template.cluster ?? '',
    priority: template.priority === null ? '' : String(template.priority)
  };
}

/** What an amount of money reads as; null is "no price" (not free). */
export const formatMoney = (value: number | null): string => (value === null ? 'no price' : value.toFixed(2));

/** A wait-time row's key, as its radio input's value. */
export const optionKey = (option: IWaitTimeOption): string => `${option.cluster}/${option.shape.name}`;

/** The form after picking a wait-time row: its shape and cluster. */
export function pickOption(form: IRequestForm, option: IWaitTimeOption): IRequestForm {
  return { ...form, shape: option.shape.name, cluster: option.cluster };
}

/** The row the form's shape and cluster pick, if the answer has it. */
export function pickedOption(form: IRequestForm, options: IWaitTimeOption[]): IWaitTimeOption | undefined {
  return options.find(o => o.shape.name === form.shape && (!form.cluster || o.cluster === form.cluster));
}

/**
 * The one way the sidebar talks to its server: ``requestAPI`` sends a request to
 * ``<base url>egs/<path>`` on the user's own Jupyter server (the egs-hub server
 * extension, which forwards ``egs/api/...`` to the EGS service with the server's hub
 * token) through ``ServerConnection.makeRequest``, which adds the XSRF token.
 *
 * Every failure becomes an ``EgsError`` whose message a person can act on: the
 * service's ``message`` (and the field it names), or what to do when the server
 * extension is missing or the Jupyter server cannot be reached.
 *
 * A request that may be sent twice (a GET, or a create carrying an ``Idempotency-Key``,
 * which the service makes once: idempotency.ts) is sent again when no answer came or the
 * answer was a 502 or 503 (the service restarting, the hub's proxy, a standby without a
 * leader): at most ``retries.most`` more times, ``retries.backoffMs`` apart and twice as
 * long each time (with jitter; at least the answer's ``Retry-After``), as the Python
 * client does. Any other request is sent once: a POST without a key that got no answer
 * may or may not have been done.
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import { IDEMPOTENCY_KEY } from './idempotency';

export const NOT_INSTALLED_MESSAGE =
  'The egs-hub server extension is not enabled on this Jupyter server, so the EGS service cannot be reached. ' +
  'Install egs-hub in the environment that runs Jupyter and restart the server.';

export class EgsError extends Error {
  constructor(
    message: string,
    readonly status: number | null = null,
    readonly field: string | null = null
  ) {
    super(message);
    this.name = 'EgsError';
  }
}

/** How often, and how long apart, a request that may be sent twice is sent again. */
export interface IRetries {
  /** Tries after the first. */
  most: number;
  /** Milliseconds before the first of them; doubled for each after it. */
  backoffMs: number;
}

export const DEFAULT_RETRIES: IRetries = { most: 4, backoffMs: 500 };
/** The longest wait before a try, whatever Retry-After says. */
export const MAX_WAIT_MS = 30_000;
const RETRIED_STATUSES = [502, 503];

/**
 * Milliseconds to wait before try ``tries + 1``: the backoff doubled for each try after the first,
 * times 0.5 to 1 (``spread`` 0 to 1), at least ``retryAfter`` (seconds, as the header says), at most MAX_WAIT_MS.
 */
export function retryDelay(retries: IRetries, tries: number, retryAfter: string | null, spread: number): number {
  let wait = retries.backoffMs * 2 ** (tries - 1) * (0.5 + spread / 2);
  if (retryAfter !== null && /^\s*\d+\s*$/.test(retryAfter)) {
    wait = Math.max(wait, Number(retryAfter) * 1000);
  }
  return Math.min(wait, MAX_WAIT_MS);
}

/** Whether ``init`` is a request that may be sent twice: a GET, or one with an Idempotency-Key. */
export function mayRetry(init: RequestInit): boolean {
  return (init.method ?? 'GET').toUpperCase() === 'GET' || new Headers(init.headers).has(IDEMPOTENCY_KEY);
}

const sleep = (ms: number) => new Promise<void>(resolve => setTimeout(resolve, ms));

interface IErrorBody {
  message?: unknown;
  field?: unknown;
}

async function readBody(response: Response): Promise<unknown> {
  const text = await response.text();
  if (!text) {
    return null;
  }
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** The EgsError for a failed response from ``url``; ``body`` undefined: not JSON. */
export function errorFor(response: Response, body: unknown, url: string): EgsError {
  const data = (body && typeof body === 'object' ? body : {}) as IErrorBody;
  const message = typeof data.message === 'string' && data.message ? data.message : null;
  const field = typeof data.field === 'string' ? data.field : null;
  if (message === null && response.status === 404) {
    return new EgsError(NOT_INSTALLED_MESSAGE, 404);
  }
  const text = message ?? `${response.status} ${response.statusText || 'error'} from ${url}`;
  return new EgsError(field && !text.includes(field) ? `${text} (${field})` : text, response.status, field);
}

/**
 * Call ``egs/<path>`` and return its decoded JSON body (null for an empty one).
 *
 * @param path relative to ``egs/``: ``api/gprs``, ``config``, ``restart``
 * @param init method, headers and body as for ``fetch``
 * @param settings the server connection; by default the page's
 * @param retries how a request that may be sent twice is sent again
 */
export async function requestAPI<T>(
  path: string,
  init: RequestInit = {},
  settings: ServerConnection.ISettings = ServerConnection.makeSettings(),
  retries: IRetries = DEFAULT_RETRIES
): Promise<T> {
  const url = URLExt.join(settings.baseUrl, 'egs', path);
  const retried = mayRetry(init);
  let response: Response;
  for (let tries = 1; ; tries++) {
    const again = retried && tries <= retries.most;
    try {
      response = await ServerConnection.makeRequest(url, init, settings);
    } catch (error) {
      if (!again) {
        throw new EgsError(`Cannot reach the Jupyter server: ${(error as Error).message}`);
      }
      await sleep(retryDelay(retries, tries, null, Math.random()));
      continue;
    }
    if (!(again && RETRIED_STATUSES.includes(response.status))) {
      break;
    }
    await sleep(retryDelay(retries, tries, response.headers.get('Retry-After'), Math.random()));
  }
  const body = await readBody(response);
  if (!response.ok) {
    throw errorFor(response, body, url);
  }
  if (body === undefined) {
    throw new EgsError(`${url} answered something that is not JSON`, response.status);
  }
  return body as T;
}

/**
 * The one way the sidebar talks to its server: ``requestAPI`` sends a request to
 * ``<base url>egs/<path>`` on the user's own Jupyter server (the egs-hub server
 * extension, which forwards ``egs/api/...`` to the EGS service with the server's hub
 * token) through ``ServerConnection.makeRequest``, which adds the XSRF token.
 *
 * Every failure becomes an ``EgsError`` whose message a person can act on: the
 * service's ``message`` (and the field it names), or what to do when the server
 * extension is missing or the Jupyter server cannot be reached.
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

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
 * @param init method and body as for ``fetch``
 * @param settings the server connection; by default the page's
 */
export async function requestAPI<T>(
  path: string,
  init: RequestInit = {},
  settings: ServerConnection.ISettings = ServerConnection.makeSettings()
): Promise<T> {
  const url = URLExt.join(settings.baseUrl, 'egs', path);
  let response: Response;
  try {
    response = await ServerConnection.makeRequest(url, init, settings);
  } catch (error) {
    throw new EgsError(`Cannot reach the Jupyter server: ${(error as Error).message}`);
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

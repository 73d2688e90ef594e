/**
 * The EGS API as the sidebar uses it: one typed method per call, each through
 * ``requestAPI`` (handler.ts). Service calls go to ``egs/api/<path>`` (the REST API
 * v1 forwarded by the server extension); ``config`` and ``restart`` are the server
 * extension's own routes. A create carries an Idempotency-Key (idempotency.ts), so that
 * ``requestAPI`` may send it again and the service still makes it once.
 */
import { ServerConnection } from '@jupyterlab/services';

import { DEFAULT_RETRIES, IRetries, requestAPI } from './handler';
import { IDEMPOTENCY_KEY, newKey } from './idempotency';
import {
  ICheckRun,
  IEgsConfig,
  IEndpoint,
  IEvent,
  IGpr,
  IGprChecks,
  IGprRequest,
  IGpuMetrics,
  IGpus,
  IInventory,
  ISlice,
  ITemplate,
  IWaitTimes
} from './tokens';

const JSON_HEADERS = { 'Content-Type': 'application/json' };
/** Items asked for per page of a list endpoint (every endpoint's maximum is at least this). */
export const PAGE_LIMIT = 1000;

/** A page of a list endpoint: its items under one key, and where the next page starts (null: none). */
interface IPage<T> {
  next_cursor: string | null;
  [key: string]: T[] | string | null | unknown;
}

export class EgsApi {
  constructor(
    readonly settings: ServerConnection.ISettings = ServerConnection.makeSettings(),
    readonly retries: IRetries = DEFAULT_RETRIES
  ) {}

  config(): Promise<IEgsConfig> {
    return requestAPI<IEgsConfig>('config', {}, this.settings, this.retries);
  }

  async slices(): Promise<ISlice[]> {
    return (await this.get<{ slices: ISlice[] }>('slices')).slices;
  }

  /** Every GPR of the user's slices, following the API's cursor pages. */
  gprs(): Promise<IGpr[]> {
    return this.getAll<IGpr>('gprs', 'gprs');
  }

  /** The GPR's checklist: each check of its nodes at entry and exit, by node, entry before exit. */
  async gprChecks(id: number): Promise<ICheckRun[]> {
    return (await this.get<IGprChecks>(`gprs/${id}/checks`)).checks;
  }

  /** The inference endpoints of the user's slices. */
  async endpoints(): Promise<IEndpoint[]> {
    return (await this.get<{ endpoints: IEndpoint[] }>('endpoints')).endpoints;
  }

  /** The GPR templates the user's slices may use. */
  async templates(): Promise<ITemplate[]> {
    return (await this.get<{ templates: ITemplate[] }>('templates')).templates;
  }

  inventory(): Promise<IInventory> {
    return this.get<IInventory>('inventory');
  }

  gpus(): Promise<IGpus> {
    return this.get<IGpus>('gpus?sort=temperature');
  }

  /** The GPU's readings since ``since`` (ISO time), one point per ``stepSeconds``. */
  gpuMetrics(uuid: string, since: string, stepSeconds: number): Promise<IGpuMetrics> {
    const query = new URLSearchParams({ since, step: String(stepSeconds) });
    return this.get<IGpuMetrics>(`gpus/${encodeURIComponent(uuid)}/metrics?${query}`);
  }

  /** The newest ``limit`` audit events, oldest first (pages of the audit log go back in time). */
  events(limit: number): Promise<IEvent[]> {
    return this.getAll<IEvent>('events', 'events', { most: limit, backwards: true });
  }

  waitTimes(body: IGprRequest): Promise<IWaitTimes> {
    return this.send<IWaitTimes>('POST', 'wait-times', body);
  }

  /** Submit a GPR; ``key``: its Idempotency-Key, the same when the same create is sent again. */
  createGpr(body: IGprRequest, key: string = newKey()): Promise<IGpr> {
    return this.send<IGpr>('POST', 'gprs', body, key);
  }

  releaseGpr(id: number): Promise<IGpr> {
    return this.send<IGpr>('POST', `gprs/${id}/release`, { reason: 'released from JupyterLab' });
  }

  cancelGpr(id: number): Promise<IGpr> {
    return this.send<IGpr>('DELETE', `gprs/${id}`, { reason: 'cancelled from JupyterLab' });
  }

  /** Ask the EGS service to restart this server, so that it comes back with its slice's GPUs. */
  restartServer(): Promise<{ restarting: boolean }> {
    return requestAPI('restart', { method: 'POST', headers: JSON_HEADERS, body: '{}' }, this.settings, this.retries);
  }

  /**
   * The ``key`` items of a list endpoint, page by page: each page asks for at most ``PAGE_LIMIT``
   * (or what is left of ``most``) after the previous page's ``next_cursor``, until it is null or
   * ``most`` items are in. ``backwards``: pages go back in time, each oldest first (events), so a
   * later page's items go first and ``most`` keeps the newest.
   */
  private async getAll<T>(
    path: string,
    key: string,
    { most = Infinity, backwards = false }: { most?: number; backwards?: boolean } = {}
  ): Promise<T[]> {
    let items: T[] = [];
    let cursor: string | null = null;
    do {
      const query = new URLSearchParams({ limit: String(Math.min(PAGE_LIMIT, most - items.length)) });
      if (cursor !== null) {
        query.set('cursor', cursor);
      }
      const page: IPage<T> = await this.get<IPage<T>>(`${path}?${query}`);
      const found = page[key] as T[];
      items = backwards ? [...found, ...items] : [...items, ...found];
      cursor = page.next_cursor;
    } while (cursor !== null && items.length < most);
    return items.length <= most ? items : backwards ? items.slice(items.length - most) : items.slice(0, most);
  }

  private get<T>(path: string): Promise<T> {
    return requestAPI<T>(`api/${path}`, {}, this.settings, this.retries);
  }

  /** ``key``: a create's Idempotency-Key. */
  private send<T>(method: string, path: string, body: object, key?: string): Promise<T> {
    const headers = key === undefined ? JSON_HEADERS : { ...JSON_HEADERS, [IDEMPOTENCY_KEY]: key };
    return requestAPI<T>(`api/${path}`, { method, headers, body: JSON.stringify(body) }, this.settings, this.retries);
  }
}

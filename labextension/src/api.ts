/**
 * The EGS API as the sidebar uses it: one typed method per call, each through
 * ``requestAPI`` (handler.ts). Service calls go to ``egs/api/<path>`` (the REST API
 * v1 forwarded by the server extension); ``config`` and ``restart`` are the server
 * extension's own routes.
 */
import { ServerConnection } from '@jupyterlab/services';

import { requestAPI } from './handler';
import {
  IEgsConfig,
  IEvent,
  IGpr,
  IGprRequest,
  IGpuMetrics,
  IGpus,
  IInventory,
  ISlice,
  IWaitTimes
} from './tokens';

const JSON_HEADERS = { 'Content-Type': 'application/json' };

export class EgsApi {
  constructor(readonly settings: ServerConnection.ISettings = ServerConnection.makeSettings()) {}

  config(): Promise<IEgsConfig> {
    return requestAPI<IEgsConfig>('config', {}, this.settings);
  }

  async slices(): Promise<ISlice[]> {
    return (await this.get<{ slices: ISlice[] }>('slices')).slices;
  }

  async gprs(): Promise<IGpr[]> {
    return (await this.get<{ gprs: IGpr[] }>('gprs')).gprs;
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

  async events(limit: number): Promise<IEvent[]> {
    return (await this.get<{ events: IEvent[] }>(`events?limit=${limit}`)).events;
  }

  waitTimes(body: IGprRequest): Promise<IWaitTimes> {
    return this.send<IWaitTimes>('POST', 'wait-times', body);
  }

  createGpr(body: IGprRequest): Promise<IGpr> {
    return this.send<IGpr>('POST', 'gprs', body);
  }

  releaseGpr(id: number): Promise<IGpr> {
    return this.send<IGpr>('POST', `gprs/${id}/release`, { reason: 'released from JupyterLab' });
  }

  cancelGpr(id: number): Promise<IGpr> {
    return this.send<IGpr>('DELETE', `gprs/${id}`, { reason: 'cancelled from JupyterLab' });
  }

  /** Ask the EGS service to restart this server, so that it comes back with its slice's GPUs. */
  restartServer(): Promise<{ restarting: boolean }> {
    return requestAPI('restart', { method: 'POST', headers: JSON_HEADERS, body: '{}' }, this.settings);
  }

  private get<T>(path: string): Promise<T> {
    return requestAPI<T>(`api/${path}`, {}, this.settings);
  }

  private send<T>(method: string, path: string, body: object): Promise<T> {
    return requestAPI<T>(`api/${path}`, { method, headers: JSON_HEADERS, body: JSON.stringify(body) }, this.settings);
  }
}

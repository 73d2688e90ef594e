/**
 * The sidebar's state and its refresh loop, without DOM: the last answers of the
 * EGS API (config, slices, GPRs, GPUs with their recent series, shapes, events, the
 * checklists of the GPRs shown, inference endpoints), the last error as a readable message, and the actions
 * a person takes (request, release, cancel, restart). ``changed`` fires after every
 * refresh and action.
 *
 * Refreshing is a ``Poll`` on the settings' interval with backoff after failures, in
 * standby while the browser tab is hidden. GPU series are fetched only while the
 * sidebar is shown (``showMetrics``): they are the biggest answers. A GPR's checklist
 * is asked for again only when the GPR changed or a check of it was still pending or running.
 */
import { IDisposable } from '@lumino/disposable';
import { IPoll, Poll } from '@lumino/polling';
import { ISignal, Signal } from '@lumino/signaling';

import { EgsApi } from './api';
import { checksKey, checksToAsk } from './checks';
import { CreateKeys } from './idempotency';
import { sliceViews } from './state';
import {
  DEFAULT_SETTINGS,
  ICheckRun,
  IEgsConfig,
  IEgsSettings,
  IEndpoint,
  IEvent,
  IGpr,
  IGprRequest,
  IGpus,
  IInventoryShape,
  IMetricPoint,
  ISlice,
  ITemplate,
  IWaitTimes
} from './tokens';

export interface IEgsState {
  config: IEgsConfig | null;
  slices: ISlice[];
  gprs: IGpr[];
  gpus: IGpus | null;
  shapes: IInventoryShape[];
  templates: ITemplate[];
  events: IEvent[];
  endpoints: IEndpoint[];
  /** Per GPR id, its checklist: the GPRs the sidebar shows that hold or held nodes. */
  checks: { [gpr: number]: ICheckRun[] };
  /** Per GPU UUID, its readings over the last SERIES_SECONDS. */
  series: { [uuid: string]: IMetricPoint[] };
  /** The last refresh's failure, or null after a successful one. */
  error: string | null;
  /** When the last successful refresh finished (ms since the epoch); null before the first. */
  updatedAt: number | null;
}

export const SERIES_SECONDS = 30 * 60;
export const SERIES_POINTS = 60;
const EVENTS_LIMIT = 50;
const MAX_BACKOFF_SECONDS = 300;

const EMPTY_STATE: IEgsState = {
  config: null,
  slices: [],
  gprs: [],
  gpus: null,
  shapes: [],
  templates: [],
  events: [],
  endpoints: [],
  checks: {},
  series: {},
  error: null,
  updatedAt: null
};

export class EgsModel implements IDisposable {
  constructor(
    readonly api: EgsApi,
    settings: IEgsSettings = DEFAULT_SETTINGS,
    private readonly clock: () => number = Date.now
  ) {
    this._settings = settings;
    this._poll = new Poll({
      auto: false,
      factory: () => this.fetch(),
      frequency: this.frequency(),
      name: 'egs-hub:refresh',
      standby: 'when-hidden'
    });
  }

  get state(): IEgsState {
    return this._state;
  }

  get changed(): ISignal<this, IEgsState> {
    return this._changed;
  }

  get settings(): IEgsSettings {
    return this._settings;
  }

  set settings(settings: IEgsSettings) {
    this._settings = settings;
    this._poll.frequency = this.frequency();
  }

  /** Whether to fetch GPU series; turning it on refreshes at once. */
  set showMetrics(show: boolean) {
    if (show !== this._showMetrics) {
      this._showMetrics = show;
      if (show) {
        void this.refresh();
      }
    }
  }

  get isDisposed(): boolean {
    return this._poll.isDisposed;
  }

  /** Begin refreshing on the settings' interval. */
  start(): void {
    void this._poll.start();
  }

  /** Refresh now; resolves when this refresh is done (its failure is in ``state.error``). */
  async refresh(): Promise<void> {
    await this._poll.refresh();
    // The tick rejects only when the model is disposed meanwhile: nothing left to refresh.
    await this._poll.tick.catch(() => undefined);
  }

  waitTimes(body: IGprRequest): Promise<IWaitTimes> {
    return this.api.waitTimes(body);
  }

  /** Submit a GPR; the same body again before one is answered is a retry of it, with its key. */
  async request(body: IGprRequest): Promise<IGpr> {
    const key = this._keys.keyFor(body);
    const gpr = await this.api.createGpr(body, key);
    this._keys.answered(key);
    return this.acted(gpr);
  }

  async release(id: number): Promise<IGpr> {
    return this.acted(await this.api.releaseGpr(id));
  }

  async cancel(id: number): Promise<IGpr> {
    return this.acted(await this.api.cancelGpr(id));
  }

  restartServer(): Promise<{ restarting: boolean }> {
    return this.api.restartServer();
  }

  dispose(): void {
    this._poll.dispose();
    Signal.clearData(this);
  }

  private frequency(): IPoll.Frequency {
    const interval = Math.max(1, this._settings.refreshInterval) * 1000;
    return { interval, backoff: true, max: Math.max(interval, MAX_BACKOFF_SECONDS * 1000) };
  }

  /** Put the GPR an action answered into the state at once, then refresh the rest. */
  private acted(gpr: IGpr): IGpr {
    const others = this._state.gprs.filter(g => g.id !== gpr.id);
    this.update({ gprs: [gpr, ...others] });
    void this.refresh();
    return gpr;
  }

  private update(change: Partial<IEgsState>): void {
    this._state = { ...this._state, ...change };
    this._changed.emit(this._state);
  }

  /** One refresh: every answer or none (a failure keeps the last answers and says why). */
  private async fetch(): Promise<void> {
    try {
      const config = this._state.config ?? (await this.api.config());
      const [slices, gprs, gpus, inventory, events, templates, endpoints] = await Promise.all([
        this.api.slices(),
        this.api.gprs(),
        this.api.gpus(),
        this.api.inventory(),
        this.api.events(EVENTS_LIMIT),
        this.api.templates(),
        this.api.endpoints()
      ]);
      const [series, checks] = await Promise.all([
        this._showMetrics && gpus.source.name !== null ? this.fetchSeries(gpus) : {},
        this.fetchChecks(slices, gprs)
      ]);
      this.update({
        config,
        slices,
        gprs,
        gpus,
        shapes: inventory.shapes,
        templates,
        events,
        endpoints,
        checks,
        series,
        error: null,
        updatedAt: this.clock()
      });
    } catch (error) {
      this.update({ error: (error as Error).message });
      throw error;
    }
  }

  /** The checklists of the GPRs shown (held, or in recent history): the last answers where still good. */
  private async fetchChecks(slices: ISlice[], gprs: IGpr[]): Promise<{ [gpr: number]: ICheckRun[] }> {
    const shown = sliceViews(slices, gprs).flatMap(view => [...view.holding, ...view.history]);
    const known = this._state.checks;
    const asking = checksToAsk(shown, known, this._checksAskedWith);
    const answers = await Promise.all(asking.map(gpr => this.api.gprChecks(gpr.id)));
    const checks: { [gpr: number]: ICheckRun[] } = {};
    for (const gpr of shown) {
      if (known[gpr.id] !== undefined) {
        checks[gpr.id] = known[gpr.id];
      }
    }
    asking.forEach((gpr, i) => {
      checks[gpr.id] = answers[i];
      this._checksAskedWith[gpr.id] = checksKey(gpr);
    });
    return checks;
  }

  private async fetchSeries(gpus: IGpus): Promise<{ [uuid: string]: IMetricPoint[] }> {
    const since = new Date(this.clock() - SERIES_SECONDS * 1000).toISOString();
    const step = Math.max(Math.round(SERIES_SECONDS / SERIES_POINTS), Math.ceil(gpus.source.interval));
    const answers = await Promise.all(gpus.gpus.map(gpu => this.api.gpuMetrics(gpu.uuid, since, step)));
    return Object.fromEntries(answers.map(answer => [answer.uuid, answer.points]));
  }

  private _state: IEgsState = EMPTY_STATE;
  private _settings: IEgsSettings;
  private _showMetrics = false;
  /** Per GPR id, the checksKey its checklist in the state was asked with. */
  private _checksAskedWith: { [gpr: number]: string } = {};
  private readonly _poll: Poll;
  private readonly _keys = new CreateKeys();
  private readonly _changed = new Signal<this, IEgsState>(this);
}

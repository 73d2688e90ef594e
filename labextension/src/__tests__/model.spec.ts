import { EgsApi } from '../api';
import { EgsError } from '../handler';
import { EgsModel } from '../model';
import { ICheckRun, IEgsConfig, IGpr, IGpus } from '../tokens';
import { checkRun, gpr, gpu, NOW, provisioned, slice } from './builders';

const NOW_ISO = new Date(NOW).toISOString();

/** An EgsApi answering from fields a test sets; ``failWith`` makes every call fail. */
class FakeApi extends EgsApi {
  gprList: IGpr[] = [gpr({ id: 1, queue_position: 1 })];
  gpuList: IGpus = { source: { name: 'nvml', interval: 10, sampled_at: null, error: null }, gpus: [gpu()] };
  failWith: Error | null = null;
  metricsAsked: string[] = [];
  checkRuns: { [id: number]: ICheckRun[] } = {};
  checksAsked: number[] = [];

  private answer<T>(value: T): Promise<T> {
    return this.failWith ? Promise.reject(this.failWith) : Promise.resolve(value);
  }
  config(): Promise<IEgsConfig> {
    return this.answer({ user: 'ann', server: '', slice: 'ml', service_configured: true });
  }
  slices() {
    return this.answer([slice()]);
  }
  gprs() {
    return this.answer(this.gprList);
  }
  gpus() {
    return this.answer(this.gpuList);
  }
  inventory() {
    return this.answer({ clusters: [], shapes: [], gpus: 1, free: 0 });
  }
  events() {
    return this.answer([]);
  }
  templates() {
    return this.answer([]);
  }
  endpoints() {
    return this.answer([]);
  }
  gpuMetrics(uuid: string, since: string, step: number) {
    this.metricsAsked.push(`${uuid} ${since} ${step}`);
    return this.answer({ uuid, since, step, source: this.gpuList.source, points: [] });
  }
  gprChecks(id: number) {
    this.checksAsked.push(id);
    return this.answer(this.checkRuns[id] ?? []);
  }
  releaseGpr(id: number) {
    return this.answer(provisioned({ id, status: 'releasing' }));
  }
}

describe('EgsModel', () => {
  let api: FakeApi;
  let model: EgsModel;
  beforeEach(() => {
    api = new FakeApi();
    model = new EgsModel(api, { refreshInterval: 3600, notifications: true }, () => NOW);
  });
  afterEach(() => model.dispose());

  it('holds every answer after a refresh and tells its listeners', async () => {
    const seen: (number | null)[] = [];
    model.changed.connect((_, state) => seen.push(state.updatedAt));
    await model.refresh();
    expect(model.state.config?.user).toBe('ann');
    expect(model.state.gprs.map(g => g.id)).toEqual([1]);
    expect(model.state.slices.map(s => s.name)).toEqual(['ml']);
    expect(model.state.error).toBeNull();
    expect(seen).toEqual([NOW]);
  });

  it('keeps the last answers and says why a refresh failed', async () => {
    await model.refresh();
    api.failWith = new EgsError('The EGS service cannot be reached', 502);
    await model.refresh();
    expect(model.state.error).toBe('The EGS service cannot be reached');
    expect(model.state.gprs.map(g => g.id)).toEqual([1]);
    api.failWith = null;
    await model.refresh();
    expect(model.state.error).toBeNull();
  });

  it('asks for GPU series only while the sidebar is shown, and only with a metrics source', async () => {
    await model.refresh();
    expect(api.metricsAsked).toEqual([]);
    model.showMetrics = true;
    await model.refresh();
    expect(api.metricsAsked).toEqual(['GPU-a 2024-05-14T11:30:00.000Z 30']);
    api.gpuList = { ...api.gpuList, source: { name: null, interval: 10, sampled_at: null, error: null } };
    await model.refresh();
    expect(api.metricsAsked).toHaveLength(1);
    expect(model.state.series).toEqual({});
  });

  it('asks for the checklists of GPRs holding or having held nodes, again while one runs or the GPR changed', async () => {
    const held = provisioned({ id: 2 });
    api.gprList = [gpr({ id: 1, queue_position: 1 }), held, gpr({ id: 3, status: 'cancelled', ended_at: NOW_ISO })];
    api.checkRuns = { 2: [checkRun({ gpr: 2, status: 'running', duration: null })] };
    await model.refresh();
    expect(api.checksAsked).toEqual([2]); // not the queued GPR, nor the cancelled one (never held nodes)
    expect(model.state.checks[2].map(r => r.status)).toEqual(['running']);

    api.checkRuns = { 2: [checkRun({ gpr: 2, status: 'passed' })] };
    await model.refresh();
    expect(api.checksAsked).toEqual([2, 2]); // a check was running
    expect(model.state.checks[2].map(r => r.status)).toEqual(['passed']);
    await model.refresh();
    expect(api.checksAsked).toEqual([2, 2]); // all ended, the GPR unchanged: the last answer holds

    api.gprList = [{ ...held, status: 'complete', updated_at: NOW_ISO, ended_at: NOW_ISO }];
    await model.refresh();
    expect(api.checksAsked).toEqual([2, 2, 2]); // it ended: its exit checks
    expect(Object.keys(model.state.checks)).toEqual(['2']);
  });

  it('shows an action’s answer at once', async () => {
    await model.refresh();
    const answer = await model.release(1);
    expect(answer.status).toBe('releasing');
    expect(model.state.gprs.find(g => g.id === 1)?.status).toBe('releasing');
  });
});

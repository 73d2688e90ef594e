/** Builders of API answers for the tests: a valid default, changed by what a test names. */
import { ICheckRun, IGpr, IGpu, IGpuSample, ISlice } from '../tokens';

export const NOW = Date.parse('2024-05-14T12:00:00Z');

export const iso = (offsetSeconds: number): string => new Date(NOW + offsetSeconds * 1000).toISOString();

export function gpr(change: Partial<IGpr> = {}): IGpr {
  return {
    id: 1,
    name: '',
    slice: 'ml',
    requested_by: 'ann',
    cluster: null,
    shape: null,
    gpus: 2,
    nodes: null,
    priority: 150,
    duration: 7200,
    start_after: null,
    idle_timeout: null,
    preemptible: true,
    template: null,
    gpu_share: null,
    status: 'queued',
    status_reason: '',
    estimated_start: null,
    queue_position: null,
    planned_gpus: [],
    planned_nodes: [],
    planned_gpu_count: null,
    window_start: null,
    window_end: null,
    bound_gpus: [],
    bound_nodes: [],
    avoid_nodes: [],
    replaced: [],
    end_reason: null,
    created_at: iso(-3600),
    updated_at: iso(-60),
    ended_at: null,
    price_per_gpu_hour: null,
    cost_per_hour: null,
    reserved_cost: null,
    used_cost: null,
    ...change
  };
}

export function provisioned(change: Partial<IGpr> = {}): IGpr {
  return gpr({
    status: 'provisioned',
    window_start: iso(-600),
    window_end: iso(4320),
    bound_gpus: ['GPU-a', 'GPU-b'],
    bound_nodes: ['node-1'],
    ...change
  });
}

export function slice(change: Partial<ISlice> = {}): ISlice {
  return {
    name: 'ml',
    display_name: 'Machine learning',
    project: 'default',
    group: 'ml',
    members: ['ann'],
    quota: { max_gpus: 8, max_gpu_hours: null, max_cost_month: null },
    policy: {
      max_duration: 86400,
      max_priority: 300,
      auto_approve_max_gpus: null,
      max_active_gprs: 1,
      idle_timeout: null,
      max_idle_timeout: null,
      gpu_sharing: false,
      auto_gpr: null,
      bind_failure: 'fail',
      eviction: 'auto',
      home_volume_class: null,
      home_volume_size: null,
      maintenance_crossing: 'ask',
      reject_over_limits: false,
      remediation: 'replace',
      requeue_evicted: true,
      restart_servers: true,
      share: null
    },
    usage: { gpu_hours_week: 3, decayed_gpu_hours: 2, fair_share_factor: 1, project_fair_share_factor: 1 },
    namespaces: {},
    gpus: [],
    created_at: iso(-86400),
    updated_at: iso(-3600),
    ...change
  };
}

export function sample(change: Partial<IGpuSample> = {}): IGpuSample {
  return {
    time: iso(-5),
    utilization: 50,
    memory_utilization: 20,
    memory_used_mib: 10240,
    memory_total_mib: 81920,
    temperature_c: 60,
    power_w: 300,
    power_limit_w: 700,
    ecc_errors: null,
    xid: null,
    sm_clock_mhz: null,
    throttle_reasons: [],
    processes: null,
    pod: null,
    namespace: null,
    ...change
  };
}

export function gpu(change: Partial<IGpu> = {}): IGpu {
  return {
    uuid: 'GPU-a',
    index: 0,
    node: 'node-1',
    cluster: 'local',
    model: 'NVIDIA H100 80GB HBM3',
    memory_mib: 81920,
    declared: false,
    healthy: true,
    parent_uuid: null,
    mig_profile: null,
    slice: 'ml',
    gpr: 1,
    sample: sample(),
    ...change
  };
}

export function checkRun(change: Partial<ICheckRun> = {}): ICheckRun {
  return {
    id: 1,
    gpr: 1,
    cluster: 'local',
    node: 'node-1',
    name: 'gpu-health',
    kind: 'gpu-health',
    phase: 'entry',
    status: 'passed',
    started_at: iso(-600),
    finished_at: iso(-599),
    duration: 0.42,
    values: { max_temperature_c: 61 },
    log: '',
    ...change
  };
}

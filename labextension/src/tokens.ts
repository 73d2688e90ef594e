/**
 * Shapes of what the sidebar reads: the EGS service's REST API v1 answers (as the
 * server extension forwards them unchanged) and the server extension's own answers.
 *
 * Vocabulary (DESIGN.md): a *slice* is a team workspace; a *GPR* is a GPU Provision
 * Request; its *window* is [window_start, window_end); a queued GPR has an *estimated
 * start* and a *queue position*. Times are ISO-8601 UTC strings, durations seconds.
 */

export type GprStatus =
  | 'pending-approval'
  | 'queued'
  | 'provisioning'
  | 'provisioned'
  | 'releasing'
  | 'complete'
  | 'rejected'
  | 'cancelled'
  | 'failed';

export type EndReason = 'window-ended' | 'released-early' | 'idle-released' | 'evicted';

export interface INodeReplacement {
  failed_node: string;
  node: string;
  at: string;
}

export interface IGpr {
  id: number;
  name: string | null;
  slice: string;
  requested_by: string | null;
  cluster: string | null;
  shape: string | null;
  gpus: number | null;
  nodes: number | null;
  priority: number;
  duration: number;
  start_after: string | null;
  idle_timeout: number | null;
  preemptible: boolean;
  status: GprStatus;
  status_reason: string | null;
  estimated_start: string | null;
  queue_position: number | null;
  planned_gpus: string[];
  planned_nodes: string[];
  planned_gpu_count: number | null;
  window_start: string | null;
  window_end: string | null;
  bound_gpus: string[];
  bound_nodes: string[];
  /** Failed nodes replaced by healthy ones during its window, oldest first (absent from older services). */
  replaced?: INodeReplacement[];
  end_reason: EndReason | null;
  created_at: string | null;
  updated_at: string | null;
  ended_at: string | null;
}

export interface ISlicePolicy {
  max_duration: number | null;
  max_priority: number;
  auto_approve_max_gpus: number | null;
  max_active_gprs: number;
  idle_timeout: number | null;
  max_idle_timeout: number | null;
  /** Members may ask for a share of a time-sliced GPU (gpu_share). */
  gpu_sharing: boolean;
}

export interface ISlice {
  name: string;
  display_name: string;
  project: string;
  group: string;
  members: string[];
  quota: { max_gpus: number | null; max_gpu_hours: number | null };
  policy: ISlicePolicy;
  usage: { gpu_hours_week: number; decayed_gpu_hours: number; fair_share_factor: number };
  gpus: string[];
}

export interface IShapeInfo {
  name: string;
  model: string;
  memory_gb: number;
  /** Units per node: GPUs, or MIG instances of a MIG shape. */
  gpus_per_node: number;
  /** The MIG profile of its units ("1g.10gb"); null: whole GPUs. */
  mig_profile: string | null;
  /** What one unit counts as in quotas and GPU-hours: 1, or 1/7 for a 1g. */
  gpu_equivalents: number;
}

/** One line of the inventory's shape list: a shape as one cluster offers it. */
export interface IInventoryShape extends IShapeInfo {
  cluster: string;
  gpus: number;
  free: number;
}

export interface IInventory {
  shapes: IInventoryShape[];
  gpus: number;
  free: number;
}

/** One answer of POST wait-times: when a shape on a cluster could start the request. */
export interface IWaitTimeOption {
  cluster: string;
  shape: IShapeInfo;
  estimated_start: string | null;
  wait_seconds: number;
  nodes: string[];
  gpus: number;
  /** What those GPUs cost an hour, and over the whole duration; null: no price. */
  cost_per_hour: number | null;
  estimated_cost: number | null;
}

export interface IWaitTimes {
  options: IWaitTimeOption[];
  needs_approval: string[];
}

/** A GPU's latest readings: percent, MiB, °C, W; null where the source gives none. */
export interface IGpuSample {
  time: string;
  utilization: number | null;
  memory_utilization: number | null;
  memory_used_mib: number | null;
  memory_total_mib: number | null;
  temperature_c: number | null;
  power_w: number | null;
  power_limit_w: number | null;
}

export interface IGpu {
  uuid: string;
  index: number;
  node: string;
  cluster: string;
  model: string;
  memory_mib: number;
  declared: boolean;
  healthy: boolean;
  /** A MIG instance or a share of a time-sliced GPU: the GPU's UUID. */
  parent_uuid: string | null;
  /** A MIG instance: its profile. */
  mig_profile: string | null;
  slice: string | null;
  gpr: number | null;
  sample: IGpuSample | null;
}

/** Where the service reads GPU metrics from; ``name`` null: no metric source. */
export interface IMetricsSource {
  name: string | null;
  interval: number;
  sampled_at: string | null;
  error: string | null;
}

export interface IGpus {
  source: IMetricsSource;
  gpus: IGpu[];
}

/** One averaged point of a GPU's series; fields as in IGpuSample. */
export interface IMetricPoint {
  time: string;
  utilization: number | null;
  memory_used_mib: number | null;
  temperature_c: number | null;
  power_w: number | null;
}

export interface IGpuMetrics {
  uuid: string;
  step: number;
  source: IMetricsSource;
  points: IMetricPoint[];
}

export interface IEvent {
  id: number;
  time: string;
  kind: string;
  actor: string;
  reason: string;
  gpr: number | null;
  slice: string | null;
  from_status: string | null;
  to_status: string | null;
}

export type EndpointStatus = 'pending' | 'starting' | 'ready' | 'scaled-to-zero' | 'failed';

/** One replica of an endpoint (GET /endpoints): its GPR, and its server. */
export interface IEndpointReplica {
  gpr: number;
  state: 'waiting' | 'starting' | 'ready' | 'failed' | 'ending';
  estimated_start: string | null;
}

/** An inference endpoint of the user's slices (the fields the sidebar shows). */
export interface IEndpoint {
  slice: string;
  name: string;
  runtime: string;
  model: string;
  status: EndpointStatus;
  message: string | null;
  url: string;
  replicas: number;
  wanted_replicas: number;
  max_replicas: number;
  replica_states: IEndpointReplica[];
  requests_per_second: number;
  latency_p50: number | null;
  latency_p95: number | null;
  errors: number;
}

export type CheckStatus = 'pending' | 'running' | 'passed' | 'failed' | 'skipped';

/** One check on one node at a GPR's entry or exit (GET /gprs/{id}/checks). */
export interface ICheckRun {
  id: number;
  gpr: number | null;
  cluster: string;
  node: string;
  name: string;
  kind: string;
  phase: 'entry' | 'exit';
  status: CheckStatus;
  started_at: string | null;
  /** Seconds it ran; null until it ends. */
  duration: number | null;
  /** What it measured, by name. */
  values: { [name: string]: number | string };
  /** The end of its output, or why it failed or was skipped. */
  log: string;
}

export interface IGprChecks {
  gpr: number;
  checks: ICheckRun[];
}

/** GET egs/config of the server extension. */
export interface IEgsConfig {
  user: string | null;
  server: string;
  slice: string | null;
  service_configured: boolean;
}

/** The request body of POST gprs (and, without name, of POST wait-times). */
/** A GPR template (GET /templates): a named GPR shape for everyone, a project or a slice. */
export interface ITemplate {
  name: string;
  description: string;
  scope: string;
  project: string | null;
  slice: string | null;
  cluster: string | null;
  shape: string | null;
  gpus: number | null;
  nodes: number | null;
  duration: number;
  priority: number | null;
  idle_timeout: number | null;
  preemptible: boolean | null;
}

export interface IGprRequest {
  slice: string;
  /** A template gives what the request leaves out (idle timeout, preemptible, cluster...). */
  template?: string;
  duration: string;
  gpus?: number;
  nodes?: number;
  /** A share of one time-sliced GPU, above 0 and below 1. */
  gpu_share?: number;
  priority?: number;
  shape?: string;
  cluster?: string;
  start_after?: string;
}

/** The sidebar's settings (schema/plugin.json). */
export interface IEgsSettings {
  refreshInterval: number;
  notifications: boolean;
}

export const DEFAULT_SETTINGS: IEgsSettings = { refreshInterval: 10, notifications: true };

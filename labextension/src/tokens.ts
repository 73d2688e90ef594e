/**
 * Shapes of what the sidebar reads: the EGS service's REST API v1 answers (as the
 * server extension forwards them unchanged), named from api-types.ts, which
 * `make labextension` generates from the service's OpenAPI document; and the server
 * extension's own answers.
 *
 * Vocabulary (DESIGN.md): a *slice* is a team workspace; a *GPR* is a GPU Provision
 * Request; its *window* is [window_start, window_end); a queued GPR has an *estimated
 * start* and a *queue position*. Times are ISO-8601 UTC strings, durations seconds.
 */

import type { components } from './api-types';

type Schemas = components['schemas'];

export type IGpr = Schemas['GPR'];
export type GprStatus = IGpr['status'];
export type EndReason = NonNullable<IGpr['end_reason']>;
export type INodeReplacement = Schemas['NodeReplacement'];
export type ISlicePolicy = Schemas['SlicePolicy'];
export type ISlice = Schemas['Slice'];
export type IShapeInfo = Schemas['Shape'];
/** One line of the inventory's shape list: a shape as one cluster offers it. */
export type IInventoryShape = Schemas['InventoryShape'];
export type IInventory = Schemas['Inventory'];
/** One answer of POST wait-times: when a shape on a cluster could start the request. */
export type IWaitTimeOption = Schemas['WaitTimeOption'];
export type IWaitTimes = Schemas['WaitTimes'];
/** A GPU's latest readings: percent, MiB, °C, W; null where the source gives none. */
export type IGpuSample = Schemas['GPUSample'];
export type IGpu = Schemas['GPU'];
/** Where the service reads GPU metrics from; ``name`` null: no metric source. */
export type IMetricsSource = Schemas['MetricSource'];
export type IGpus = Schemas['GPUs'];
export type IMetricPoint = Schemas['MetricPoint'];
export type IGpuMetrics = Schemas['GPUMetrics'];
export type IEvent = Schemas['Event'];
export type IEndpoint = Schemas['Endpoint'];
export type EndpointStatus = IEndpoint['status'];
export type IEndpointReplica = Schemas['EndpointReplica'];
/** One check on one node at a GPR's entry or exit (GET /gprs/{id}/checks). */
export type ICheckRun = Schemas['CheckRun'];
export type CheckStatus = ICheckRun['status'];
export type IGprChecks = Schemas['GPRChecks'];
/** A GPR template (GET /templates): a named GPR shape for everyone, a project or a slice. */
export type ITemplate = Schemas['Template'];
/** The request body of POST gprs (and, without name, of POST wait-times). */
export type IGprRequest = Schemas['GPRCreate'];

/** GET egs/config of the server extension. */
export interface IEgsConfig {
  user: string | null;
  server: string;
  slice: string | null;
  service_configured: boolean;
}

/** The sidebar's settings (schema/plugin.json). */
export interface IEgsSettings {
  refreshInterval: number;
  notifications: boolean;
}

export const DEFAULT_SETTINGS: IEgsSettings = { refreshInterval: 10, notifications: true };

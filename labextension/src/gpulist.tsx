/** The "GPUs" section: my slices' GPUs hottest first, their readings and sparklines of the last half hour. */
import * as React from 'react';

import { formatMemory, formatReading, shortModel } from './format';
import { IEgsState, SERIES_SECONDS } from './model';
import { sparkline } from './sparkline';
import { hottestFirst } from './state';
import { IGpu, IMetricPoint, IMetricsSource } from './tokens';

const WIDTH = 80;
const HEIGHT = 18;

interface ISparkProps {
  points: IMetricPoint[];
  field: 'utilization' | 'memory_used_mib' | 'temperature_c' | 'power_w';
  what: string;
  floor?: number;
  ceiling?: number;
}

function Spark({ points, field, what, floor, ceiling }: ISparkProps): JSX.Element | null {
  const line = sparkline(
    points.map(p => p[field]),
    WIDTH,
    HEIGHT,
    floor ?? null,
    ceiling ?? null
  );
  if (!line.points) {
    return null;
  }
  const minutes = Math.round(SERIES_SECONDS / 60);
  return (
    <svg
      className="egs-Spark"
      width={WIDTH}
      height={HEIGHT}
      viewBox={`0 0 ${WIDTH} ${HEIGHT}`}
      role="img"
      aria-label={`${what}, last ${minutes} minutes: ${line.min?.toFixed(0)} to ${line.max?.toFixed(0)}`}
    >
      <polyline points={line.points} fill="none" stroke="currentColor" strokeWidth="1.5" />
    </svg>
  );
}

function sourceMessage(source: IMetricsSource): string | null {
  if (source.name === null) {
    return (
      'The EGS service has no GPU metrics source (no NVML on its host and no Prometheus configured), ' +
      'so utilisation, memory, temperature and power are not available.'
    );
  }
  if (source.error) {
    return `The metrics source (${source.name}) failed: ${source.error}`;
  }
  return null;
}

function GpuRow({ gpu, points }: { gpu: IGpu; points: IMetricPoint[] }): JSX.Element {
  const s = gpu.sample;
  return (
    <li className="egs-Gpu" data-gpu-uuid={gpu.uuid}>
      <div className="egs-Gpu-title">
        GPU {gpu.index} · {gpu.node} · {shortModel(gpu.model)}
        {gpu.mig_profile && <span> · MIG {gpu.mig_profile}</span>}
        {gpu.parent_uuid && !gpu.mig_profile && <span className="egs-Muted"> · a share of a time-sliced GPU</span>}
        {gpu.slice && <span className="egs-Muted"> · {gpu.slice}{gpu.gpr !== null ? `, GPR ${gpu.gpr}` : ''}</span>}
        {gpu.declared && <span className="egs-Muted"> · declared</span>}
        {!gpu.healthy && <span className="egs-Error"> · unhealthy</span>}
      </div>
      {s === null ? (
        <div className="egs-Muted">No readings yet.</div>
      ) : (
        <dl className="egs-Readings">
          <div>
            <dt>Utilisation</dt>
            <dd>{formatReading(s.utilization, '%')}</dd>
            <dd><Spark points={points} field="utilization" what="Utilisation" floor={0} ceiling={100} /></dd>
          </div>
          <div>
            <dt>Memory</dt>
            <dd>
              {formatMemory(s.memory_used_mib)} / {formatMemory(s.memory_total_mib)}
            </dd>
            <dd><Spark points={points} field="memory_used_mib" what="Memory used (MiB)" floor={0} ceiling={s.memory_total_mib ?? undefined} /></dd>
          </div>
          <div>
            <dt>Temperature</dt>
            <dd>{formatReading(s.temperature_c, ' °C')}</dd>
            <dd><Spark points={points} field="temperature_c" what="Temperature (°C)" /></dd>
          </div>
          <div>
            <dt>Power</dt>
            <dd>
              {formatReading(s.power_w, ' W')}
              {s.power_limit_w !== null ? ` / ${formatReading(s.power_limit_w, ' W')}` : ''}
            </dd>
            <dd><Spark points={points} field="power_w" what="Power (W)" floor={0} /></dd>
          </div>
        </dl>
      )}
    </li>
  );
}

export function GpuList({ state }: { state: IEgsState }): JSX.Element {
  if (state.gpus === null) {
    return <p className="egs-Muted">Loading…</p>;
  }
  const message = sourceMessage(state.gpus.source);
  const gpus = hottestFirst(state.gpus.gpus);
  return (
    <>
      {message && (
        <p className="egs-Note" role="note">
          {message}
        </p>
      )}
      {gpus.length ? (
        <ul className="egs-List">
          {gpus.map(gpu => (
            <GpuRow key={gpu.uuid} gpu={gpu} points={state.series[gpu.uuid] ?? []} />
          ))}
        </ul>
      ) : (
        <p className="egs-Muted">No GPUs are bound to your workspaces now.</p>
      )}
    </>
  );
}

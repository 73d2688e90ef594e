/** The "My endpoints" section: my slices' inference endpoints, their state, load and latency, and URL. */
import * as React from 'react';

import { endpointText, latencyText } from './state';
import { IEndpoint } from './tokens';

function EndpointRow({ endpoint, now }: { endpoint: IEndpoint; now: number }): JSX.Element {
  return (
    <li className="egs-Endpoint" data-endpoint={`${endpoint.slice}/${endpoint.name}`}>
      <div>
        <strong>{endpoint.name}</strong> <span className="egs-Muted">{endpoint.slice}</span>
      </div>
      <div className={endpoint.status === 'failed' ? 'egs-Error' : undefined}>{endpointText(endpoint, now)}</div>
      <div className="egs-Muted">
        {`${endpoint.requests_per_second.toFixed(2)} req/s · p50 ${latencyText(endpoint.latency_p50)} · ` +
          `p95 ${latencyText(endpoint.latency_p95)} · ${endpoint.errors} errors (1 min)`}
      </div>
      <a href={endpoint.url} target="_blank" rel="noopener noreferrer">
        {endpoint.url}
      </a>
    </li>
  );
}

export function EndpointList({ endpoints, now }: { endpoints: IEndpoint[]; now: number }): JSX.Element {
  if (!endpoints.length) {
    return <p className="egs-Muted">No endpoint in your workspaces: serve a model with %egs serve MODEL.</p>;
  }
  return (
    <ul className="egs-Endpoints" aria-label="My endpoints">
      {endpoints.map(e => (
        <EndpointRow key={`${e.slice}/${e.name}`} endpoint={e} now={now} />
      ))}
    </ul>
  );
}

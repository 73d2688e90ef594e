import {
  dueNotices,
  endpointText,
  hottestFirst,
  latencyText,
  ownGprs,
  sliceViews,
  statusText,
  whenText
} from '../state';
import { IEndpoint, IEndpointReplica } from '../tokens';
import { gpr, gpu, iso, NOW, provisioned, sample, slice } from './builders';

describe('sliceViews', () => {
  it('splits each slice’s GPRs into holding, waiting (queue order) and recent history', () => {
    const gprs = [
      provisioned({ id: 1 }),
      gpr({ id: 2, status: 'queued', queue_position: 2 }),
      gpr({ id: 3, status: 'pending-approval' }),
      gpr({ id: 4, status: 'queued', queue_position: 1 }),
      gpr({ id: 5, status: 'complete', ended_at: iso(-7200), end_reason: 'window-ended' }),
      gpr({ id: 6, status: 'cancelled', ended_at: iso(-60) }),
      gpr({ id: 7, slice: 'other', status: 'queued', queue_position: 1 })
    ];
    const [view] = sliceViews([slice()], gprs);
    expect(view.holding.map(g => g.id)).toEqual([1]);
    expect(view.waiting.map(g => g.id)).toEqual([4, 2, 3]);
    expect(view.history.map(g => g.id)).toEqual([6, 5]);
  });

  it('keeps only the latest history entries', () => {
    const ended = [1, 2, 3].map(id => gpr({ id, status: 'complete', ended_at: iso(-id * 60) }));
    expect(sliceViews([slice()], ended, 2)[0].history.map(g => g.id)).toEqual([1, 2]);
  });
});

describe('statusText', () => {
  const h100 = [gpu({ uuid: 'GPU-a' }), gpu({ uuid: 'GPU-b', index: 1 })];
  const cases: [string, Parameters<typeof statusText>[0], string][] = [
    ['held GPUs with model and time left', [provisioned()], '2 x H100 80GB HBM3 · 1h12m left'],
    [
      'the window that ends first',
      [provisioned({ id: 1, window_end: iso(9000) }), provisioned({ id: 2, window_end: iso(600), bound_gpus: [] })],
      '4 GPUs · 10m left'
    ],
    [
      'the first queued GPR, its start in local time',
      [
        gpr({ id: 1, queue_position: 5, estimated_start: iso(7200) }),
        gpr({ id: 2, queue_position: 3, estimated_start: iso(1200) })
      ],
      'queued #3 · starts ~14:20'
    ],
    ['a queued GPR that cannot be placed', [gpr({ queue_position: 1 })], 'queued #1 · no start yet'],
    ['waiting for approval', [gpr({ status: 'pending-approval' })], 'waiting for approval'],
    ['nothing held or waiting', [gpr({ status: 'complete' })], 'no GPUs']
  ];
  it.each(cases)('%s', (_, gprs, want) => {
    expect(statusText(gprs, h100, NOW)).toBe(want);
  });

  it('uses the requested shape when the GPUs are not in the GPU list', () => {
    expect(statusText([provisioned({ shape: 'H100' })], [], NOW)).toBe('2 x H100 · 1h12m left');
  });
});

describe('ownGprs', () => {
  it('keeps the user’s own GPRs, or all when the user is unknown', () => {
    const gprs = [gpr({ id: 1 }), gpr({ id: 2, requested_by: 'bob' })];
    expect(ownGprs(gprs, 'ann').map(g => g.id)).toEqual([1]);
    expect(ownGprs(gprs, null).map(g => g.id)).toEqual([1, 2]);
  });
});

describe('whenText', () => {
  it('counts down a provisioned window to the second', () => {
    expect(whenText(provisioned({ window_end: iso(4325) }), NOW)).toBe('1h12m05s left · until 15:12');
  });
  it('gives a queued GPR’s place and estimated start', () => {
    expect(whenText(gpr({ queue_position: 3, estimated_start: iso(1200) }), NOW)).toBe(
      '#3 in queue · starts ~14:20 (in 20m)'
    );
  });
  it('says how a GPR ended', () => {
    expect(whenText(gpr({ status: 'complete', ended_at: iso(-600), end_reason: 'evicted' }), NOW)).toBe(
      'ended 13:50 · evicted'
    );
  });
  it('gives the reason approval is needed', () => {
    expect(whenText(gpr({ status: 'pending-approval', status_reason: 'more than 4 GPUs' }), NOW)).toBe(
      "waiting for an admin's approval: more than 4 GPUs"
    );
  });
});

describe('hottestFirst', () => {
  it('orders by temperature, then power; GPUs without readings last', () => {
    const gpus = [
      gpu({ uuid: 'cool', sample: sample({ temperature_c: 40 }) }),
      gpu({ uuid: 'none', sample: null }),
      gpu({ uuid: 'hot', sample: sample({ temperature_c: 80 }) }),
      gpu({ uuid: 'warm-more-power', sample: sample({ temperature_c: 60, power_w: 500 }) }),
      gpu({ uuid: 'warm', sample: sample({ temperature_c: 60, power_w: 200 }) })
    ];
    expect(hottestFirst(gpus).map(g => g.uuid)).toEqual(['hot', 'warm-more-power', 'warm', 'cool', 'none']);
  });
});

describe('dueNotices', () => {
  const keys = (result: ReturnType<typeof dueNotices>) => result.notices.map(n => n.key);

  it('announces a GPR provisioned after the page loaded, once', () => {
    const first = dueNotices([gpr({ id: 7 })], NOW, new Set(), true);
    expect(keys(first)).toEqual([]);
    const then = dueNotices([provisioned({ id: 7 })], NOW, first.sent, false);
    expect(keys(then)).toEqual(['7:provisioned']);
    expect(then.notices[0].message).toBe('GPR 7 (2 GPUs in ml): 2 GPUs provisioned until 15:12.');
    expect(keys(dueNotices([provisioned({ id: 7 })], NOW, then.sent, false))).toEqual([]);
  });

  it('does not announce on page load what already happened', () => {
    const gprs = [
      provisioned({ id: 1 }),
      gpr({ id: 2, status: 'complete', end_reason: 'evicted' }),
      gpr({ id: 3, status: 'failed', status_reason: 'node lost' })
    ];
    const first = dueNotices(gprs, NOW, new Set(), true);
    expect(keys(first)).toEqual([]);
    expect([...first.sent].sort()).toEqual(['1:provisioned', '2:evicted', '3:failed']);
  });

  it('warns 10 minutes before a window ends, also on page load, and not twice', () => {
    const ending = provisioned({ id: 4, window_end: iso(540) });
    const first = dueNotices([ending], NOW, new Set(), true);
    expect(keys(first)).toEqual(['4:ending']);
    expect(first.notices[0].message).toBe('GPR 4 (2 GPUs in ml) ends in 9m, at 14:09. Save your work.');
    expect(keys(dueNotices([ending], NOW, first.sent, false))).toEqual([]);
  });

  it('warns before the end of a GPR it announced as provisioned', () => {
    const sent = new Set(['4:provisioned']);
    expect(keys(dueNotices([provisioned({ id: 4, window_end: iso(600) })], NOW, sent, false))).toEqual(['4:ending']);
    expect(keys(dueNotices([provisioned({ id: 4, window_end: iso(601) })], NOW, sent, false))).toEqual([]);
  });

  it('announces eviction, idle release and failure', () => {
    const gprs = [
      gpr({ id: 1, status: 'releasing', end_reason: 'evicted', status_reason: 'GPR 9 needs node-1' }),
      gpr({ id: 2, status: 'complete', end_reason: 'idle-released' }),
      gpr({ id: 3, status: 'failed', status_reason: 'binding failed' }),
      gpr({ id: 4, status: 'queued', end_reason: 'evicted', status_reason: 'GPR 9 needs node-1' })
    ];
    const result = dueNotices(gprs, NOW, new Set(), false);
    expect(result.notices.map(n => [n.key, n.kind])).toEqual([
      ['1:evicted', 'evicted'],
      ['2:idle-released', 'idle-released'],
      ['3:failed', 'failed'],
      ['4:evicted', 'evicted']
    ]);
    expect(result.notices[3].message).toBe(
      'GPR 4 (2 GPUs in ml) was evicted for a higher-priority request: GPR 9 needs node-1. It is queued again.'
    );
  });

  it('tells of each replaced node once, on page load too, with a restart', () => {
    const moved = provisioned({
      id: 5,
      window_end: iso(3600),
      replaced: [{ failed_node: 'gpu-node-1', node: 'gpu-node-2', at: iso(-60) }]
    });
    const first = dueNotices([moved], NOW, new Set(), true);
    expect(first.notices.map(n => [n.key, n.kind])).toEqual([[`5:replaced:${iso(-60)}`, 'replaced']]);
    expect(first.notices[0].message).toBe(
      'GPR 5 (2 GPUs in ml): node gpu-node-1 was replaced by gpu-node-2 at 13:59; restart from your checkpoint.'
    );
    expect(keys(dueNotices([moved], NOW, first.sent, false))).toEqual([]);
    const again = provisioned({
      ...moved,
      replaced: [...(moved.replaced ?? []), { failed_node: 'gpu-node-2', node: 'gpu-node-3', at: iso(-5) }]
    });
    expect(keys(dueNotices([again], NOW, first.sent, false))).toEqual([`5:replaced:${iso(-5)}`]);
    const old = provisioned({ id: 6, window_end: iso(3600), replaced: [{ failed_node: 'a', node: 'b', at: iso(-3600) }] });
    expect(keys(dueNotices([old], NOW, new Set(), false))).toEqual(['6:provisioned']);
  });

  it('says nothing about a window that is over but not yet released', () => {
    expect(keys(dueNotices([provisioned({ window_end: iso(-1) })], NOW, new Set(), false))).toEqual([]);
  });
});

function endpoint(change: Partial<IEndpoint> = {}): IEndpoint {
  return {
    slice: 'ml',
    name: 'echo',
    runtime: 'command',
    model: '',
    status: 'ready',
    message: null,
    url: '/services/egs/endpoints/ml/echo/',
    replicas: 1,
    wanted_replicas: 2,
    max_replicas: 2,
    replica_states: [],
    requests_per_second: 0,
    latency_p50: null,
    latency_p95: null,
    errors: 0,
    gpus: 1,
    template: null,
    cluster: null,
    command: ['srv'],
    image: null,
    args: [],
    env: {},
    min_replicas: 0,
    idle_timeout: 600,
    duration: 3600,
    target_concurrency: 4,
    health_path: '/health',
    metrics_path: null,
    gprs: [],
    in_flight: 0,
    queued: 0,
    gpu_utilization: null,
    last_request: null,
    created_by: 'ann',
    created_at: iso(-3600),
    ...change
  };
}

function replica(change: Partial<IEndpointReplica> = {}): IEndpointReplica {
  return {
    gpr: 3,
    gpr_status: 'queued',
    state: 'waiting',
    estimated_start: null,
    window_end: null,
    in_flight: 0,
    message: '',
    renewing: false,
    restarts: 0,
    ...change
  };
}

describe('endpointText', () => {
  it('says its replicas when it runs', () => {
    expect(endpointText(endpoint(), NOW)).toBe('ready · 1/2 replicas');
    expect(endpointText(endpoint({ status: 'starting', replicas: 0 }), NOW)).toBe('starting · 0/2 replicas');
  });
  it('says when a pending endpoint gets GPUs', () => {
    const waiting = endpoint({
      status: 'pending',
      replicas: 0,
      replica_states: [
        replica({ gpr: 3, estimated_start: iso(5400) }),
        replica({ gpr: 4, estimated_start: iso(3900) })
      ]
    });
    expect(endpointText(waiting, NOW)).toMatch(/^pending · GPUs ~\d\d:\d\d \(in 1h5m\)$/);
  });
  it('says why it failed, in one line', () => {
    const failed = endpoint({ status: 'failed', message: 'srv exited with status 3\nIts log ends: ...' });
    expect(endpointText(failed, NOW)).toBe('failed: srv exited with status 3');
    expect(endpointText(endpoint({ status: 'scaled-to-zero' }), NOW)).toBe('scaled to zero · a request starts it');
  });
});

describe('latencyText', () => {
  it('shows milliseconds below a second', () => {
    expect([latencyText(null), latencyText(0.2304), latencyText(1.44)]).toEqual(['-', '230 ms', '1.4 s']);
  });
});

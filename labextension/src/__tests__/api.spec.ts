import { ServerConnection } from '@jupyterlab/services';

import { EgsApi } from '../api';
import { EgsError, NOT_INSTALLED_MESSAGE } from '../handler';
import { checkRun, gpr } from './builders';

const BASE = 'http://localhost:8888/user/ann/';

interface ISeen {
  method: string;
  url: string;
  body: string;
  xsrf: string | null;
}

/** An EgsApi whose fetch answers from ``answer`` and records each request. */
function stubbed(answer: (request: Request) => Response | Promise<Response>): { api: EgsApi; seen: ISeen[] } {
  const seen: ISeen[] = [];
  const fetch = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const request = input instanceof Request ? input : new Request(input, init);
    seen.push({
      method: request.method,
      // makeRequest appends a cache buster (?<ms>) to every URL: not part of what is asserted
      url: request.url.replace(/[?&][0-9]+$/, ''),
      body: await request.clone().text(),
      xsrf: request.headers.get('X-XSRFToken')
    });
    return answer(request);
  };
  const settings = ServerConnection.makeSettings({ baseUrl: BASE, fetch });
  // Retried requests are tried again at once here (idempotency.spec.ts tests the retries).
  return { api: new EgsApi(settings, { most: 4, backoffMs: 0 }), seen };
}

const json = (body: unknown, status = 200) =>
  new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });

describe('EgsApi', () => {
  beforeEach(() => {
    document.cookie = '_xsrf=token-123';
  });

  it('reads the GPRs from egs/api/gprs with the XSRF token', async () => {
    const { api, seen } = stubbed(() => json({ gprs: [gpr({ id: 3 })], next_cursor: null }));
    const gprs = await api.gprs();
    expect(gprs.map(g => g.id)).toEqual([3]);
    expect(seen).toEqual([{ method: 'GET', url: `${BASE}egs/api/gprs?limit=1000`, body: '', xsrf: 'token-123' }]);
  });

  it('follows next_cursor through every page of GPRs', async () => {
    const pages: Record<string, unknown> = {
      '': { gprs: [gpr({ id: 1 }), gpr({ id: 2 })], next_cursor: 'c1' },
      c1: { gprs: [gpr({ id: 3 }), gpr({ id: 4 })], next_cursor: 'c-2_' },
      'c-2_': { gprs: [gpr({ id: 5 })], next_cursor: null }
    };
    const { api, seen } = stubbed(request => json(pages[new URL(request.url).searchParams.get('cursor') ?? '']));
    const gprs = await api.gprs();
    expect(gprs.map(g => g.id)).toEqual([1, 2, 3, 4, 5]);
    expect(seen.map(s => s.url.slice(BASE.length))).toEqual([
      'egs/api/gprs?limit=1000',
      'egs/api/gprs?limit=1000&cursor=c1',
      'egs/api/gprs?limit=1000&cursor=c-2_'
    ]);
  });

  it('reads the newest events back in time until it has enough, oldest first', async () => {
    const event = (id: number) => ({ id, time: `2024-05-14T12:00:0${id}Z`, kind: 'submitted' });
    const pages: Record<string, unknown> = {
      '': { events: [event(4), event(5)], next_cursor: 'older' },
      older: { events: [event(3)], next_cursor: 'oldest' }
    };
    const { api, seen } = stubbed(request => json(pages[new URL(request.url).searchParams.get('cursor') ?? '']));
    const events = await api.events(3);
    expect(events.map(e => e.id)).toEqual([3, 4, 5]);
    expect(seen.map(s => s.url.slice(BASE.length))).toEqual([
      'egs/api/events?limit=3',
      'egs/api/events?limit=1&cursor=older'
    ]);
  });

  it('reads a GPR’s checklist from egs/api/gprs/{id}/checks', async () => {
    const { api, seen } = stubbed(() => json({ gpr: 3, checks: [checkRun({ gpr: 3 })] }));
    const runs = await api.gprChecks(3);
    expect(runs.map(r => [r.gpr, r.name, r.status])).toEqual([[3, 'gpu-health', 'passed']]);
    expect(seen.map(s => `${s.method} ${s.url}`)).toEqual([`GET ${BASE}egs/api/gprs/3/checks`]);
  });

  it('posts a GPR request as JSON', async () => {
    const { api, seen } = stubbed(() => json(gpr({ id: 12 }), 201));
    const answer = await api.createGpr({ slice: 'ml', gpus: 2, duration: '2h' });
    expect(answer.id).toBe(12);
    expect(seen[0].method).toBe('POST');
    expect(seen[0].url).toBe(`${BASE}egs/api/gprs`);
    expect(JSON.parse(seen[0].body)).toEqual({ slice: 'ml', gpus: 2, duration: '2h' });
  });

  it('releases, cancels, asks for wait times and metrics at their paths', async () => {
    const { api, seen } = stubbed(request =>
      request.url.includes('wait-times')
        ? json({ options: [], needs_approval: [] })
        : request.url.includes('metrics')
          ? json({ uuid: 'GPU-a', step: 30, source: {}, points: [] })
          : json(gpr())
    );
    await api.releaseGpr(4);
    await api.cancelGpr(5);
    await api.waitTimes({ slice: 'ml', gpus: 1, duration: '1h' });
    await api.gpuMetrics('GPU-a/b', '2024-05-14T12:00:00.000Z', 30);
    expect(seen.map(s => `${s.method} ${s.url.slice(BASE.length)}`)).toEqual([
      'POST egs/api/gprs/4/release',
      'DELETE egs/api/gprs/5',
      'POST egs/api/wait-times',
      'GET egs/api/gpus/GPU-a%2Fb/metrics?since=2024-05-14T12%3A00%3A00.000Z&step=30'
    ]);
    expect(JSON.parse(seen[0].body)).toEqual({ reason: 'released from JupyterLab' });
  });

  it('restarts the server through egs/restart', async () => {
    const { api, seen } = stubbed(() => json({ restarting: true }, 202));
    expect(await api.restartServer()).toEqual({ restarting: true });
    expect(`${seen[0].method} ${seen[0].url}`).toBe(`POST ${BASE}egs/restart`);
  });

  it('turns the service’s error body into its message and field', async () => {
    const { api } = stubbed(() => json({ status: 400, message: 'duration must be at most 1d', field: 'duration' }, 400));
    const error = await api.createGpr({ slice: 'ml', gpus: 1, duration: '2d' }).catch(e => e);
    expect(error).toBeInstanceOf(EgsError);
    expect([error.message, error.status, error.field]).toEqual(['duration must be at most 1d', 400, 'duration']);
  });

  it('names the field when the message does not', async () => {
    const { api } = stubbed(() => json({ status: 400, message: 'must be a whole number', field: 'gpus' }, 400));
    await expect(api.waitTimes({ slice: 'ml', gpus: 1, duration: '1h' })).rejects.toThrow('must be a whole number (gpus)');
  });

  it('passes on the server extension’s 503 when no service is configured', async () => {
    const message = 'No EGS service is configured: set EGS_API_URL';
    const { api } = stubbed(() => json({ status: 503, message }, 503));
    await expect(api.slices()).rejects.toThrow(message);
  });

  it('says the server extension is missing on a 404 that is not the service’s', async () => {
    const { api } = stubbed(() => new Response('<html>404: Not Found</html>', { status: 404 }));
    await expect(api.config()).rejects.toThrow(NOT_INSTALLED_MESSAGE);
  });

  it('keeps the service’s own 404 message', async () => {
    const { api } = stubbed(() => json({ status: 404, message: 'no GPR with id 9' }, 404));
    await expect(api.releaseGpr(9)).rejects.toThrow('no GPR with id 9');
  });

  it('says what failed when the answer is not JSON', async () => {
    const { api } = stubbed(() => new Response('<html>Bad gateway</html>', { status: 502, statusText: 'Bad Gateway' }));
    await expect(api.gpus()).rejects.toThrow(`502 Bad Gateway from ${BASE}egs/api/gpus?sort=temperature`);
  });

  it('says the Jupyter server cannot be reached when fetch fails', async () => {
    const { api } = stubbed(() => {
      throw new TypeError('Failed to fetch');
    });
    await expect(api.gprs()).rejects.toThrow('Cannot reach the Jupyter server: Failed to fetch');
  });
});

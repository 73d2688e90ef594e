import { ServerConnection } from '@jupyterlab/services';

import { EgsApi } from '../api';
import { EgsError, IRetries, MAX_WAIT_MS, mayRetry, retryDelay } from '../handler';
import { CreateKeys, newKey } from '../idempotency';
import { EgsModel } from '../model';
import { gpr } from './builders';

const BASE = 'http://localhost:8888/user/ann/';
const NO_WAIT: IRetries = { most: 4, backoffMs: 0 };

interface ISeen {
  method: string;
  path: string;
  key: string | null;
  body: string;
}

type Answer = Response | 'no answer';

/** An EgsApi whose fetch answers ``answers`` in turn (the last one again once they are used up). */
function scripted(answers: (() => Answer)[], retries: IRetries = NO_WAIT): { api: EgsApi; seen: ISeen[] } {
  const seen: ISeen[] = [];
  const fetch = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const request = input instanceof Request ? input : new Request(input, init);
    seen.push({
      method: request.method,
      path: new URL(request.url).pathname.slice(new URL(BASE).pathname.length),
      key: request.headers.get('Idempotency-Key'),
      body: await request.clone().text()
    });
    const answer = answers[Math.min(seen.length, answers.length) - 1]();
    if (answer === 'no answer') {
      throw new TypeError('Failed to fetch');
    }
    return answer;
  };
  return { api: new EgsApi(ServerConnection.makeSettings({ baseUrl: BASE, fetch }), retries), seen };
}

const json = (body: unknown, status = 200) =>
  new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });
const failed = (status: number) => () => json({ status, message: `answered ${status}` }, status);
const noAnswer = (): Answer => 'no answer';

describe('a create sent again', () => {
  beforeEach(() => {
    document.cookie = '_xsrf=token-123';
  });

  it('carries an Idempotency-Key of its own, a new one for each create', async () => {
    const { api, seen } = scripted([() => json(gpr({ id: 7 }), 201)]);
    await api.createGpr({ slice: 'ml', gpus: 1, duration: '1h' });
    await api.createGpr({ slice: 'ml', gpus: 1, duration: '1h' });
    const hex = expect.stringMatching(/^[0-9a-f]{32}$/);
    expect(seen.map(s => s.key)).toEqual([hex, hex]);
    expect(seen[0].key).not.toBe(seen[1].key);
  });

  it('is sent again with the same key after a 503, a 502 and no answer', async () => {
    const { api, seen } = scripted([failed(503), failed(502), noAnswer, () => json(gpr({ id: 7 }), 201)]);
    const made = await api.createGpr({ slice: 'ml', gpus: 1, duration: '1h' });
    expect(made.id).toBe(7);
    expect(seen.map(s => `${s.method} ${s.path}`)).toEqual(Array(4).fill('POST egs/api/gprs'));
    expect(new Set(seen.map(s => s.key)).size).toBe(1);
    expect(new Set(seen.map(s => s.body)).size).toBe(1);
  });

  it('is sent a bounded number of times', async () => {
    const { api, seen } = scripted([failed(503)], { most: 2, backoffMs: 0 });
    const error = await api.createGpr({ slice: 'ml', gpus: 1, duration: '1h' }).catch(e => e);
    expect(error).toBeInstanceOf(EgsError);
    expect([error.status, seen.length]).toEqual([503, 3]);
  });

  it('is not sent again after an answer that is final', async () => {
    const { api, seen } = scripted([failed(422)]);
    await expect(api.createGpr({ slice: 'ml', gpus: 99, duration: '1h' })).rejects.toThrow('answered 422');
    expect(seen.length).toBe(1);
  });

  it('waits between tries', async () => {
    jest.useFakeTimers();
    try {
      const { api, seen } = scripted([failed(503), () => json(gpr({ id: 7 }), 201)], { most: 1, backoffMs: 1000 });
      const made = api.createGpr({ slice: 'ml', gpus: 1, duration: '1h' });
      await jest.advanceTimersByTimeAsync(400); // the least wait is half the backoff
      expect(seen.length).toBe(1);
      await jest.advanceTimersByTimeAsync(700);
      expect((await made).id).toBe(7);
      expect(seen.length).toBe(2);
    } finally {
      jest.useRealTimers();
    }
  });
});

describe('other requests', () => {
  it('a GET is sent again after a 503 or no answer', async () => {
    const { api, seen } = scripted([noAnswer, failed(503), () => json({ slices: [] })]);
    expect(await api.slices()).toEqual([]);
    expect(seen.map(s => s.method)).toEqual(['GET', 'GET', 'GET']);
    expect(seen.every(s => s.key === null)).toBe(true);
  });

  it('a POST that is no create is sent once', async () => {
    const { api, seen } = scripted([failed(503)]);
    await expect(api.releaseGpr(4)).rejects.toThrow('answered 503');
    expect(seen.length).toBe(1);
    const unreached = scripted([noAnswer]);
    await expect(unreached.api.cancelGpr(4)).rejects.toThrow('Cannot reach the Jupyter server');
    expect(unreached.seen.length).toBe(1);
  });

  it('mayRetry: GETs and requests with a key', () => {
    expect(mayRetry({})).toBe(true);
    expect(mayRetry({ method: 'get' })).toBe(true);
    expect(mayRetry({ method: 'POST', headers: { 'Idempotency-Key': newKey() } })).toBe(true);
    expect(mayRetry({ method: 'POST' })).toBe(false);
    expect(mayRetry({ method: 'DELETE', headers: { 'Content-Type': 'application/json' } })).toBe(false);
  });
});

describe('retryDelay', () => {
  const retries: IRetries = { most: 30, backoffMs: 500 };
  it.each([
    ['the backoff, with the least jitter', 1, null, 0, 250],
    ['the backoff, with the most jitter', 1, null, 1, 500],
    ['doubled for each try', 3, null, 1, 2000],
    ['at least Retry-After', 1, '3', 0, 3000],
    ['a Retry-After that is a date is not read', 1, 'Wed, 21 Oct 2026 07:28:00 GMT', 1, 500],
    ['at most MAX_WAIT_MS', 20, '600', 1, MAX_WAIT_MS]
  ])('%s', (_name, tries, retryAfter, spread, want) => {
    expect(retryDelay(retries, tries as number, retryAfter as string | null, spread as number)).toBe(want);
  });
});

describe('CreateKeys', () => {
  it('keeps the key of the same body until it is answered', () => {
    const keys = new CreateKeys();
    const first = keys.keyFor({ slice: 'ml', gpus: 1 });
    expect(keys.keyFor({ slice: 'ml', gpus: 1 })).toBe(first); // pressed again after an error: a retry
    const other = keys.keyFor({ slice: 'ml', gpus: 2 });
    expect(other).not.toBe(first); // another request
    keys.answered(other);
    expect(keys.keyFor({ slice: 'ml', gpus: 2 })).not.toBe(other); // the same again, once answered: a new one
  });

  it('the model sends a request pressed again after a failure with its key, and a new one after an answer', async () => {
    const { api, seen } = scripted([noAnswer, noAnswer, noAnswer, noAnswer, noAnswer, () => json(gpr({ id: 7 }), 201)]);
    const model = new EgsModel(api);
    const body = { slice: 'ml', gpus: 1, duration: '1h' };
    await expect(model.request(body)).rejects.toThrow('Cannot reach the Jupyter server');
    expect((await model.request(body)).id).toBe(7);
    await model.request(body);
    model.dispose();
    const keys = seen.map(s => s.key);
    expect(keys.length).toBe(7);
    expect(new Set(keys.slice(0, 6)).size).toBe(1); // 5 tries, then the person's retry
    expect(keys[6]).not.toBe(keys[0]);
  });
});

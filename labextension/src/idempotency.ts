/**
 * Idempotency keys of the sidebar's creates (issue 45): the EGS service makes a create sent with an
 * ``Idempotency-Key`` once, however often it comes, and answers a retry with what the first made.
 *
 * ``newKey`` makes a key: 128 random bits as hex, from ``crypto.getRandomValues`` (``randomUUID`` needs a
 * secure context, and a hub may be served over plain HTTP). ``CreateKeys`` keeps the key of a create that
 * has not been answered yet: sending the same body again (the person presses "Request GPUs" again after
 * an error) is a retry of the same create, with the same key; once one is answered, or the body changed,
 * the next create gets a new key.
 */

export const IDEMPOTENCY_KEY = 'Idempotency-Key';

export function newKey(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, byte => byte.toString(16).padStart(2, '0')).join('');
}

export class CreateKeys {
  /** The key for a create of ``body``: the unanswered one's when it had the same body, else a new one. */
  keyFor(body: object): string {
    const text = JSON.stringify(body);
    if (this._pending?.body !== text) {
      this._pending = { body: text, key: newKey() };
    }
    return this._pending.key;
  }

  /** The create sent with ``key`` was answered: a create after it is a new one. */
  answered(key: string): void {
    if (this._pending?.key === key) {
      this._pending = null;
    }
  }

  private _pending: { body: string; key: string } | null = null;
}

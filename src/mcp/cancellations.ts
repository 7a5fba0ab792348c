// 2025-era cancellation across requests: a client cancels a request it sent by posting `notifications/cancelled`
// naming its JSON-RPC id, in a request of its own. svc answers every POST on a server of its own, so the request being
// cancelled is found here, by the caller, their session and the id: only the caller who sent a request can cancel
// it (another user's notification, or one of another session, names nothing here). Within one instance: a cancel
// that lands on another instance finds nothing, and the call ends by its `timeout` or the client closing its stream.

/** The requests under way that a cancel may reach, by caller, session and id. */
export class Cancellations {
  private readonly open = new Map<string, () => void>();

  /** A request under way that a cancel naming `id` (from the same user and session) cancels (`cancel`), until `done`. */
  register(userId: number, session: string, id: string | number, cancel: () => void): { done(): void } {
    const key = keyOf(userId, session, id);
    // A second request with the same id (a client's mistake) takes the key; the first stays cancellable by its stream.
    this.open.set(key, cancel);
    return {
      done: () => {
        if (this.open.get(key) === cancel) this.open.delete(key);
      },
    };
  }

  /** Each `notifications/cancelled` in a body, applied to the caller's own requests under way. */
  cancelFrom(userId: number, session: string, body: unknown): void {
    for (const m of Array.isArray(body) ? body : [body]) {
      if (typeof m !== 'object' || m === null) continue;
      const { method, params } = m as { method?: unknown; params?: { requestId?: unknown } };
      const id = params?.requestId;
      if (method !== 'notifications/cancelled' || (typeof id !== 'string' && typeof id !== 'number')) continue;
      this.open.get(keyOf(userId, session, id))?.();
    }
  }
}

/** The id's type is part of the key: a request of id 1 and one of id "1" are different requests. */
const keyOf = (userId: number, session: string, id: string | number) => `${userId}\n${session}\n${typeof id}:${id}`;

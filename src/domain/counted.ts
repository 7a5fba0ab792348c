// Events counted rather than written one by one: the first of a key in a window is written at once, the rest are
// counted and added shortly before the window ends (or when svc stops). A flood of them costs no write each, and the
// trail holds one row per key and window with their count.

export interface CountedRecorder<E> {
  record(event: E): Promise<void>;
  /** writes what is counted but not written yet (at shutdown) */
  flush(): Promise<void>;
}

/** At most this many keys are counted at once; past that an event is written alone. */
const MAX_OPEN = 10_000;

export function countedRecorder<E>(
  keyOf: (event: E) => string,
  write: (event: E, count: number) => Promise<void>,
  windowMs: number,
): CountedRecorder<E> {
  const open = new Map<string, { event: E; until: number; pending: number; timer: NodeJS.Timeout | null }>();
  const settle = (key: string) => {
    const entry = open.get(key);
    open.delete(key);
    if (entry?.timer) clearTimeout(entry.timer);
    return entry && entry.pending > 0 ? write(entry.event, entry.pending) : Promise.resolve();
  };
  return {
    async record(event) {
      const now = Date.now();
      const key = keyOf(event);
      const entry = open.get(key);
      if (entry && entry.until > now) {
        entry.pending++;
        entry.timer ??= setTimeout(() => void settle(key).catch(() => undefined), Math.max(0, entry.until - now - 1000)).unref();
        return;
      }
      if (entry) await settle(key);
      // Keys whose window is over go once the map is full (one seen once is otherwise kept for good).
      if (open.size >= MAX_OPEN) for (const [k, e] of open) if (e.until <= now) void settle(k).catch(() => undefined);
      if (open.size < MAX_OPEN) open.set(key, { event, until: now + windowMs, pending: 0, timer: null });
      await write(event, 1);
    },
    async flush() {
      await Promise.all([...open.keys()].map((key) => settle(key)));
    },
  };
}

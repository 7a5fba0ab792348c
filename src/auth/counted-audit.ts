// Refusals anyone can cause without signing in (a forged proxy request) are kept in the audit trail as one row per
// peer and reason per minute (store/audit.ts recordCountedAudit); this recorder keeps a flood of them from costing a
// write each in this process.
import type { Database } from '../db/open.ts';
import { COUNTED_WINDOW_MS, recordCountedAudit } from '../store/audit.ts';

type CountedEvent = Parameters<typeof recordCountedAudit>[1];

/**
 * recordCountedAudit with one write per peer and reason per minute in this process: the first event of a minute
 * is written at once, the rest are counted here and added shortly before the minute ends. A flood of refused
 * requests then costs no write each.
 */
export interface CountedAuditRecorder {
  record(event: CountedEvent): Promise<void>;
  /** writes what is counted but not written yet (at shutdown) */
  flush(): Promise<void>;
}

export function countedAuditRecorder(database: Database): CountedAuditRecorder {
  const open = new Map<string, { event: CountedEvent; until: number; pending: number; timer: NodeJS.Timeout | null }>();
  const MAX_OPEN = 10_000;
  const write = (event: CountedEvent, count: number) => database.write((tx) => recordCountedAudit(tx, event, count));
  const settle = (key: string) => {
    const entry = open.get(key);
    open.delete(key);
    if (entry?.timer) clearTimeout(entry.timer);
    return entry && entry.pending > 0 ? write(entry.event, entry.pending) : Promise.resolve();
  };
  return {
    async record(event) {
      const now = Date.now();
      const key = `${event.action}\n${event.peer}\n${event.reason}`;
      const entry = open.get(key);
      if (entry && entry.until > now) {
        entry.pending++;
        entry.timer ??= setTimeout(() => void settle(key).catch(() => undefined), Math.max(0, entry.until - now - 1000)).unref();
        return;
      }
      if (entry) await settle(key);
      if (open.size < MAX_OPEN) open.set(key, { event, until: now + COUNTED_WINDOW_MS, pending: 0, timer: null });
      await write(event, 1);
    },
    async flush() {
      await Promise.all([...open.keys()].map((key) => settle(key)));
    },
  };
}

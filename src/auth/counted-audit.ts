// Refusals anyone can cause without signing in (a forged proxy request) are kept in the audit trail as one row per
// peer and reason per minute (store/audit.ts recordCountedAudit); this recorder keeps a flood of them from costing a
// write each in this process.
import type { Database } from '../db/open.ts';
import { COUNTED_WINDOW_MS, recordCountedAudit } from '../store/audit.ts';
import { countedRecorder, type CountedRecorder } from '../domain/counted.ts';

type CountedEvent = Parameters<typeof recordCountedAudit>[1];

/**
 * recordCountedAudit with one write per peer and reason per minute in this process: the first event of a minute
 * is written at once, the rest are counted here and added shortly before the minute ends. A flood of refused
 * requests then costs no write each.
 */
export type CountedAuditRecorder = CountedRecorder<CountedEvent>;

export function countedAuditRecorder(database: Database): CountedAuditRecorder {
  return countedRecorder(
    (event) => `${event.action}\n${event.peer}\n${event.reason}`,
    (event, count) => database.write((tx) => recordCountedAudit(tx, event, count)),
    COUNTED_WINDOW_MS,
  );
}

// The audit trail keeps `audit_retention`: older entries are removed in small batches, each its own transaction so
// writers are never held up for long, soon after start and then hourly.
import type { Database } from '../db/open.ts';
import { pruneAuditBatch } from '../store/audit.ts';
import { safeDatabaseMessage } from '../db/errors.ts';
import type { Logger } from '../log.ts';

export const AUDIT_PRUNE_BATCH = 1000;

/** Removes every entry older than the retention, a batch at a time; returns how many. */
export async function pruneAudit(database: Database, retentionMs: number, now = Date.now()): Promise<number> {
  let removed = 0;
  for (;;) {
    const n = await database.write((tx) => pruneAuditBatch(tx, now - retentionMs, AUDIT_PRUNE_BATCH));
    removed += n;
    if (n < AUDIT_PRUNE_BATCH) return removed;
  }
}

/** Prunes a second after start and every hour; `stop` waits for a round under way. */
export function startAuditRetention(database: Database, retentionMs: number, log: Logger): { stop(): Promise<void> } {
  let pruning: Promise<void> = Promise.resolve();
  const prune = () => {
    pruning = pruneAudit(database, retentionMs)
      .then((removed) => (removed > 0 ? log.info('audit_pruned', { removed }) : undefined))
      .catch((e: unknown) => log.warn('audit_prune_failed', { error: safeDatabaseMessage(e) }));
  };
  const first = setTimeout(prune, 1000).unref();
  const hourly = setInterval(prune, 3600_000).unref();
  return {
    async stop() {
      clearTimeout(first);
      clearInterval(hourly);
      await pruning;
    },
  };
}

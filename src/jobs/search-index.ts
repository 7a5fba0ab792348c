// Items written by an svc older than its search index (or straight into the database) have no postings yet. They are
// indexed in the background once svc serves, a batch per transaction, found by reads so that no write lock is held
// while looking; until then a search does not find them. Several instances may run this at once: each batch
// indexes only what is still without postings inside its transaction.
import type { Database } from '../db/open.ts';
import { indexUnindexed, unindexedItems } from '../store/search.ts';
import { safeDatabaseMessage } from '../db/errors.ts';
import type { Logger } from '../log.ts';

const BATCH = 500;

/** Indexes every item that lacks postings; returns how many it indexed. `stopped()` ends it between batches. */
export async function indexUnindexedItems(database: Database, log: Logger, stopped: () => boolean = () => false): Promise<number> {
  let indexed = 0;
  for (let after: number | null = 0; after !== null && !stopped(); ) {
    const found = await unindexedItems(database.db, after, BATCH);
    after = found.last;
    if (found.seqs.length === 0) continue;
    const n = await database.write((tx) => indexUnindexed(tx, found.seqs));
    if (Math.floor((indexed + n) / 50_000) > Math.floor(indexed / 50_000)) log.info('search_indexing', { indexed: indexed + n });
    indexed += n;
  }
  if (indexed > 0) log.info('search_indexed', { items: indexed });
  return indexed;
}

/** Starts indexing in the background; `stop` ends it after the batch under way. */
export function startSearchIndexing(database: Database, log: Logger): { stop(): Promise<void> } {
  let stop = false;
  const running = indexUnindexedItems(database, log, () => stop).then(
    () => undefined,
    (e: unknown) => log.warn('search_indexing_failed', { error: safeDatabaseMessage(e) }),
  );
  return {
    async stop() {
      stop = true;
      await running;
    },
  };
}

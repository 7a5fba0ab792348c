// Items written by an svc older than its search index, or by any writer other than svc (an older svc during an
// upgrade, plain SQL), wait in search_pending, listed by triggers. They are indexed in the background once svc serves
// and every minute after, a batch per transaction, found by reads so that no write lock is held while looking; until
// then a search does not find them. Several instances may run this at once: each batch indexes only what is still
// waiting inside its transaction.
//
// On the embedded file a batch holds the event loop while it runs, so batches are sized to take about BATCH_MS (the
// next is halved after a slower one and doubled after a quicker one) and the event loop turns between two: requests
// are served while a million items are indexed. Larger batches index faster (their postings, written sorted, share
// the index's pages), so they grow as far as that allows.
import { setImmediate } from 'node:timers/promises';
import type { Database } from '../db/open.ts';
import { indexUnindexed, unindexedItems } from '../store/search.ts';
import { safeDatabaseMessage } from '../db/errors.ts';
import type { Logger } from '../log.ts';

const BATCH_MS = 80;
const MAX_BATCH = 500;
/** A batch takes at most this much text per item it may hold: large documents make smaller batches. */
const CHARS_PER_ITEM = 2048;

/** Indexes every item that lacks postings; returns how many it indexed. `stopped()` ends it between batches. */
export async function indexUnindexedItems(database: Database, log: Logger, stopped: () => boolean = () => false): Promise<number> {
  let indexed = 0;
  let batch = 16;
  for (let after: number | null = 0; after !== null && !stopped(); ) {
    const found = await unindexedItems(database.db, after, batch, batch * CHARS_PER_ITEM);
    after = found.last;
    if (found.seqs.length === 0) continue;
    const started = performance.now();
    const n = await database.write((tx) => indexUnindexed(tx, found.seqs));
    const took = performance.now() - started;
    if (took > BATCH_MS * 1.5) batch = Math.max(1, Math.floor(batch / 2));
    else if (took < BATCH_MS / 2 && found.seqs.length === batch) batch = Math.min(MAX_BATCH, batch * 2);
    await setImmediate();
    if (Math.floor((indexed + n) / 50_000) > Math.floor(indexed / 50_000)) log.info('search_indexing', { indexed: indexed + n });
    indexed += n;
  }
  if (indexed > 0) log.info('search_indexed', { items: indexed });
  return indexed;
}

/** How often the job looks for items another writer than svc wrote. */
const EVERY_MS = 60_000;

/** Indexes in the background at start and then every minute; `stop` ends it after the batch under way. */
export function startSearchIndexing(database: Database, log: Logger): { stop(): Promise<void> } {
  let stop = false;
  let running: Promise<void> | null = null;
  // A run still under way when the minute comes is not joined by another.
  const run = () => {
    running ??= indexUnindexedItems(database, log, () => stop).then(
      () => {
        running = null;
      },
      (e: unknown) => {
        running = null;
        log.warn('search_indexing_failed', { error: safeDatabaseMessage(e) });
      },
    );
  };
  run();
  const timer = setInterval(run, EVERY_MS).unref();
  return {
    async stop() {
      stop = true;
      clearInterval(timer);
      await running;
    },
  };
}

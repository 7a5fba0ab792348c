// Point lookups that arrive together, answered together in the next turn of the event loop: on a database server
// in one statement (each costs a round trip and the server's CPU), and on the embedded file one after another, so
// the requests waiting on them go on together. A lookup only ever joins a batch that has not been read yet, so every
// answer was read after its request arrived (a revoked token is refused on the next request).

import { isUnreachable } from './errors.ts';

/** Runs one statement for many keys; the rows found, by key (a key with no row is absent). */
export type ManyLookup<R> = (keys: readonly string[]) => Promise<ReadonlyMap<string, R>>;

interface Waiting<R> {
  readonly key: string;
  resolve(row: R | undefined): void;
  reject(e: unknown): void;
}

/**
 * One key's lookup, batched: lookups made in one turn of the event loop go out together, at most `inFlight`
 * statements are on their way at once, and lookups made meanwhile wait for the next statement (up to `maxKeys`
 * keys each).
 */
export function batchedLookup<R>(many: ManyLookup<R>, inFlight: number, maxKeys: number): (key: string) => Promise<R | undefined> {
  let waiting: Waiting<R>[] = [];
  let running = 0;
  let scheduled = false;

  const send = () => {
    scheduled = false;
    while (running < inFlight && waiting.length > 0) {
      const batch = waiting.slice(0, maxKeys);
      waiting = waiting.slice(batch.length);
      running++;
      many([...new Set(batch.map((w) => w.key))])
        .then(
          (found) => {
            for (const w of batch) w.resolve(found.get(w.key));
          },
          (e: unknown) => {
            // When the server did not answer (or cannot be reached), the lookups waiting meanwhile fail with it rather
            // than each wait for a statement of their own, 2 per 5 s deadline; requests after them read afresh.
            // Any other failure is this statement's alone.
            const failed = isUnreachable(e) ? [...batch, ...waiting] : batch;
            if (failed !== batch) waiting = [];
            for (const w of failed) w.reject(e);
          },
        )
        .finally(() => {
          running--;
          send();
        });
    }
  };

  return (key) =>
    new Promise<R | undefined>((resolve, reject) => {
      waiting.push({ key, resolve, reject });
      // Sent once this turn's lookups have joined; while every slot is busy, the next one to finish sends.
      if (!scheduled && running < inFlight) {
        scheduled = true;
        setImmediate(send);
      }
    });
}

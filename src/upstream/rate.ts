// `rate` of an upstream (CONTRACT §6.1): calls per person per upstream, counted in fixed windows. One process counts
// its own; with `svc serve --workers N` the primary counts for all its workers, each call asking it over the
// cluster's IPC channel, so N workers allow the rate once, not N times. Several instances each count their own.
import cluster, { type Worker } from 'node:cluster';
import type { UpstreamConfig } from '../config/load.ts';

export type Rate = NonNullable<UpstreamConfig['rate']>;

/** The windows of one process: per key (upstream and person), the start of the current window and its calls. */
export class RateWindows {
  private readonly windows = new Map<string, { start: number; calls: number }>();

  /** Counts a call: null when it is within the rate, else the seconds to wait. */
  take(key: string, rate: Rate, now: number): number | null {
    const window = this.windows.get(key);
    if (!window || now - window.start >= rate.perSeconds * 1000) {
      // Windows of people who stopped calling go once there are many; a window lasts an hour at most.
      if (this.windows.size >= 10_000) for (const [k, w] of this.windows) if (now - w.start >= 3_600_000) this.windows.delete(k);
      this.windows.set(key, { start: now, calls: 1 });
      return null;
    }
    if (window.calls >= rate.calls) return Math.max(1, Math.ceil((window.start + rate.perSeconds * 1000 - now) / 1000));
    window.calls++;
    return null;
  }
}

/** Where a process counts: its own windows, or its cluster primary's. */
export interface RateCounter {
  take(key: string, rate: Rate): Promise<number | null>;
}

const ASK = 'svc-rate';
const ANSWER = 'svc-rate-answer';
/** A worker whose primary does not answer in time refuses the call (wait 1 s) rather than holding it or counting alone. */
const ASK_TIMEOUT_MS = 2000;

interface Ask {
  readonly type: typeof ASK;
  readonly id: number;
  readonly key: string;
  readonly rate: Rate;
}
interface Answer {
  readonly type: typeof ANSWER;
  readonly id: number;
  readonly wait: number | null;
}

/** The counter of this process: the primary's when it is a cluster worker. */
export function rateCounter(): RateCounter {
  const own = new RateWindows();
  const local: RateCounter = { take: async (key, rate) => own.take(key, rate, Date.now()) };
  if (!cluster.isWorker || !process.send) return local;
  const waiting = new Map<number, (wait: number | null) => void>();
  let next = 0;
  process.on('message', (m: Partial<Answer>) => {
    if (m?.type !== ANSWER || typeof m.id !== 'number') return;
    waiting.get(m.id)?.(m.wait ?? null);
    waiting.delete(m.id);
  });
  return {
    take(key, rate) {
      const id = ++next;
      return new Promise((resolve) => {
        const timer = setTimeout(() => {
          waiting.delete(id);
          resolve(1);
        }, ASK_TIMEOUT_MS);
        waiting.set(id, (wait) => {
          clearTimeout(timer);
          resolve(wait);
        });
        process.send!({ type: ASK, id, key, rate } satisfies Ask);
      });
    },
  };
}

/** In the cluster primary: counts for every worker. */
export function countForWorkers(): void {
  const windows = new RateWindows();
  cluster.on('message', (worker: Worker, m: Partial<Ask>) => {
    if (m?.type !== ASK || typeof m.id !== 'number' || typeof m.key !== 'string' || !m.rate) return;
    const wait = windows.take(m.key, m.rate, Date.now());
    if (worker.isConnected()) worker.send({ type: ANSWER, id: m.id, wait } satisfies Answer);
  });
}

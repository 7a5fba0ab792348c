// autocannon with every response's own time kept. autocannon's latency histogram stores whole milliseconds, cut
// down (a 2.98 ms p50 reads 2), so a ratio of two of its percentiles near a few milliseconds can be off by half.
// Percentiles here are read from the times themselves, in fractions of a millisecond.
import autocannon from 'autocannon';

/** The p-th percentile of `xs` (the value at rank ⌊n·p/100⌋ of the sorted values); NaN when there are none. */
export function percentile(xs: readonly number[], p: number): number {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))]!;
}

/** The median of `xs` by the same rule: the value at rank ⌊n/2⌋ of the sorted values. */
export function median(xs: readonly number[]): number {
  return percentile(xs, 50);
}

export interface Timed {
  readonly result: autocannon.Result;
  /** the p-th percentile of the 2xx responses' times, in ms */
  pct(p: number): number;
}

export function timedLoad(options: autocannon.Options): Promise<Timed> {
  const times: number[] = [];
  return new Promise((resolve, reject) => {
    const run = autocannon(options, (error, result) => {
      if (error) return reject(error);
      resolve({ result, pct: (p) => percentile(times, p) });
    });
    run.on('response', (_client, status, _bytes, ms) => {
      if (status >= 200 && status < 300) times.push(ms);
    });
  });
}

// autocannon with every response's own time kept. autocannon's latency histogram stores whole milliseconds, cut
// down (a 2.98 ms p50 reads 2), so a ratio of two of its percentiles near a few milliseconds can be off by half.
// Percentiles here are read from the times themselves, in fractions of a millisecond.
import autocannon from 'autocannon';

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
      times.sort((a, b) => a - b);
      resolve({
        result,
        pct: (p) => (times.length === 0 ? Number.NaN : times[Math.min(times.length - 1, Math.floor((times.length * p) / 100))]!),
      });
    });
    run.on('response', (_client, status, _bytes, ms) => {
      if (status >= 200 && status < 300) times.push(ms);
    });
  });
}

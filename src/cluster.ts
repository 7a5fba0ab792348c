// `svc serve --workers N`: N processes serving one listening socket (node:cluster). The primary applies migrations
// and checks the database once, before any worker listens; it restarts a worker that dies, and on SIGINT/SIGTERM
// stops them all within the grace period. Workers share nothing but the database, which is all svc relies on.
import cluster, { type Worker } from 'node:cluster';
import { availableParallelism } from 'node:os';
import type { Config } from './config/load.ts';
import { openDatabase } from './db/open.ts';
import { SHUTDOWN_GRACE_MS, StartupError } from './server.ts';
import type { Logger } from './log.ts';
import { IN_EXECUTABLE } from './runtime/assets.ts';
import { countForWorkers } from './upstream/rate.ts';

/** `workers` as configured: 0 means one per core. */
export function workerCount(configured: number): number {
  return configured === 0 ? availableParallelism() : configured;
}

/** A worker that dies sooner than this after its start is restarted only after a pause, so a crash loop cannot spin. */
const QUICK_DEATH_MS = 5000;

export async function servePrimary(config: Config, log: Logger, workers: number): Promise<number> {
  const database = await openDatabase(config.server.database, config.server.databaseToken);
  try {
    await database.migrate();
    const problems = await database.problems();
    if (problems.length > 0) throw new StartupError(problems.join('\n'));
    // Said and settled once here, so the workers starting together find nothing to say.
    if (config.upstreams.length > 0 && config.auth.session)
      await (await import('./upstream/secret-change.ts')).settleSecretChange(database, config.auth.session.secret, log);
  } finally {
    database.close();
  }
  log.info('workers_starting', { workers, database: database.location });
  // The workers keep the counts; the primary answers scrapes with their sum.
  let metricsListener: { close(): void } | null = null;
  if (config.server.metrics) {
    const { serveScrapes, clusterScrape } = await import('./metrics/prometheus.ts');
    metricsListener = await serveScrapes(config.server.metrics, clusterScrape(), log);
  }
  // Inside the single executable each worker applies the executable's own flags; passed again they would arrive
  // as arguments of the command line.
  if (IN_EXECUTABLE) cluster.setupPrimary({ execArgv: [] });
  let stopping = false;
  const started = new Map<Worker, number>();
  const fork = () => {
    const worker = cluster.fork();
    started.set(worker, Date.now());
  };
  cluster.on('exit', (worker, code, signal) => {
    const lived = Date.now() - (started.get(worker) ?? 0);
    started.delete(worker);
    if (stopping) return;
    log.warn('worker_died', { pid: worker.process.pid, code, signal, restart_in_ms: lived < QUICK_DEATH_MS ? 1000 : 0 });
    if (lived < QUICK_DEATH_MS) setTimeout(fork, 1000);
    else fork();
  });
  // An upstream's `rate` is counted here for every worker.
  countForWorkers();
  for (let i = 0; i < workers; i++) fork();

  await new Promise<void>((resolve) => {
    let signals = 0;
    const onSignal = (signal: string) => {
      signals++;
      stopping = true;
      log.info(signals === 1 ? 'shutting_down' : 'shutting_down_now', { signal, workers: started.size });
      // A worker stops gracefully at its first signal, and cuts in-flight requests at its second.
      for (const worker of started.keys()) worker.process.kill('SIGTERM');
      const force = setTimeout(() => {
        for (const worker of started.keys()) worker.process.kill('SIGKILL');
      }, SHUTDOWN_GRACE_MS + 5000);
      force.unref();
      const check = setInterval(() => {
        if (started.size === 0) {
          clearInterval(check);
          clearTimeout(force);
          resolve();
        }
      }, 50);
    };
    process.on('SIGINT', () => onSignal('SIGINT'));
    process.on('SIGTERM', () => onSignal('SIGTERM'));
  });
  metricsListener?.close();
  log.info('stopped');
  return 0;
}

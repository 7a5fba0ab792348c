// Every CLI command, in the order --help lists them.
import { type Command, withDatabase, str } from './command.ts';
import { userCommands } from './users.ts';
import { itemCommands } from './items.ts';
import { toolCommands } from './tools.ts';
import { keyCommands } from './keys.ts';
import { tokenCommands } from './tokens.ts';
import { oauthCommands } from './oauth.ts';
import { auditCommands } from './audit.ts';
import cluster from 'node:cluster';
import { startServer } from '../server.ts';
import { servePrimary, workerCount } from '../cluster.ts';
import { UsageError } from './errors.ts';
import { createLogger } from '../log.ts';
import { openDatabase } from '../db/open.ts';
import { ConfigError, type Config } from '../config/load.ts';
import { traceSettings, TraceSettingsError } from '../trace/settings.ts';

/**
 * What `svc serve` would find sealed under another session secret (upstream/secret-change.ts), as a warning; null when
 * there is nothing, or when the database is not migrated far enough to hold it (serve migrates, then says so).
 */
async function secretChangeWarning(config: Config): Promise<string | null> {
  if (config.upstreams.length === 0 || !config.auth.session) return null;
  const { sealedElsewhere, secretChangeWarning: warning } = await import('../upstream/secret-change.ts');
  const database = await openDatabase(config.server.database, config.server.databaseToken);
  try {
    return warning(await sealedElsewhere(database, config.auth.session.secret), 'check');
  } catch {
    return null;
  } finally {
    database.close();
  }
}

/** The tracing the environment asks for (CONTRACT §8), checked like svc.ini: a malformed variable is named. */
function checkTracing(env: Readonly<Record<string, string | undefined>>): void {
  try {
    traceSettings(env);
  } catch (e) {
    if (e instanceof TraceSettingsError) throw new ConfigError([`svc: config: environment: ${e.message}`]);
    throw e;
  }
}

const serverCommands: Command[] = [
  {
    name: ['serve'],
    usage: 'serve [--workers N]',
    summary: 'apply pending migrations and serve HTTP',
    help: `Applies pending migrations, then serves HTTP until SIGINT or SIGTERM (graceful: in-flight requests finish).
Options:
  --workers N   processes serving one socket (0 = one per core; default: [server] workers, else 1)`,
    positionals: [],
    options: { workers: { type: 'string' } },
    configMode: 'serve',
    async run(ctx) {
      const config = ctx.config();
      checkTracing(ctx.env);
      const log = createLogger(undefined, config.server.logLevel);
      const flagged = str(ctx, 'workers');
      if (flagged !== undefined && !/^\d{1,3}$/.test(flagged))
        throw new UsageError('--workers takes a number of processes (0 = one per core)');
      const workers = workerCount(flagged === undefined ? config.server.workers : Number(flagged));
      if (cluster.isPrimary && config.upstreams.length > 0) {
        const { sandboxWarnings } = await import('../upstream/stdio-sandbox.ts');
        for (const w of sandboxWarnings(config)) log.warn('upstream_not_sandboxed', { upstream: w.upstream, warning: w.warning });
      }
      if (cluster.isPrimary && workers > 1) return servePrimary(config, log, workers);
      const running = await startServer(config, log);
      await new Promise<void>((resolve) => {
        // The first signal stops gracefully; a second one cuts in-flight requests, and svc still closes cleanly.
        let signals = 0;
        const onSignal = (signal: string) => {
          signals++;
          log.info(signals === 1 ? 'shutting_down' : 'shutting_down_now', { signal });
          void (signals === 1 ? running.stop() : running.stopNow()).then(resolve);
        };
        process.on('SIGTERM', () => onSignal('SIGTERM'));
        // A worker's Ctrl-C reaches the primary too, which forwards SIGTERM: the worker itself leaves SIGINT alone.
        process.on('SIGINT', () => (cluster.isWorker ? undefined : onSignal('SIGINT')));
      });
      // A worker's channel to the primary would keep it alive.
      cluster.worker?.disconnect();
      return 0;
    },
  },
  {
    name: ['check'],
    usage: 'check',
    summary: 'validate the configuration and what it names',
    help: 'Validates svc.ini and the environment variables it names, then opens the database; prints every problem.',
    positionals: [],
    options: {},
    configMode: 'serve',
    async run(ctx) {
      const config = ctx.config();
      checkTracing(ctx.env);
      let location: string;
      try {
        const database = await openDatabase(config.server.database, config.server.databaseToken);
        location = database.location;
        // Pending migrations are fine here: serve applies them. A database that cannot be read or written is not.
        const problems = await database.problems({ pendingIsProblem: false }).finally(() => database.close());
        if (problems.length > 0) {
          for (const p of problems) ctx.io.err(`svc: check: server.database: ${p}`);
          return 1;
        }
      } catch (e) {
        ctx.io.err(`svc: check: server.database: ${(e as Error).message}`);
        return 1;
      }
      if (config.auth.oidc) {
        try {
          const { RelyingParty } = await import('../auth/oidc.ts');
          await new RelyingParty(config.auth.oidc, config.auth.groups, createLogger()).discover();
        } catch (e) {
          ctx.io.err(`svc: check: auth.oidc.issuer: discovery at ${config.auth.oidc.issuer} failed: ${(e as Error).message}`);
          return 1;
        }
      }
      const secretChange = await secretChangeWarning(config);
      if (secretChange !== null) ctx.io.err(`svc: check: warning: auth.session: ${secretChange}`);
      const oauth = config.auth.oauth;
      if (oauth?.clientMetadataDocuments) {
        const { unreachableHosts } = await import('../oauth/reachability.ts');
        const hosts = await unreachableHosts();
        // A warning, not a failure: a network that allows only some apps, or none that use documents, is a choice.
        if (hosts.length > 0) {
          ctx.io.err(
            `svc: check: warning: auth.oauth.client_metadata_documents: svc cannot reach ${hosts.join(', ')}; apps that sign in with a ` +
              'metadata document published there (Claude, ChatGPT, Codex, VS Code) will stop at an error page. Let svc fetch https from ' +
              'those hosts, or set client_metadata_documents false so that the apps register themselves instead.',
          );
        }
      }
      if (config.upstreams.length > 0) {
        // A warning, not a failure: a host without bubblewrap runs its stdio children as before.
        const { sandboxWarnings } = await import('../upstream/stdio-sandbox.ts');
        for (const w of sandboxWarnings(config)) ctx.io.err(`svc: check: warning: upstream.${w.upstream}: ${w.warning}`);
      }
      ctx.io.out(
        `svc: ${ctx.configPath} is valid; database ${location} can be read and written${config.auth.oidc ? '; identity provider answers' : ''}`,
      );
      return 0;
    },
  },
  {
    name: ['migrate'],
    usage: 'migrate',
    summary: 'apply pending migrations',
    help: 'Applies pending database migrations; running it again does nothing.',
    positionals: [],
    options: {},
    configMode: 'data',
    async run(ctx) {
      await withDatabase(ctx.config(), async () => undefined);
      ctx.io.out('svc: migrations applied');
      return 0;
    },
  },
];

export const COMMANDS: readonly Command[] = [
  ...serverCommands,
  ...userCommands,
  ...tokenCommands,
  ...itemCommands,
  ...toolCommands,
  ...keyCommands,
  ...oauthCommands,
  ...auditCommands,
];

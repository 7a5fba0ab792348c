// Every CLI command, in the order --help lists them.
import { type Command, withDatabase } from './command.ts';
import { userCommands } from './users.ts';
import { itemCommands } from './items.ts';
import { tokenCommands } from './tokens.ts';
import { oauthCommands } from './oauth.ts';
import { auditCommands } from './audit.ts';
import { startServer } from '../server.ts';
import { createLogger } from '../log.ts';
import { openDatabase } from '../db/open.ts';

const serverCommands: Command[] = [
  {
    name: ['serve'],
    usage: 'serve',
    summary: 'apply pending migrations and serve HTTP',
    help: 'Applies pending migrations, then serves HTTP until SIGINT or SIGTERM (graceful: in-flight requests finish).',
    positionals: [],
    options: {},
    configMode: 'serve',
    async run(ctx) {
      const config = ctx.config();
      const log = createLogger(undefined, config.server.logLevel);
      const running = await startServer(config, log);
      await new Promise<void>((resolve) => {
        // The first signal stops gracefully; a second one cuts in-flight requests, and svc still closes cleanly.
        let signals = 0;
        const onSignal = (signal: string) => {
          signals++;
          log.info(signals === 1 ? 'shutting_down' : 'shutting_down_now', { signal });
          void (signals === 1 ? running.stop() : running.stopNow()).then(resolve);
        };
        process.on('SIGINT', () => onSignal('SIGINT'));
        process.on('SIGTERM', () => onSignal('SIGTERM'));
      });
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
      ctx.io.out(`svc: ${ctx.configPath} is valid; database ${location} can be read and written${config.auth.oidc ? '; identity provider answers' : ''}`);
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

export const COMMANDS: readonly Command[] = [...serverCommands, ...userCommands, ...tokenCommands, ...itemCommands, ...oauthCommands, ...auditCommands];

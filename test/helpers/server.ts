// An svc server in this test process on a free loopback port, with a second database connection for setup
// and for asserting what was (not) written.
import { readFileSync } from 'node:fs';
import { loadConfig, type Config } from '../../src/config/load.ts';
import { openDatabase, type Database } from '../../src/db/open.ts';
import { startServer, type Running } from '../../src/server.ts';
import { silentLogger, type Logger } from '../../src/log.ts';
import { createUser, type User } from '../../src/store/users.ts';
import { createToken } from '../../src/store/tokens.ts';
import { tokenRecord, userRecord, type TestUser } from './records.ts';
import { hashPassword } from '../../src/auth/passwords.ts';
import { createWorkspace, type Workspace, type AuthSection } from './workspace.ts';
import { startSqld, type Sqld } from './sqld.ts';
import type { Clock } from '../../src/domain/clock.ts';

/**
 * SVC_TEST_DATABASE=sqld (over HTTP) or sqld-ws (over its WebSocket): every test server runs on a sqld of its own
 * instead of a file (npm test runs the store suites, sign-in throttle and OAuth grants among them, a second time).
 */
export const TEST_DATABASE: 'file' | 'sqld' | 'sqld-ws' =
  process.env.SVC_TEST_DATABASE === 'sqld' || process.env.SVC_TEST_DATABASE === 'sqld-ws' ? process.env.SVC_TEST_DATABASE : 'file';

export interface TestServer {
  readonly ws: Workspace;
  readonly url: string;
  readonly config: Config;
  readonly database: Database;
  restart(env?: Record<string, string>): Promise<void>;
  addUser(user: TestUser & { password?: string }): Promise<User>;
  /** a personal token; `scopes` as on the CLI (default mcp) */
  tokenFor(user: User, ttl?: string, scopes?: string): Promise<string>;
  stop(): Promise<void>;
}

export interface TestServerOptions {
  auth?: AuthSection;
  env?: Record<string, string>;
  log?: Logger;
  /** base_url when svc sits behind a proxy at another address */
  baseUrl?: string;
  /** more [server] lines */
  serverExtra?: string;
  /** options for startServer */
  serverOptions?: Parameters<typeof startServer>[2];
  /** the time the server and this test's own connection judge expiries by (default: the system clock) */
  clock?: Clock;
}

export async function startTestServer(options: TestServerOptions = {}): Promise<TestServer> {
  const sqld: Sqld | null = TEST_DATABASE === 'file' ? null : await startSqld({ auth: true });
  const sqldUrl = sqld && TEST_DATABASE === 'sqld-ws' ? sqld.url.replace(/^http:/, 'ws:') : sqld?.url;
  const ws = await createWorkspace({
    ...(sqld && sqldUrl ? { remote: { url: sqldUrl, token: sqld.token } } : {}),
    ...(options.auth === undefined ? {} : { auth: options.auth }),
    ...(options.baseUrl === undefined ? {} : { baseUrl: options.baseUrl }),
    ...(options.serverExtra === undefined ? {} : { serverExtra: options.serverExtra }),
  });
  Object.assign(ws.env, options.env);
  const load = () => loadConfig(readFileSync(ws.configPath, 'utf8'), ws.env, { mode: 'serve' });
  let config = load();
  const serverOptions = { ...options.serverOptions, ...(options.clock ? { clock: options.clock } : {}) };
  let running: Running;
  try {
    running = await startServer(config, options.log ?? silentLogger, serverOptions);
  } catch (e) {
    ws.remove();
    await sqld?.remove();
    throw e;
  }
  const database = await openDatabase(ws.dbUrl, sqld?.token ?? null, options.clock ? { clock: options.clock } : {});
  return {
    ws,
    url: `http://127.0.0.1:${ws.port}`,
    get config() {
      return config;
    },
    database,
    async restart(env) {
      await running.stop();
      if (env) Object.assign(ws.env, env);
      config = load();
      running = await startServer(config, options.log ?? silentLogger, serverOptions);
    },
    async addUser({ password, ...user }) {
      const passwordHash = password ? await hashPassword(password) : null;
      return database.write((tx) => createUser(tx, userRecord({ ...user, passwordHash })));
    },
    async tokenFor(user, ttl, scopes) {
      return (
        await database.write(async (tx) => createToken(tx, user.id, tokenRecord('test', ttl, null, scopes), await database.tokenEpoch(tx)))
      ).token;
    },
    async stop() {
      await running.stop();
      database.close();
      ws.remove();
      await sqld?.remove();
    },
  };
}

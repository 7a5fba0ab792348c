// `npm run bench -- --only statements`: the statements svc sends to its database per request, read and write, on the
// embedded file and on a real sqld (ws:// URL), beside each one's throughput:
//   - /mcp tools/call whoami under 50 connections (a bearer request)
//   - the token page: GET / signed in, and minting a token from it (POST /auth/tokens), one request at a time
//   - the OAuth token endpoint: the refresh_token grant, each refresh with the token the one before returned
// Counted by svc itself (svc_database_statements_total): reads outside a write transaction, writes inside one with
// its BEGIN and COMMIT. svc's background jobs run meanwhile and are counted too; they add little over these runs.
import type { ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { openDatabase } from '../../src/db/open.ts';
import { createUser } from '../../src/store/users.ts';
import { createToken } from '../../src/store/tokens.ts';
import { hashPassword } from '../../src/auth/passwords.ts';
import { startSqld } from '../../test/helpers/sqld.ts';
import { Browser } from '../../test/helpers/http.ts';
import { Provider, connect } from '../../test/helpers/oauth-client.ts';
import { OAUTH_ON, newSecret } from '../../test/helpers/workspace.ts';
import { benchToken } from './records.ts';
import { counters, load, serveSvc } from './remote.ts';

type Say = (line?: string) => void;
const fmt = (n: number, digits = 2) => n.toFixed(digits);

interface Figures {
  /** requests per second */
  readonly rate: number;
  readonly reads: number;
  readonly writes: number;
}

const PASSWORD = 'bench password 1';

/** What svc sent per request it answered while `run` ran (read from its counters around it), and the rate. */
async function counted(port: number, run: () => Promise<void>): Promise<Figures> {
  const before = await counters(port);
  const t = performance.now();
  await run();
  const seconds = (performance.now() - t) / 1000;
  const after = await counters(port);
  const answered = Math.max(1, after.requests - before.requests);
  return { rate: answered / seconds, reads: (after.reads - before.reads) / answered, writes: (after.writes - before.writes) / answered };
}

/** `n` calls of `call`, one at a time. */
async function oneAtATime(n: number, call: (i: number) => Promise<void>): Promise<void> {
  for (let i = 0; i < n; i++) await call(i);
}

async function expectStatus(res: Response | Promise<Response>, status: number, what: string): Promise<Response> {
  const r = await res;
  if (r.status !== status) throw new Error(`${what} answered ${r.status}: ${await r.text()}`);
  return r;
}

/** The four measurements on one svc at `port` over `database`, with its user `bench` signed in and connected by OAuth. */
async function measure(port: number, token: string, seconds: number, quick: boolean): Promise<Record<string, Figures>> {
  const base = `http://127.0.0.1:${port}`;
  const browser = new Browser(base);
  await expectStatus(browser.login('bench', PASSWORD), 303, 'signing in');
  // A client that connects by URL: registers, the person consents, it gets a refresh token.
  const provider = new Provider(browser);
  await (await connect(base, provider)).close();
  let refresh = provider.saved?.refresh_token;
  const clientId = provider.info?.client_id;
  if (!refresh || !clientId) throw new Error('the OAuth client got no refresh token');
  const n = quick ? 50 : 300;
  const mcp = await counted(port, async () => {
    const r = await load(`${base}/mcp`, token, seconds, 50);
    if (r.bad > 0) throw new Error(`/mcp: ${r.bad} failed requests`);
  });
  const page = await counted(port, () =>
    oneAtATime(
      n,
      async () =>
        void (await (await expectStatus(browser.request('/', { headers: { accept: 'text/html' } }), 200, 'the token page')).text()),
    ),
  );
  // A person holds at most 200 active tokens: the bench's own and 150 minted stay under it.
  const mint = await counted(port, () =>
    oneAtATime(
      Math.min(n, 150),
      async (i) =>
        void (await (
          await expectStatus(browser.request('/auth/tokens', { json: { name: `mint ${i}`, scopes: 'mcp' } }), 201, 'a mint')
        ).text()),
    ),
  );
  const refreshes = await counted(port, () =>
    oneAtATime(n, async () => {
      const body = new URLSearchParams({ grant_type: 'refresh_token', refresh_token: refresh!, client_id: clientId });
      const r = await expectStatus(fetch(`${base}/oauth/token`, { method: 'POST', body }), 200, 'a refresh');
      refresh = ((await r.json()) as { refresh_token: string }).refresh_token;
    }),
  );
  return { mcp, page, mint, refreshes };
}

export async function benchStatements(say: Say, work: string, seconds: number, quick: boolean): Promise<void> {
  const sqld = await startSqld({ auth: true });
  const servers: ChildProcess[] = [];
  try {
    const places = [
      { name: 'file', url: `file:${join(work, 'statements.db')}`, token: null, env: {} as Record<string, string> },
      { name: 'sqld', url: sqld.url.replace(/^http:/, 'ws:'), token: sqld.token, env: { SVC_DATABASE_TOKEN: sqld.token! } },
    ];
    const portBase = 40000 + Math.floor(Math.random() * 10000);
    const results: Record<string, Record<string, Figures>> = {};
    for (const [i, place] of places.entries()) {
      const database = await openDatabase(place.url, place.token);
      await database.migrate();
      const passwordHash = await hashPassword(PASSWORD);
      const token = await database.write(async (tx) => {
        const user = await createUser(tx, {
          uid: 'bench',
          email: 'bench@example.com',
          name: '',
          labels: ['eng'],
          admin: false,
          passwordHash,
        });
        return (await createToken(tx, user.id, benchToken('bench'))).token;
      });
      database.close();
      const port = portBase + i;
      servers.push(
        await serveSvc(work, `statements-${place.name}`, port, place.url, { ...place.env, SVC_SESSION_SECRET: newSecret() }, OAUTH_ON),
      );
      results[place.name] = await measure(port, token, seconds, quick);
    }
    say('8. statements svc sends to its database per request (svc_database_statements_total), read + write');
    say(`   ${''.padEnd(52)}${places.map((p) => p.name.padEnd(40)).join('')}`);
    const rows: [string, string][] = [
      ['mcp', '/mcp tools/call whoami, 50 connections'],
      ['page', 'the token page, GET / signed in, one at a time'],
      ['mint', 'a mint from the token page, one at a time'],
      ['refreshes', 'OAuth token endpoint, refresh_token, one at a time'],
    ];
    for (const [key, label] of rows) {
      const cells = places.map((p) => {
        const f = results[p.name]![key]!;
        return `${fmt(f.reads, 3)} + ${fmt(f.writes, 3)} at ${fmt(f.rate, 0)} req/s`.padEnd(40);
      });
      say(`   ${label.padEnd(52)}${cells.join('')}`);
    }
  } finally {
    for (const s of servers) s.kill('SIGTERM');
    await sqld.remove();
  }
}

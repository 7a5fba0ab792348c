// Whose listing decides what of an `auth = oauth` upstream (CONTRACT §6.1, "A person's upstream session is theirs";
// issue 46, item 6), with the real peers of test/upstream-accounts.test.ts: oidc-provider and an SDK MCP server that
// lists each person their own tools. alice's account lists `drafts`, bob's lists `payroll` (a description with his
// data), and both list `greet`, each described with their own name. Neither person's listing decides the other's:
// a tool is `gone` only when no connected person's listing has it, and a person is offered, and may call, only what
// their own connection lists, as it was approved.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { atProvider, startOauthUpstream, type OauthUpstream } from './helpers/oauth-upstream.ts';
import { DEFAULT_AUTH, freePort } from './helpers/workspace.ts';
import { waitFor } from './helpers/wait.ts';
import type { User } from '../src/store/users.ts';
import { listAccounts } from '../src/store/upstream-accounts.ts';
import { agentOf, signedIn } from './helpers/agents.ts';

const text = (r: unknown) => ((r as CallToolResult).content[0] as { text: string }).text;

interface ToolRow {
  upstream: string;
  name: string;
  state: string;
  fingerprint: string;
  approved_fingerprint: string | null;
}

describe("an auth = oauth upstream: each person's own listing", () => {
  let peers: OauthUpstream;
  let svc: TestServer;
  let alice: User;
  let bob: User;

  const mcp = (user: User) => agentOf(svc, user);
  const withAgent = async <T>(user: User, fn: (agent: Client) => Promise<T>): Promise<T> => {
    const agent = await mcp(user);
    try {
      return await fn(agent);
    } finally {
      await agent.close();
    }
  };
  const browserOf = (uid: string) => signedIn(svc.url, uid);
  const connect = async (uid: string) => {
    const b = await browserOf(uid);
    const start = await b.request('/upstreams/code/connect', { headers: { accept: 'text/html' } });
    assert.equal(start.status, 302, await start.text());
    const back = await atProvider(start.headers.get('location')!, `${uid}-at-code`, svc.url);
    const done = await b.request(back.pathname + back.search, { headers: { accept: 'text/html' } });
    assert.equal(done.status, 303, await done.text());
    return b;
  };
  const tools = async (): Promise<ToolRow[]> => {
    const r = await svc.ws.svc(['tool', 'list', '--json']);
    assert.equal(r.code, 0, r.stderr);
    return (JSON.parse(r.stdout) as ToolRow[]).filter((t) => t.upstream === 'code');
  };
  const stateOf = async (name: string) => (await tools()).find((t) => t.name === name)?.state;
  const approve = async (name: string) => {
    const r = await svc.ws.svc(['tool', 'approve', 'code', name]);
    assert.equal(r.code, 0, r.stderr);
  };
  const offered = async (user: User) =>
    withAgent(user, async (a) => (await a.listTools()).tools.filter((t) => t.name.startsWith('code__')));

  before(async () => {
    const [asPort, upPort] = [await freePort(), await freePort()];
    svc = await startTestServer({
      auth: `${DEFAULT_AUTH}
[upstream code]
url = http://127.0.0.1:${upPort}/mcp
auth = oauth
oauth_scopes = tools
`,
    });
    peers = await startOauthUpstream({ ports: { as: asPort, upstream: upPort } });
    peers.toolsFor = (sub) => ({
      tools:
        sub === 'alice-at-code'
          ? [
              { name: 'drafts', description: 'The drafts of alice-at-code.' },
              { name: 'greet', description: 'Greets alice-at-code.' },
            ]
          : sub === 'bob-at-code'
            ? [
                { name: 'payroll', description: 'The payroll of bob-at-code: salary 123456.' },
                { name: 'greet', description: 'Greets bob-at-code.' },
              ]
            : [],
    });
    alice = await svc.addUser({ uid: 'alice', email: 'alice@example.com', password: 'alice password 1', labels: '' });
    bob = await svc.addUser({ uid: 'bob', email: 'bob@example.com', password: 'bob password 1', labels: '' });
  });
  after(async () => {
    await svc?.stop();
    await peers?.stop();
  });

  test("what bob's account lists is offered to bob alone, and what his listing lacks stays alice's", async () => {
    await connect('alice');
    await waitFor("alice's listing recorded", async () => (await tools()).length === 3, { everyMs: 200 });
    for (const name of ['whoami', 'drafts', 'greet']) await approve(name);
    const hers = await offered(alice);
    assert.deepEqual(hers.map((t) => t.name).sort(), ['code__drafts', 'code__greet', 'code__whoami']);
    assert.equal(hers.find((t) => t.name === 'code__greet')?.description, 'Greets alice-at-code.');
    assert.equal(await withAgent(alice, async (a) => text(await a.callTool({ name: 'code__drafts' }))), 'drafts:alice-at-code');

    // bob connects last: his listing has payroll and his own greet, and no drafts.
    await connect('bob');
    await waitFor("bob's listing recorded", async () => (await stateOf('payroll')) === 'pending', { everyMs: 200 });
    assert.equal(await stateOf('drafts'), 'approved', "not gone: alice's listing has it");
    const greet = (await tools()).find((t) => t.name === 'greet')!;
    assert.equal(greet.state, 'approved', "alice still lists the approved greet: bob's own does not change it");
    assert.equal(greet.fingerprint, greet.approved_fingerprint);
    await approve('payroll');

    const seen = peers.seen.length;
    const aliceNow = await offered(alice);
    assert.deepEqual(aliceNow.map((t) => t.name).sort(), ['code__drafts', 'code__greet', 'code__whoami']);
    assert.ok(!/bob|123456/.test(JSON.stringify(aliceNow)), "nothing of bob's listing reaches alice");
    await withAgent(alice, async (a) => {
      const refused = (await a.callTool({ name: 'code__payroll' })) as CallToolResult;
      assert.equal(refused.isError, true);
      assert.match(text(refused), /not found|unknown tool/i);
      assert.equal(peers.seen.length, seen, 'her call reached no upstream');
      assert.equal(text(await a.callTool({ name: 'code__drafts' })), 'drafts:alice-at-code');
    });

    // bob is offered what his own account lists as it was approved: payroll and whoami, not alice's drafts, and not
    // greet, whose description at his account is not the one approved.
    const his = await offered(bob);
    assert.deepEqual(his.map((t) => t.name).sort(), ['code__payroll', 'code__whoami']);
    await withAgent(bob, async (a) => {
      assert.equal(text(await a.callTool({ name: 'code__payroll' })), 'payroll:bob-at-code');
      for (const name of ['code__drafts', 'code__greet']) {
        const refused = (await a.callTool({ name })) as CallToolResult;
        assert.equal(refused.isError, true, name);
        assert.match(text(refused), /not found|unknown tool/i);
      }
    });
  });

  test("a listing that fails for alice while bob's is taken keeps hers: her tools stay, and she still uses them", async () => {
    const listedAt = async (user: User) => (await listAccounts(svc.database.db, { userId: user.id }))[0]!.listedAt;
    const aliceBefore = await listedAt(alice);
    peers.unavailableTo.add('alice-at-code');
    try {
      // bob connects again, which lists the upstream again: bob's listing is taken, alice's fails.
      await connect('bob');
      await waitFor(
        'a listing with both connections',
        async () => (await listedAt(bob)) !== null && ((await listedAt(alice)) ?? 0) > (aliceBefore ?? 0),
        { everyMs: 100 },
      );
    } finally {
      peers.unavailableTo.delete('alice-at-code');
    }
    assert.equal(await stateOf('drafts'), 'approved', "not gone: alice's listing from before still has it");
    assert.equal(await stateOf('payroll'), 'approved');
    assert.deepEqual((await offered(alice)).map((t) => t.name).sort(), ['code__drafts', 'code__greet', 'code__whoami']);
    assert.equal(await withAgent(alice, async (a) => text(await a.callTool({ name: 'code__drafts' }))), 'drafts:alice-at-code');
  });

  test('a person who disconnects stops counting: what only their listing had is gone, the rest stays', async () => {
    const bobs = await browserOf('bob');
    assert.equal((await bobs.request('/upstreams/code/disconnect', { method: 'POST', form: {} })).status, 303);
    await waitFor('payroll gone', async () => (await stateOf('payroll')) === 'gone', { everyMs: 200 });
    assert.equal(await stateOf('drafts'), 'approved');
    assert.equal(await stateOf('greet'), 'approved');
    assert.equal(await withAgent(alice, async (a) => text(await a.callTool({ name: 'code__drafts' }))), 'drafts:alice-at-code');
    const bobNow = await offered(bob);
    assert.deepEqual(
      bobNow.map((t) => t.name),
      ['code__connect'],
    );
  });
});

// Everything an upstream offers besides its tools, through svc (CONTRACT §6.3), with the real
// @modelcontextprotocol/server-everything over Streamable HTTP behind svc (through a proxy that records what reaches
// it), labelled `eng`. Through svc's /mcp with the legacy line's client (2025) and the stable line's pinned to
// 2026-07-28, for alice (eng), bob (no labels) and alice's token restricted to `finance`:
// - resources, templates and reads: mapped as NAME+U, seen and read only by who may see the upstream; an invisible, an
//   unmapped and a missing URI get the same answer; URIs in tool results and read contents come back mapped, and a
//   resource link a tool returns reads back through svc;
// - completions for a mapped template: the upstream's for alice, empty for the others;
// - progress: each caller's progress reaches that caller alone (two at once), in both eras;
// - cancellation: a 2025 notifications/cancelled, and a request whose stream the client closes, cancel the upstream
//   request (the upstream receives notifications/cancelled), and the audit row says `cancelled`;
// - the audit rows of reads and completions name the URI, never the contents.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { Client as StableLineClient, StreamableHTTPClientTransport as StableLineTransport } from '@modelcontextprotocol/client';
import type { User } from '../src/store/users.ts';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { refusalOf } from './helpers/agents.ts';
import { DEFAULT_AUTH, freePort, ROOT } from './helpers/workspace.ts';
import { listening, waitFor } from './helpers/wait.ts';
import { countingProxy } from './helpers/web-upstream.ts';
import { throughMcpRemote } from './helpers/mcp-remote.ts';

const EVERYTHING = join(ROOT, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js');
const DOC = 'everything+demo://resource/static/document/architecture.md';
const LONG_TOOL = 'everything__trigger-long-running-operation';

type Era = 'legacy' | 'modern';
/** Either line's client, as the test uses it (the two share these methods' shapes). */
type AnyClient = Client;

async function legacyAgent(svc: TestServer, token: string): Promise<AnyClient> {
  const client = new Client({ name: 'agent', version: '1.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${svc.url}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }),
  );
  return client;
}

async function modernAgent(svc: TestServer, token: string): Promise<AnyClient> {
  const client = new StableLineClient({ name: 'agent', version: '2.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
  await client.connect(
    new StableLineTransport(new URL(`${svc.url}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }),
  );
  assert.equal(client.getProtocolEra(), 'modern');
  return client as unknown as AnyClient;
}

const agentOf = (era: Era) => (era === 'legacy' ? legacyAgent : modernAgent);

/** A tool call with request options: the legacy line takes a result schema before them, the stable line does not. */
function callWith(
  era: Era,
  client: AnyClient,
  params: { name: string; arguments: Record<string, unknown> },
  options: Record<string, unknown>,
) {
  if (era === 'legacy') return client.callTool(params, CallToolResultSchema, options);
  return (client as unknown as { callTool(p: unknown, o: unknown): Promise<unknown> }).callTool(params, options);
}

describe('what an upstream offers besides tools, through svc', () => {
  let svc: TestServer;
  let everything: ChildProcess;
  let proxy: Awaited<ReturnType<typeof countingProxy>>;
  const tokens: Record<'alice' | 'bob' | 'restricted', string> = { alice: '', bob: '', restricted: '' };

  before(async () => {
    const port = await freePort();
    everything = spawn(process.execPath, [EVERYTHING, 'streamableHttp'], { env: { ...process.env, PORT: String(port) }, stdio: 'ignore' });
    await waitFor('server-everything listening', () => listening(port), { everyMs: 200 });
    proxy = await countingProxy(`http://127.0.0.1:${port}/mcp`);
    svc = await startTestServer({
      auth: `${DEFAULT_AUTH}
[upstream everything]
url = ${proxy.url}
labels = eng
review = auto
timeout = 20s
`,
    });
    const alice: User = await svc.addUser({ uid: 'alice', email: 'alice@example.com', labels: 'eng, finance' });
    const bob: User = await svc.addUser({ uid: 'bob', email: 'bob@example.com', labels: '' });
    tokens.alice = await svc.tokenFor(alice);
    tokens.bob = await svc.tokenFor(bob);
    const made = await svc.ws.svc(['token', 'create', 'alice', '--name', 'finance only', '--labels', 'finance']);
    assert.equal(made.code, 0, made.stderr);
    tokens.restricted = made.stdout.trim();
    await waitFor(
      'the upstream listed, up',
      async () => {
        const listed = JSON.parse((await svc.ws.svc(['upstream', 'list', '--json'])).stdout) as { state: string }[];
        return listed.length === 1 && listed[0]!.state === 'up';
      },
      { everyMs: 300, timeoutMs: 60_000 },
    );
  });

  after(async () => {
    await svc?.stop();
    await proxy?.stop();
    everything?.kill();
  });

  for (const era of ['legacy', 'modern'] as const) {
    test(`${era}: resources and templates are mapped as NAME+U and reach only who may see the upstream`, async () => {
      const alice = await agentOf(era)(svc, tokens.alice);
      const bob = await agentOf(era)(svc, tokens.bob);
      const restricted = await agentOf(era)(svc, tokens.restricted);
      try {
        const listed = (await alice.listResources()).resources.map((r) => r.uri);
        assert.ok(listed.includes(DOC), `${DOC} in ${JSON.stringify(listed.slice(0, 5))}`);
        assert.ok(
          listed.every((u) => u.startsWith('svc://items/') || u.startsWith('everything+')),
          'every upstream URI is mapped',
        );
        const templates = (await alice.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate);
        assert.ok(templates.includes('svc://items/{id}'), 'svc’s own template first');
        assert.ok(templates.includes('everything+demo://resource/dynamic/text/{resourceId}'), JSON.stringify(templates));

        const read = await alice.readResource({ uri: DOC });
        assert.equal(read.contents[0]!.uri, DOC, 'the contents name the mapped URI');
        assert.ok(String((read.contents[0] as { text?: string }).text).length > 0);
        const dynamic = await alice.readResource({ uri: 'everything+demo://resource/dynamic/text/7' });
        assert.equal(dynamic.contents[0]!.uri, 'everything+demo://resource/dynamic/text/7');

        for (const other of [bob, restricted]) {
          assert.deepEqual(
            (await other.listResources()).resources.filter((r) => r.uri.startsWith('everything+')),
            [],
            'no upstream resource listed',
          );
          assert.deepEqual(
            (await other.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate),
            ['svc://items/{id}'],
          );
        }
        // Invisible, unmapped, mapped to no upstream, and missing at the upstream: one answer.
        const missing = await refusalOf(alice.readResource({ uri: 'everything+demo://resource/static/document/none.md' }));
        assert.notEqual(missing, 'ok');
        for (const [who, uri] of [
          [bob, DOC],
          [restricted, DOC],
          [alice, 'nope://x'],
          [alice, 'nowhere+demo://resource/static/document/architecture.md'],
          [alice, 'ui://everything+x'],
        ] as const)
          assert.deepEqual(await refusalOf(who.readResource({ uri })), missing, `${uri}`);
      } finally {
        await Promise.all([alice.close(), bob.close(), restricted.close()]);
      }
    });

    test(`${era}: prompts are NAME__PROMPT for who may use them; their resources come back mapped; completions go to the owner`, async () => {
      const alice = await agentOf(era)(svc, tokens.alice);
      const bob = await agentOf(era)(svc, tokens.bob);
      const restricted = await agentOf(era)(svc, tokens.restricted);
      try {
        const names = (await alice.listPrompts()).prompts.map((p) => p.name).sort();
        assert.deepEqual(names, [
          'everything__args-prompt',
          'everything__completable-prompt',
          'everything__resource-prompt',
          'everything__simple-prompt',
        ]);
        const simple = await alice.getPrompt({ name: 'everything__simple-prompt' });
        assert.ok(simple.messages.length > 0);
        const embedded = await alice.getPrompt({
          name: 'everything__resource-prompt',
          arguments: { resourceType: 'Text', resourceId: '2' },
        });
        const uris = embedded.messages.flatMap((m) => (m.content.type === 'resource' ? [m.content.resource.uri] : []));
        assert.deepEqual(uris, ['everything+demo://resource/dynamic/text/2'], 'the embedded resource is mapped');
        const completed = await alice.complete({
          ref: { type: 'ref/prompt', name: 'everything__completable-prompt' },
          argument: { name: 'department', value: 'E' },
        });
        assert.deepEqual(completed.completion.values, ['Engineering']);

        const unknown = await refusalOf(alice.getPrompt({ name: 'everything__no-such-prompt' }));
        assert.notEqual(unknown, 'ok');
        const sameAs = (name: string) => ({
          ...(unknown as { code: unknown; message: string }),
          message: (unknown as { message: string }).message.replace('everything__no-such-prompt', name),
        });
        for (const other of [bob, restricted]) {
          assert.deepEqual((await other.listPrompts()).prompts, [], 'no prompt listed');
          assert.deepEqual(await refusalOf(other.getPrompt({ name: 'everything__simple-prompt' })), sameAs('everything__simple-prompt'));
          assert.deepEqual(
            (
              await other.complete({
                ref: { type: 'ref/prompt', name: 'everything__completable-prompt' },
                argument: { name: 'department', value: 'E' },
              })
            ).completion,
            { values: [], hasMore: false },
          );
        }
        assert.deepEqual(await refusalOf(alice.getPrompt({ name: 'simple-prompt' })), sameAs('simple-prompt'), 'a bare name is no prompt');
      } finally {
        await Promise.all([alice.close(), bob.close(), restricted.close()]);
      }
    });

    test(`${era}: a resource link a tool returns is mapped and reads back through svc`, async () => {
      const alice = await agentOf(era)(svc, tokens.alice);
      try {
        const result = (await alice.callTool({ name: 'everything__get-resource-links', arguments: { count: 2 } })) as CallToolResult;
        const links = result.content.filter((c) => c.type === 'resource_link') as { uri: string }[];
        assert.ok(links.length >= 1, JSON.stringify(result.content).slice(0, 300));
        for (const link of links) {
          assert.match(link.uri, /^everything\+demo:\/\//);
          const back = await alice.readResource({ uri: link.uri });
          assert.equal(back.contents[0]!.uri, link.uri);
        }
        const embedded = (await alice.callTool({
          name: 'everything__get-resource-reference',
          arguments: { resourceId: 3 },
        })) as CallToolResult;
        const blocks = embedded.content.filter((c) => c.type === 'resource') as { resource: { uri: string } }[];
        assert.ok(blocks.length >= 1 && blocks.every((b) => b.resource.uri.startsWith('everything+demo://')), JSON.stringify(blocks));
      } finally {
        await alice.close();
      }
    });

    test(`${era}: completions of a mapped template are the upstream's for alice, empty for the others`, async () => {
      const alice = await agentOf(era)(svc, tokens.alice);
      const bob = await agentOf(era)(svc, tokens.bob);
      try {
        const ask = (c: AnyClient) =>
          c.complete({
            ref: { type: 'ref/resource', uri: 'everything+demo://resource/dynamic/text/{resourceId}' },
            argument: { name: 'resourceId', value: '1' },
          });
        const hers = (await ask(alice)).completion.values;
        assert.ok(hers.length > 0, 'the upstream completes resourceId');
        assert.deepEqual((await ask(bob)).completion, { values: [], hasMore: false });
        assert.deepEqual(
          (await alice.complete({ ref: { type: 'ref/resource', uri: 'nope://{x}' }, argument: { name: 'x', value: '' } })).completion
            .values,
          [],
        );
      } finally {
        await Promise.all([alice.close(), bob.close()]);
      }
    });

    test(`${era}: each caller's progress reaches that caller alone, two at once`, async () => {
      const alice = await agentOf(era)(svc, tokens.alice);
      const alsoAlice = await agentOf(era)(svc, tokens.alice);
      try {
        const heard: Record<string, number[]> = { one: [], two: [] };
        const run = (client: AnyClient, who: 'one' | 'two', steps: number) =>
          callWith(
            era,
            client,
            { name: LONG_TOOL, arguments: { duration: 1, steps } },
            {
              onprogress: (p: { progress: number }) => heard[who]!.push(p.progress),
              timeout: 30_000,
            },
          );
        const [a, b] = await Promise.all([run(alice, 'one', 3), run(alsoAlice, 'two', 5)]);
        assert.notEqual((a as CallToolResult).isError, true);
        assert.notEqual((b as CallToolResult).isError, true);
        assert.deepEqual(heard.one, [1, 2, 3], 'the first caller heard its own three steps');
        assert.deepEqual(heard.two, [1, 2, 3, 4, 5], 'the second caller heard its own five');
      } finally {
        await Promise.all([alice.close(), alsoAlice.close()]);
      }
    });

    test(`${era}: a cancelled call is cancelled at the upstream and audited as cancelled`, async () => {
      const alice = await agentOf(era)(svc, tokens.alice);
      const cancelsBefore = proxy.carried.filter((c) => c.rpc === 'notifications/cancelled').length;
      try {
        const stop = new AbortController();
        const call = callWith(
          era,
          alice,
          { name: LONG_TOOL, arguments: { duration: 15, steps: 15 } },
          {
            onprogress: () => stop.abort(),
            signal: stop.signal,
            timeout: 30_000,
          },
        );
        await assert.rejects(call);
        await waitFor(
          'the upstream told of the cancel',
          () => proxy.carried.filter((c) => c.rpc === 'notifications/cancelled').length > cancelsBefore,
          { everyMs: 100, timeoutMs: 10_000 },
        );
        await waitFor(
          'the call audited as cancelled',
          async () => {
            const rows = JSON.parse((await svc.ws.svc(['audit', 'list', '--json'])).stdout) as {
              action: string;
              target: string;
              detail: { outcome?: string };
            }[];
            return (
              rows.filter((r) => r.action === 'upstream.call' && r.detail.outcome === 'cancelled').length >= (era === 'legacy' ? 1 : 2)
            );
          },
          { everyMs: 200, timeoutMs: 10_000 },
        );
      } finally {
        await alice.close();
      }
    });
  }

  test("2025: a notifications/cancelled reaches only its sender's own request, never another user's of the same id", async () => {
    const post = (token: string, body: unknown) =>
      fetch(`${svc.url}/mcp`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${token}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': '2025-06-18',
        },
        body: JSON.stringify(body),
      });
    const started = (id: string) =>
      post(tokens.alice, {
        jsonrpc: '2.0',
        id,
        method: 'tools/call',
        params: { name: LONG_TOOL, arguments: { duration: 2, steps: 4 }, _meta: { progressToken: id } },
      }).then((r) => r.text());
    const cancel = (token: string, requestId: string) =>
      post(token, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId, reason: 'test' } });
    // bob names alice's request id: it runs to its end.
    const kept = started('same-id');
    await new Promise((ok) => setTimeout(ok, 600));
    assert.equal((await cancel(tokens.bob, 'same-id')).status, 202);
    assert.match(await kept, /Long running operation completed/);
    // alice names it: it ends at once, cancelled.
    const ended = started('same-id');
    await new Promise((ok) => setTimeout(ok, 600));
    assert.equal((await cancel(tokens.alice, 'same-id')).status, 202);
    const answer = await ended;
    assert.doesNotMatch(answer, /completed/);
    assert.match(answer, /upstream \\"everything\\" cancelled/);
  });

  test('through mcp-remote: the same prompts, resources and reads for alice, none for bob', async () => {
    const alice = await throughMcpRemote(`${svc.url}/mcp`, tokens.alice);
    const bob = await throughMcpRemote(`${svc.url}/mcp`, tokens.bob);
    try {
      assert.ok((await alice.client.listPrompts()).prompts.some((p) => p.name === 'everything__simple-prompt'));
      assert.ok((await alice.client.listResources()).resources.some((r) => r.uri === DOC));
      assert.equal((await alice.client.readResource({ uri: DOC })).contents[0]!.uri, DOC);
      assert.deepEqual((await bob.client.listPrompts()).prompts, []);
      assert.ok(!(await bob.client.listResources()).resources.some((r) => r.uri.startsWith('everything+')));
      assert.notEqual(await refusalOf(bob.client.readResource({ uri: DOC })), 'ok');
    } finally {
      await Promise.all([alice.close(), bob.close()]);
    }
  });

  test('a tool that requires task-based calls is held with that reason, and offered to nobody', async () => {
    type Row = { name: string; state: string; held: string[] | null };
    let row: Row | undefined;
    await waitFor(
      'simulate-research-query recorded',
      async () => {
        const rows = JSON.parse((await svc.ws.svc(['tool', 'list', '--json'])).stdout) as Row[];
        row = rows.find((r) => r.name === 'simulate-research-query');
        return row !== undefined;
      },
      { everyMs: 300, timeoutMs: 30_000 },
    );
    assert.notEqual(row!.state, 'approved');
    assert.ok(
      row!.held?.some((h) => /requires task-based calls/.test(h)),
      JSON.stringify(row),
    );
    const refused = await svc.ws.svc(['tool', 'approve', 'everything', 'simulate-research-query']);
    assert.notEqual(refused.code, 0, 'a held tool cannot be approved as it is');
    const alice = await legacyAgent(svc, tokens.alice);
    try {
      assert.ok(!(await alice.listTools()).tools.some((t) => t.name === 'everything__simulate-research-query'));
    } finally {
      await alice.close();
    }
  });

  test('reads and completions are audited with the URI, never the contents', async () => {
    const rows = JSON.parse((await svc.ws.svc(['audit', 'list', '--json'])).stdout) as {
      action: string;
      target: string;
      actor: string;
      detail: Record<string, unknown>;
    }[];
    const reads = rows.filter((r) => r.action === 'upstream.read');
    assert.ok(reads.some((r) => r.target === 'everything/demo://resource/static/document/architecture.md' && r.actor === 'alice'));
    assert.ok(rows.some((r) => r.action === 'upstream.complete' && r.actor === 'alice'));
    assert.ok(!rows.some((r) => r.actor === 'bob' && r.action.startsWith('upstream.')), 'bob reached nothing');
    for (const r of reads) assert.deepEqual(Object.keys(r.detail).sort(), ['credential', 'duration_ms', 'outcome']);
  });
});

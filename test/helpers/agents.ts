// An MCP agent and a signed-in browser for a person, as the tests of people's own upstream accounts use them.
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { User } from '../../src/store/users.ts';
import { upstreamFetch } from '../../src/upstream/http-fetch.ts';
import { Browser } from './http.ts';
import type { TestServer } from './server.ts';

/** An MCP client of svc's /mcp with a fresh token of the person's, on connections of its own (none left over from before a restart of svc). */
export async function agentOf(svc: TestServer, user: User): Promise<Client> {
  const client = new Client({ name: 'agent', version: '1' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${svc.url}/mcp`), {
      requestInit: { headers: { Authorization: `Bearer ${await svc.tokenFor(user)}` } },
      fetch: upstreamFetch(() => undefined).fetch,
    }),
  );
  return client;
}

/** A browser signed in as the person, whose password is `UID password 1`. */
export async function signedIn(url: string, uid: string): Promise<Browser> {
  const b = new Browser(url);
  assert.equal((await b.login(uid, `${uid} password 1`)).status, 303);
  return b;
}

/**
 * The error an MCP request got (its code, and its message with a missing resource's URI taken out, so that missing,
 * invisible and unmapped URIs can be compared), or 'ok'.
 */
export async function refusalOf(p: Promise<unknown>): Promise<{ code: unknown; message: string } | 'ok'> {
  try {
    await p;
    return 'ok';
  } catch (e) {
    const err = e as { code?: unknown; message?: string };
    return { code: err.code, message: String(err.message).replace(/Resource not found: .*/, 'Resource not found: URI') };
  }
}

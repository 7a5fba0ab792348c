// Servers that share a core, loaded in turns: only the one under load may run. A server that was just loaded goes
// on working when its load ends (V8 collects and shrinks its heap over the next seconds, with threads of its own),
// and on a shared core that work lands in whichever server is measured next: in part 1, a server loaded right after
// another saw its p99 go from 8 to 21 ms. Stopped (SIGSTOP) between its turns, a server does its own leftover work
// in its own next turn.
import type { ChildProcess } from 'node:child_process';

/** Lets `loaded` run and stops every other server of `all`. */
export function runOnly(all: readonly ChildProcess[], loaded: readonly ChildProcess[]): void {
  for (const server of all) server.kill(loaded.includes(server) ? 'SIGCONT' : 'SIGSTOP');
}

/** Lets every server of `all` run again (before they are stopped for good, or asked for their figures). */
export function runAll(all: readonly ChildProcess[]): void {
  for (const server of all) server.kill('SIGCONT');
}

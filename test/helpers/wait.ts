// Waiting on a condition instead of a fixed sleep: polls until `check` holds, and fails naming what never came.
// The bound is generous on purpose; it only decides how long a broken test hangs, never whether a slow machine passes.
import { connect } from 'node:net';

/** Whether something accepts connections on this loopback port now. */
export function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

export async function waitFor(
  what: string,
  check: () => boolean | Promise<boolean>,
  options: { timeoutMs?: number; everyMs?: number } = {},
): Promise<void> {
  const deadline = Date.now() + (options.timeoutMs ?? 30_000);
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, options.everyMs ?? 25));
  }
}

// The [server] keys that bound what one process lets clients hold (CONTRACT §5 Connections).
import { readDuration } from './duration.ts';
import { parseDuration } from '../domain/duration.ts';
import type { ConnectionsConfig } from './types.ts';

/** A request may take this long in all (Node's requestTimeout); the two deadlines below must fit in it. */
export const REQUEST_TIMEOUT_SECONDS = 60;

export function readConnections(str: (key: string, fallback: string) => string, problems: string[]): ConnectionsConfig {
  const count = (key: string, fallback: string, max: number): number => {
    const text = str(key, fallback);
    const n = /^[1-9][0-9]{0,6}$/.test(text) ? Number(text) : NaN;
    if (!(n <= max)) problems.push(`server.${key}: "${text}" is not a whole number from 1 to ${max}`);
    return Number.isNaN(n) || n > max ? Number(fallback) : n;
  };
  const deadline = (key: string, fallback: string): number => {
    const text = str(key, fallback);
    const seconds = readDuration(`server.${key}`, text, problems);
    if (seconds !== null && seconds > REQUEST_TIMEOUT_SECONDS)
      problems.push(`server.${key}: "${text}" is longer than a whole request may take (${REQUEST_TIMEOUT_SECONDS}s)`);
    return (seconds !== null && seconds <= REQUEST_TIMEOUT_SECONDS ? seconds : parseDuration(fallback)!) * 1000;
  };
  const max = count('max_connections', '1000', 100_000);
  // Ten percent of the limit when not given, at most 100, so a smaller max_connections needs no second line.
  const perAddress = count('max_connections_per_address', String(Math.max(1, Math.min(100, Math.floor(max / 10)))), 100_000);
  if (perAddress > max)
    problems.push(
      `server.max_connections_per_address: ${perAddress} is more than max_connections (${max}); one address would need no share`,
    );
  return { max, perAddress, headersTimeoutMs: deadline('header_timeout', '10s'), bodyIdleMs: deadline('body_idle_timeout', '10s') };
}

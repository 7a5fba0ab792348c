// What time it is for what expires: tokens, sessions, sign-in flows, codes, throttle windows, notices. svc runs on
// the system clock (and the database's, where a token's lifetime starts); the server takes another only from code
// that starts it in-process, so tests move time instead of waiting or editing rows. Nothing in svc.ini or the
// environment can set it.
export type Clock = () => number;

export const systemClock: Clock = () => Date.now();

/** A time as the contract writes it: ISO 8601 UTC, or null. */
export function iso(ms: number | null): string | null {
  return ms === null ? null : new Date(ms).toISOString();
}

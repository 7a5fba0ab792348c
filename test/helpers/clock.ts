// A clock a test moves by hand: it runs with the system clock and jumps forward when told, so a test sees a
// token, session or flow expire at once instead of waiting for it or editing its row.
import type { Clock } from '../../src/domain/clock.ts';

export interface MovableClock {
  readonly now: Clock;
  advance(ms: number): void;
}

/** `ahead`: how far past the system time it starts (a server years ahead must still agree with itself). */
export function movableClock(ahead = 0): MovableClock {
  return {
    now: () => Date.now() + ahead,
    advance(ms) {
      ahead += ms;
    },
  };
}

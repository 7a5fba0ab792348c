// Broad searches take turns. A search whose ranking needs more than one statement runs each statement only when its
// turn comes: one statement of one broad search at a time in the whole process, callers served round robin, and the
// event loop free between two turns (on the embedded file a statement holds the event loop while it runs). So a
// caller who sends many broad searches waits for its own, other callers' broad searches go on beside them, and every
// other request (a sign-in, a token check, a narrow search) is served between any two turns.
import { setImmediate } from 'node:timers';

/** How many broad searches one caller may have under way at once; the next one is refused. */
export const BROAD_SEARCHES_PER_CALLER = 2;

export interface Turns {
  /** Waits until this search may run its next statement; the turn is held until `done`. */
  take(): Promise<void>;
  /** Gives the turn back. */
  done(): void;
}

export class SearchTurns {
  /** Per caller, the searches waiting for a turn, oldest first; the Map's order is the round. */
  private readonly waiting = new Map<number, (() => void)[]>();
  private readonly underWay = new Map<number, number>();
  private held = false;
  private scheduled = false;

  constructor(private readonly perCaller = BROAD_SEARCHES_PER_CALLER) {}

  /**
   * Runs `search` with the turns it takes, or returns null without running it when `caller` has `perCaller` broad
   * searches under way already.
   */
  async run<T>(caller: number, search: (turns: Turns) => Promise<T>): Promise<T | null> {
    const mine = this.underWay.get(caller) ?? 0;
    if (mine >= this.perCaller) return null;
    this.underWay.set(caller, mine + 1);
    let holding = false;
    const turns: Turns = {
      take: () =>
        new Promise<void>((resolve) => {
          const queue = this.waiting.get(caller) ?? [];
          queue.push(() => {
            holding = true;
            resolve();
          });
          this.waiting.set(caller, queue);
          this.schedule();
        }),
      done: () => {
        if (!holding) return;
        holding = false;
        this.held = false;
        this.schedule();
      },
    };
    try {
      return await search(turns);
    } finally {
      turns.done();
      const left = (this.underWay.get(caller) ?? 1) - 1;
      if (left === 0) this.underWay.delete(caller);
      else this.underWay.set(caller, left);
    }
  }

  /**
   * A turn is given in a turn of the event loop of its own, after it has read what arrived meanwhile: never at once
   * when asked for, or a search would run its next statement right after the last.
   */
  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.next();
    });
  }

  /** Gives the turn to the first caller of the round, who then goes to its end. */
  private next(): void {
    if (this.held) return;
    const first = this.waiting.entries().next();
    if (first.done) return;
    const [caller, queue] = first.value;
    const start = queue.shift()!;
    this.waiting.delete(caller);
    if (queue.length > 0) this.waiting.set(caller, queue);
    this.held = true;
    start();
  }
}

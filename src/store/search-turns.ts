// Broad searches take turns. A search whose ranking needs more than one statement runs each statement only when its
// turn comes: one statement of one broad search at a time in the whole process, users served round robin, and the
// event loop free between two turns (on the embedded file a statement holds the event loop while it runs). So a
// user who sends many broad searches waits for their own, other users' broad searches go on beside them, and every
// other request (a sign-in, a token check, a narrow search) is served between any two turns.
import { setImmediate } from 'node:timers';

/** Who a search is for: the user, who takes turns, and the credential it came with (a token, grant or session). */
export interface SearchCaller {
  readonly user: number;
  readonly credential: string;
}

/** How many broad searches may be under way at once: per credential, and per user over all their credentials. */
export const BROAD_SEARCHES = { perCredential: 2, perUser: 8 } as const;

export interface Turns {
  /** Waits until this search may run its next statement; the turn is held until `done`. */
  take(): Promise<void>;
  /** Gives the turn back. */
  done(): void;
}

/** Why a broad search was not admitted. */
export type Refused = 'credential' | 'user';

export class SearchTurns {
  /** Per user, the searches waiting for a turn, oldest first; the Map's order is the round. */
  private readonly waiting = new Map<number, (() => void)[]>();
  private readonly underWay = new Map<string, number>();
  private held = false;
  private scheduled = false;

  constructor(private readonly limits: { perCredential: number; perUser: number } = BROAD_SEARCHES) {}

  /**
   * Runs `search` with the turns it takes, or says why it was not run: the credential, or the user over all their
   * credentials, has as many broad searches under way as it may. A credential's refusal tells it nothing of the
   * user's other credentials unless the user's own limit is reached.
   */
  async run<T>(caller: SearchCaller, search: (turns: Turns) => Promise<T>): Promise<{ done: T } | { refused: Refused; limit: number }> {
    const keys = { credential: `${caller.user}\n${caller.credential}`, user: String(caller.user) };
    const { perCredential, perUser } = this.limits;
    if ((this.underWay.get(keys.credential) ?? 0) >= perCredential) return { refused: 'credential', limit: perCredential };
    if ((this.underWay.get(keys.user) ?? 0) >= perUser) return { refused: 'user', limit: perUser };
    for (const key of [keys.credential, keys.user]) this.underWay.set(key, (this.underWay.get(key) ?? 0) + 1);
    let holding = false;
    const turns: Turns = {
      take: () =>
        new Promise<void>((resolve) => {
          const queue = this.waiting.get(caller.user) ?? [];
          queue.push(() => {
            holding = true;
            resolve();
          });
          this.waiting.set(caller.user, queue);
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
      return { done: await search(turns) };
    } finally {
      turns.done();
      for (const key of [keys.credential, keys.user]) {
        const left = (this.underWay.get(key) ?? 1) - 1;
        if (left === 0) this.underWay.delete(key);
        else this.underWay.set(key, left);
      }
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

  /** Gives the turn to the first user of the round, who then goes to its end. */
  private next(): void {
    if (this.held) return;
    const first = this.waiting.entries().next();
    if (first.done) return;
    const [user, queue] = first.value;
    const start = queue.shift()!;
    this.waiting.delete(user);
    if (queue.length > 0) this.waiting.set(user, queue);
    this.held = true;
    start();
  }
}

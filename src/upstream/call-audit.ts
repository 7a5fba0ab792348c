// The audit rows of upstream calls, committed in groups: every call waits until its row is committed (no call is
// answered whose row could still be lost), but the rows of calls that end while a commit is under way, or soon
// before it, go together in one transaction, so a burst of calls costs a few commits, not one each.
import type { Database } from '../db/open.ts';
import { COUNTED_WINDOW_MS, recordAudits, recordCountedCalls, type AuditEvent } from '../store/audit.ts';
import { countedRecorder, type CountedRecorder } from '../domain/counted.ts';
import { currentTraceId } from '../trace/spans.ts';

/** At most this many rows in one transaction. */
const GROUP_MAX = 200;

/**
 * How long a commit waits for calls still running to join it, when there are young ones. A commit's sync holds the event
 * loop (the embedded driver is synchronous), so under load fewer, larger groups leave svc more time for the calls
 * themselves; a call alone is never held (docs/performance.md, "Upstream calls").
 */
const GROUP_WAIT_MS = 2;
/**
 * Only calls started this recently are waited for: one running longer (a tool that takes seconds) is unlikely to
 * end within the wait, and must not hold every other call's answer while it runs.
 */
const YOUNG_MS = 50;

export class CallAudit {
  private waiting: { event: AuditEvent; at: number; done: (e?: unknown) => void }[] = [];
  private committing = false;
  /** when each call still running started (its rows are not handed over yet) */
  private readonly running = new Set<{ readonly started: number }>();
  /** ends a commit's wait early: every young call has handed over its row, or the group is full */
  private wake: (() => void) | null = null;

  constructor(private readonly database: Database) {}

  /** Counts the call while it runs, so that a commit started meanwhile may wait for its row. */
  async during<T>(call: () => Promise<T>): Promise<T> {
    const me = { started: performance.now() };
    this.running.add(me);
    try {
      return await call();
    } finally {
      this.running.delete(me);
      // Its row is recorded in a later microtask: the wait ends once that has happened.
      if (this.wake && !this.youngRunning()) setImmediate(this.wake);
    }
  }

  /** Whether a call started within YOUNG_MS is still running. */
  private youngRunning(): boolean {
    const since = performance.now() - YOUNG_MS;
    for (const call of this.running) if (call.started >= since) return true;
    return false;
  }

  /** Resolves once the row is committed; rejects when its transaction failed. */
  record(event: AuditEvent): Promise<void> {
    // Its request's trace, named now: the group is written in whichever call's turn commits it.
    const traced = event.traceId === undefined ? { ...event, traceId: currentTraceId() } : event;
    return new Promise((resolve, reject) => {
      this.waiting.push({ event: traced, at: this.database.now(), done: (e) => (e === undefined ? resolve() : reject(e)) });
      if (this.waiting.length >= GROUP_MAX) this.wake?.();
      if (!this.committing) void this.commit();
    });
  }

  private async commit(): Promise<void> {
    this.committing = true;
    // Let the calls that end in this turn of the event loop join the group, and while other calls are still
    // running, wait a little for them too.
    await new Promise((r) => setImmediate(r));
    if (this.waiting.length < GROUP_MAX && this.youngRunning()) await this.joined();
    while (this.waiting.length > 0) {
      const group = this.waiting.splice(0, GROUP_MAX);
      try {
        await this.database.write((tx) => recordAudits(tx, group));
        for (const row of group) row.done();
      } catch (e) {
        for (const row of group) row.done(e);
      }
    }
    this.committing = false;
  }

  /** Up to GROUP_WAIT_MS, ended early once no young call is running or the group is full. */
  private joined(): Promise<void> {
    return new Promise((resolve) => {
      const end = () => {
        clearTimeout(timer);
        if (this.wake === end) this.wake = null;
        resolve();
      };
      const timer = setTimeout(end, GROUP_WAIT_MS);
      this.wake = end;
    });
  }
}

/** A call counted rather than written alone: who made it, where, and what it was answered. */
interface Counted {
  readonly actor: string;
  readonly via: string;
  readonly upstream: string;
  readonly peer: string;
  /** rate_limited, or a connect answer's not_connected or unavailable */
  readonly outcome: string;
}

/**
 * Calls a caller can repeat as fast as they like without reaching the upstream (CONTRACT §6.1): refused over `rate`,
 * or answered only with where to connect. One audit row per person, upstream, outcome and minute with their count
 * (store/audit.ts recordCountedCalls), the first written at once and the rest added before the minute ends, so such
 * calls cannot fill the audit trail.
 */
export function countedCalls(database: Database): CountedRecorder<Counted> {
  return countedRecorder(
    (c) => `${c.actor}\n${c.upstream}\n${c.outcome}`,
    (c, count) => database.write((tx) => recordCountedCalls(tx, c, count, database.now())),
    COUNTED_WINDOW_MS,
  );
}

// The audit rows of upstream calls, committed in groups: every call waits until its row is committed (no call is
// answered whose row could still be lost), but the rows of calls that end while a commit is under way go together
// in the next transaction, so a burst of calls costs a few commits, not one each.
import type { Database } from '../db/open.ts';
import { recordAudits, type AuditEvent } from '../store/audit.ts';

/** At most this many rows in one transaction. */
const GROUP_MAX = 200;

export class CallAudit {
  private waiting: { event: AuditEvent; at: number; done: (e?: unknown) => void }[] = [];
  private committing = false;

  constructor(private readonly database: Database) {}

  /** Resolves once the row is committed; rejects when its transaction failed. */
  record(event: AuditEvent): Promise<void> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ event, at: this.database.now(), done: (e) => (e === undefined ? resolve() : reject(e)) });
      if (!this.committing) void this.commit();
    });
  }

  private async commit(): Promise<void> {
    this.committing = true;
    // Let the calls that end in this turn of the event loop join the group.
    await new Promise((r) => setImmediate(r));
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
}

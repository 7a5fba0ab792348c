// The notice job in every svc process: every few seconds it makes the notices that are due (a write only when the
// reads say there is something to make), claims a few, mails them through nodemailer and records the outcome.
// Claims live in the database, so with several workers or instances each notice is sent by one of them. A mail
// that fails is tried again later with a growing pause, for up to three days; a user without an address is skipped.
import nodemailer from 'nodemailer';
import type { Database } from '../db/open.ts';
import type { NotifyConfig } from '../config/notify.ts';
import type { Logger } from '../log.ts';
import { DatabaseUnavailable, safeDatabaseMessage } from '../db/errors.ts';
import {
  derivationDue,
  deriveNotices,
  noticesDue,
  claimNotices,
  settleNotice,
  retryNotice,
  pruneNotices,
  NOTICE_PRUNE_BATCH,
  type ClaimedNotice,
} from '../store/notices.ts';
import { composeMail } from './messages.ts';

export interface NoticeJob {
  stop(): Promise<void>;
}

const TICK_MS = 5000;
/** a claim outlives any one send (nodemailer's own timeouts are shorter), so it never expires mid-send */
const LEASE_MS = 5 * 60_000;
const CLAIM_BATCH = 20;
const RETRY_FIRST_MS = 5000;
const RETRY_MAX_MS = 15 * 60_000;
const GIVE_UP_MS = 3 * 86_400_000;
const PRUNE_EVERY_MS = 3600_000;
/** settled notices are kept this much longer than the warning window, then removed */
const KEEP_MS = 30 * 86_400_000;

export function startNoticeJob(database: Database, notify: NotifyConfig, baseUrl: string, log: Logger): NoticeJob {
  const transport = nodemailer.createTransport({
    url: notify.smtpUrl!,
    connectionTimeout: 10_000,
    greetingTimeout: 10_000,
    socketTimeout: 30_000,
  });
  const warningMs = notify.expiryWarningSeconds * 1000;
  let running: Promise<void> | null = null;
  let stopped = false;
  let prunedAt = 0;

  const send = async (notice: ClaimedNotice): Promise<void> => {
    const now = database.now();
    if (notice.user.email.trim() === '') {
      await database.write((tx) => settleNotice(tx, notice.id, 'no_email', now));
      log.info('notice_skipped', { notice: notice.id, kind: notice.kind, reason: 'no email address' });
      return;
    }
    const mail = composeMail(notice, baseUrl);
    try {
      await transport.sendMail({ from: notify.from, to: notice.user.email, subject: mail.subject, text: mail.text, html: mail.html });
    } catch (e) {
      const failedAt = database.now();
      const error = mailError(e, notify.smtpUrl!);
      if (failedAt - notice.createdAt > GIVE_UP_MS) {
        await database.write((tx) => settleNotice(tx, notice.id, 'gave_up', failedAt));
        log.error('notice_gave_up', { notice: notice.id, kind: notice.kind, attempts: notice.attempts, error });
        return;
      }
      const pause = Math.min(RETRY_FIRST_MS * 2 ** (notice.attempts - 1), RETRY_MAX_MS);
      await database.write((tx) => retryNotice(tx, notice.id, failedAt + pause));
      log.warn('notice_failed', { notice: notice.id, kind: notice.kind, attempts: notice.attempts, retry_in_s: pause / 1000, error });
      return;
    }
    await database.write((tx) => settleNotice(tx, notice.id, 'sent', database.now()));
    log.info('notice_sent', { notice: notice.id, kind: notice.kind });
  };

  const round = async () => {
    const now = database.now();
    if (await derivationDue(database.db, now, warningMs)) {
      const made = await database.write((tx) => deriveNotices(tx, now, warningMs));
      if (made > 0) log.info('notices_made', { count: made });
    }
    while (!stopped && (await noticesDue(database.db, database.now()))) {
      const claimed = await database.write((tx) => claimNotices(tx, database.now(), LEASE_MS, CLAIM_BATCH));
      for (const notice of claimed) await send(notice);
      if (claimed.length < CLAIM_BATCH) break;
    }
    if (now - prunedAt > PRUNE_EVERY_MS) {
      prunedAt = now;
      while ((await database.write((tx) => pruneNotices(tx, now - warningMs - KEEP_MS))) === NOTICE_PRUNE_BATCH);
    }
  };

  const tick = () => {
    running ??= round()
      .then(() => log.debug?.('notice_round_done'))
      .catch((e: unknown) => {
        // Busy: another process holds the lock; the next round tries again.
        if (!(e instanceof DatabaseUnavailable)) log.warn('notice_round_failed', { error: safeDatabaseMessage(e) });
      })
      .finally(() => (running = null));
    return running;
  };
  const first = setTimeout(() => void tick(), 1000).unref();
  const timer = setInterval(() => void tick(), TICK_MS).unref();
  return {
    async stop() {
      stopped = true;
      clearTimeout(first);
      clearInterval(timer);
      await running;
      transport.close();
    },
  };
}

/** What went wrong, without the SMTP URL's credentials (an error could quote the URL). */
function mailError(e: unknown, smtpUrl: string): string {
  const err = e as { code?: unknown; responseCode?: unknown; message?: unknown };
  let message = String(err.message ?? e)
    .split('\n')[0]!
    .slice(0, 200);
  const u = new URL(smtpUrl);
  for (const secret of [u.password, decodeURIComponent(u.password), u.username]) if (secret) message = message.split(secret).join('***');
  return [typeof err.code === 'string' ? err.code : '', typeof err.responseCode === 'number' ? String(err.responseCode) : '', message]
    .filter((p) => p !== '')
    .join(' ');
}

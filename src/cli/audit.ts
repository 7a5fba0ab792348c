// `svc audit list`: the audit trail exported, oldest first.
import { type Command, withDatabase, str, flag } from './command.ts';
import { UsageError } from './errors.ts';
import { exportAudit } from '../store/audit.ts';
import { parseDuration } from '../domain/duration.ts';
import { auditEntryJson } from '../wire/json.ts';

// Control characters (C0, DEL, C1), line and paragraph separators and bidirectional controls: any of them in a
// field could start a new line, move the cursor or recolour the terminal, so a value written by an anonymous
// caller (a login name) could forge an entry. The text export shows them as escapes instead.
const UNPRINTABLE = /[\p{Cc}\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]/gu;
const SHORT: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };
const escapeCode = (ch: string) => {
  const code = ch.codePointAt(0)!;
  return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
};

/** A field for one tab-separated line: backslashes doubled, so an escape shown can only come from a real character. */
function printable(text: string): string {
  return text.replace(/\\/g, '\\\\').replace(UNPRINTABLE, (ch) => SHORT[ch] ?? escapeCode(ch));
}

/** JSON.stringify leaves DEL, C1 and the separators as they are; they get JSON's own \u escapes. */
function printableJson(value: unknown): string {
  return JSON.stringify(value).replace(UNPRINTABLE, (ch) => `\\u${ch.codePointAt(0)!.toString(16).padStart(4, '0')}`);
}

export const auditCommands: Command[] = [
  {
    name: ['audit', 'list'],
    usage: 'audit list [--since D] [--user UID] [--json]',
    summary: 'export the audit trail',
    help: `Prints the audit trail, oldest first.
Options:
  --since D     only entries of the last D (such as 7d or 12h), or since an ISO time (2026-11-01T00:00:00Z)
  --user UID    only entries by or about this user
  --json        a JSON array of {id, at, actor, via, action, target, detail, peer, trace_id}`,
    positionals: [],
    options: { since: { type: 'string' }, user: { type: 'string' }, json: { type: 'boolean' } },
    configMode: 'data',
    async run(ctx) {
      const sinceText = str(ctx, 'since');
      let since: number | undefined;
      if (sinceText !== undefined) {
        const seconds = parseDuration(sinceText);
        since = seconds !== null ? Date.now() - seconds * 1000 : Date.parse(sinceText);
        if (Number.isNaN(since)) throw new UsageError('--since takes a duration such as 7d, or an ISO time');
      }
      const user = str(ctx, 'user');
      const entries = await withDatabase(ctx.config(), ({ db }) =>
        exportAudit(db, { ...(since === undefined ? {} : { since }), ...(user === undefined ? {} : { uid: user }) }),
      );
      const rows = entries.map(auditEntryJson);
      if (flag(ctx, 'json')) ctx.io.out(JSON.stringify(rows, null, 2));
      else {
        for (const r of rows) {
          const fields = [r.at, `${r.actor ?? '-'} (${r.via})`, r.action, r.target ?? '-'].map((f) => printable(f ?? '-'));
          ctx.io.out([...fields, r.detail ? printableJson(r.detail) : '-', printable(r.peer ?? '-')].join('\t'));
        }
      }
      return 0;
    },
  },
];

// `svc audit list`: the audit trail exported, oldest first.
import { type Command, withDatabase, str, flag } from './command.ts';
import { UsageError } from './errors.ts';
import { exportAudit } from '../store/audit.ts';
import { parseDuration } from '../config/duration.ts';
import { iso } from '../domain/json.ts';

export const auditCommands: Command[] = [
  {
    name: ['audit', 'list'],
    usage: 'audit list [--since D] [--user UID] [--json]',
    summary: 'export the audit trail',
    help: `Prints the audit trail, oldest first.
Options:
  --since D     only entries of the last D (such as 7d or 12h), or since an ISO time (2026-11-01T00:00:00Z)
  --user UID    only entries by or about this user
  --json        a JSON array of {id, at, actor, via, action, target, detail, peer}`,
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
      const entries = await withDatabase(ctx.config(), ({ db }) => exportAudit(db, { ...(since === undefined ? {} : { since }), ...(user === undefined ? {} : { uid: user }) }));
      const rows = entries.map((e) => ({ id: e.id, at: iso(e.at), actor: e.actor, via: e.via, action: e.action, target: e.target, detail: e.detail, peer: e.peer }));
      if (flag(ctx, 'json')) ctx.io.out(JSON.stringify(rows, null, 2));
      else for (const r of rows) ctx.io.out([r.at, `${r.actor ?? '-'} (${r.via})`, r.action, r.target ?? '-', r.detail ? JSON.stringify(r.detail) : '-', r.peer ?? '-'].join('\t'));
      return 0;
    },
  },
];

// svc tool …: upstream tools, their state and labels, and which a user may use (CONTRACT §6.1).
import { type Command, type CommandContext, withDatabase, str, flag, cliActor } from './command.ts';
import { UsageError } from './errors.ts';
import type { Database } from '../db/open.ts';
import type { Actor } from '../store/audit.ts';
import { listToolsPage, toolCounts, upstreamStatuses, type ToolState, type UpstreamTool } from '../store/upstream-tools.ts';
import type { Db } from '../db/open.ts';
import { getUser } from '../store/users.ts';
import { approveToolAs, disableToolAs, labelToolAs } from '../admin/tools.ts';
import { labelsField } from '../requests/fields.ts';
import { toolLabels, usable } from '../upstream/access.ts';
import { toolJson, visibleJson } from '../wire/json.ts';
import { escapeHidden } from '../domain/definition-text.ts';
import { iso } from '../domain/clock.ts';

const TWO = ['UPSTREAM', 'TOOL'];

/**
 * Every tool, read a page at a time: an upstream's definitions can come to more than a database server answers in
 * one response.
 */
async function everyTool(db: Db): Promise<UpstreamTool[]> {
  const all: UpstreamTool[] = [];
  for (let page = 1; ; page++) {
    const read = await listToolsPage(db, { page, size: 100 });
    all.push(...read.rows);
    if (!read.more) return all;
  }
}

function line(ctx: CommandContext, tool: UpstreamTool): string {
  const labels = toolLabels(tool, ctx.config().upstreams);
  const shown = labels === null ? '(upstream not configured)' : labels.join(',') || '(unrestricted)';
  const held = tool.held === null ? '' : `\theld: ${tool.held.join('; ')}`;
  return `${tool.upstream}\t${escapeHidden(tool.name)}\t${tool.state}\t${shown}${tool.labels === null ? '' : ' (own)'}${held}`;
}

/** `svc tool VERB UPSTREAM TOOL`: one admin action on one tool. */
function stateCommand(
  verb: string,
  action: (database: Database, actor: Actor, upstream: string, name: string) => Promise<UpstreamTool>,
  summary: string,
  help: string,
  done: (tool: UpstreamTool) => string,
): Command {
  return {
    name: ['tool', verb],
    usage: `tool ${verb} UPSTREAM TOOL`,
    summary,
    help,
    positionals: TWO,
    options: {},
    configMode: 'data',
    async run(ctx) {
      const [upstream, name] = ctx.positionals as [string, string];
      ctx.io.out(done(await withDatabase(ctx.config(), (database) => action(database, cliActor(), upstream, name))));
      return 0;
    },
  };
}

export const toolCommands: Command[] = [
  {
    name: ['tool', 'list'],
    usage: 'tool list [--json] [--user UID]',
    summary: 'list upstream tools, their state and labels',
    help: 'Lists every tool svc found on its upstreams: upstream, name, state (pending, approved, changed, disabled,\ngone) and the labels that decide who may use it. --user UID lists only the tools that user may use.\nA held tool (never offered, and not approvable as it is) says why after "held:", with each character a reader\ncould not see written as its escape (U+202E).\n--json prints an array of {upstream, name, state, labels, own_labels, fingerprint, approved_fingerprint,\ndefinition, approved_definition, held, updated_at}, such characters written as \\u escapes.',
    positionals: [],
    options: { json: { type: 'boolean' }, user: { type: 'string' } },
    configMode: 'data',
    async run(ctx) {
      const config = ctx.config();
      const uid = str(ctx, 'user');
      const tools = await withDatabase(config, async ({ db }) => {
        const all = await everyTool(db);
        if (uid === undefined) return all;
        const user = await getUser(db, uid);
        return all.filter((t) => usable(t, config, { labels: user.labels, restriction: null }));
      });
      if (flag(ctx, 'json')) {
        ctx.io.out(
          visibleJson(
            tools.map((t) => toolJson(t, toolLabels(t, config.upstreams))),
            2,
          ),
        );
        return 0;
      }
      if (tools.length === 0) ctx.io.out(uid === undefined ? 'no upstream tools' : `${uid} may use no upstream tool`);
      for (const t of tools) ctx.io.out(line(ctx, t));
      return 0;
    },
  },
  {
    name: ['tool', 'approve'],
    usage: 'tool approve UPSTREAM TOOL [--fingerprint F]',
    summary: 'approve a tool as it is described now',
    help: 'Approves the tool: its current definition is what agents are told from now on (pinned by its fingerprint).\nA pending or changed tool becomes usable; a disabled one is enabled again. --fingerprint F (the 64 hex\ncharacters `svc tool list --json` shows) approves only the definition you reviewed: if the upstream changed the\ntool since, nothing is approved and the exit status is 1.',
    positionals: TWO,
    options: { fingerprint: { type: 'string' } },
    configMode: 'data',
    async run(ctx) {
      const [upstream, name] = ctx.positionals as [string, string];
      const fingerprint = str(ctx, 'fingerprint');
      if (fingerprint !== undefined && !/^[0-9a-f]{64}$/.test(fingerprint))
        throw new UsageError('--fingerprint takes the 64 hex characters of fingerprint in `svc tool list --json`');
      const t = await withDatabase(ctx.config(), (database) => approveToolAs(database, cliActor(), upstream, name, fingerprint));
      ctx.io.out(`approved ${t.upstream}/${t.name} (fingerprint ${t.fingerprint.slice(0, 12)}…)`);
      return 0;
    },
  },
  {
    name: ['tool', 'label'],
    usage: 'tool label UPSTREAM TOOL (--labels L | --inherit)',
    summary: "set a tool's own labels, or return it to its upstream's",
    help: "--labels L gives the tool its own ACL labels ('' for none: every signed-in user may use it);\n--inherit returns it to the labels of its [upstream] section.",
    positionals: TWO,
    options: { labels: { type: 'string' }, inherit: { type: 'boolean' } },
    configMode: 'data',
    async run(ctx) {
      const [upstream, name] = ctx.positionals as [string, string];
      const given = str(ctx, 'labels');
      const inherit = flag(ctx, 'inherit') === true;
      if ((given === undefined) === !inherit) throw new UsageError('give exactly one of --labels L and --inherit');
      const labels = inherit ? null : labelsField(given);
      const tool = await withDatabase(ctx.config(), (database) => labelToolAs(database, cliActor(), upstream, name, labels));
      ctx.io.out(`${tool.upstream}/${tool.name}: ${labels === null ? "its upstream's labels" : `labels ${labels.join(',') || '(none)'}`}`);
      return 0;
    },
  },
  stateCommand(
    'disable',
    disableToolAs,
    'disable a tool',
    'Disables the tool: no caller may list or call it until it is approved again.',
    (t) => `disabled ${t.upstream}/${t.name}`,
  ),
  {
    name: ['upstream', 'list'],
    usage: 'upstream list [--json]',
    summary: 'the configured upstreams, their state and tool counts',
    help: 'Lists each [upstream] section: how svc reaches it (http or stdio), its state as svc last found it (up, down,\nor starting: not listed yet) and how many of its tools are in each state. --json prints an array of\n{name, transport, state, checked_at, tools: {pending, approved, changed, disabled, gone}}.',
    positionals: [],
    options: { json: { type: 'boolean' } },
    configMode: 'data',
    async run(ctx) {
      const config = ctx.config();
      const [statuses, counted] = await withDatabase(config, ({ db }) => Promise.all([upstreamStatuses(db), toolCounts(db)]));
      const rows = config.upstreams.map((u) => {
        const status = statuses.get(u.name);
        const counts: Record<ToolState, number> = counted.get(u.name) ?? { pending: 0, approved: 0, changed: 0, disabled: 0, gone: 0 };
        return {
          name: u.name,
          transport: u.transport.kind,
          state: status?.state ?? 'starting',
          checked_at: iso(status?.checkedAt ?? null),
          tools: counts,
        };
      });
      if (flag(ctx, 'json')) {
        ctx.io.out(JSON.stringify(rows, null, 2));
        return 0;
      }
      if (rows.length === 0) ctx.io.out('no [upstream] section in the configuration');
      for (const r of rows) {
        const counts = Object.entries(r.tools)
          .filter(([, n]) => n > 0)
          .map(([state, n]) => `${n} ${state}`);
        ctx.io.out(`${r.name}\t${r.transport}\t${r.state}\t${counts.join(', ') || 'no tools'}`);
      }
      return 0;
    },
  },
];

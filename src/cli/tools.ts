// svc tool …, svc prompt …, svc app …: what svc reviews of its upstreams, their state and labels, and which a user
// may use (CONTRACT §6.1, §6.3). One set of commands, made for each kind; an app is named by its upstream URI.
import { type Command, type CommandContext, withDatabase, str, flag, cliActor } from './command.ts';
import { UsageError } from './errors.ts';
import {
  listObjectsPage,
  noCounts,
  objectCounts,
  upstreamStatuses,
  type ReviewedKind,
  type UpstreamObject,
} from '../store/upstream-tools.ts';
import type { Db } from '../db/open.ts';
import { getUser } from '../store/users.ts';
import { approveObjectAs, disableObjectAs, labelObjectAs } from '../admin/tools.ts';
import { labelsField } from '../requests/fields.ts';
import { toolLabels, usable } from '../upstream/access.ts';
import { objectJson, visibleJson } from '../wire/json.ts';
import { escapeHidden } from '../domain/definition-text.ts';
import { iso } from '../domain/clock.ts';

/** How the commands of a kind name it: `svc prompt approve UPSTREAM PROMPT`, `svc app approve UPSTREAM URI`. */
const WORDS: Record<ReviewedKind, { plural: string; arg: string }> = {
  tool: { plural: 'tools', arg: 'TOOL' },
  prompt: { plural: 'prompts', arg: 'PROMPT' },
  app: { plural: 'apps', arg: 'URI' },
};

/**
 * Every object of a kind, read a page at a time: an upstream's definitions can come to more than a database server
 * answers in one response.
 */
async function everyObject(db: Db, kind: ReviewedKind): Promise<UpstreamObject[]> {
  const all: UpstreamObject[] = [];
  for (let page = 1; ; page++) {
    const read = await listObjectsPage(db, { page, size: 100 }, { kind });
    all.push(...read.rows);
    if (!read.more) return all;
  }
}

function line(ctx: CommandContext, object: UpstreamObject): string {
  const labels = toolLabels(object, ctx.config().upstreams);
  const shown = labels === null ? '(upstream not configured)' : labels.join(',') || '(unrestricted)';
  const held = object.held === null ? '' : `\theld: ${escapeHidden(object.held.join('; '))}`;
  return `${object.upstream}\t${escapeHidden(object.name)}\t${object.state}\t${shown}${object.labels === null ? '' : ' (own)'}${held}`;
}

/** `UPSTREAM/NAME` as the command line says it: the name's hidden characters escaped. */
const named = (o: UpstreamObject) => `${o.upstream}/${escapeHidden(o.name)}`;

function listCommand(kind: ReviewedKind): Command {
  const { plural } = WORDS[kind];
  const app = kind === 'app' ? ' (an app by its upstream ui:// URI, with the SHA-256 of its contents and its _meta.ui)' : '';
  return {
    name: [kind, 'list'],
    usage: `${kind} list [--json] [--user UID]`,
    summary: `list upstream ${plural}, their state and labels`,
    help: `Lists every ${kind} svc found on its upstreams${app}: upstream, name, state (pending, approved, changed,\ndisabled, gone) and the labels that decide who may use it. --user UID lists only the ${plural} that user may use.\nA held ${kind} (never offered, and not approvable as it is) says why after "held:", with each character a reader\ncould not see written as its escape (U+202E).\n--json prints an array of {upstream, kind, name, state, labels, own_labels, fingerprint, approved_fingerprint,\ndefinition, approved_definition, held, updated_at}, such characters written as \\u escapes.`,
    positionals: [],
    options: { json: { type: 'boolean' }, user: { type: 'string' } },
    configMode: 'data',
    async run(ctx) {
      const config = ctx.config();
      const uid = str(ctx, 'user');
      const objects = await withDatabase(config, async ({ db }) => {
        const all = await everyObject(db, kind);
        if (uid === undefined) return all;
        const user = await getUser(db, uid);
        return all.filter((t) => usable(t, config, { labels: user.labels, restriction: null }));
      });
      if (flag(ctx, 'json')) {
        ctx.io.out(
          visibleJson(
            objects.map((t) => objectJson(t, toolLabels(t, config.upstreams))),
            2,
          ),
        );
        return 0;
      }
      if (objects.length === 0) ctx.io.out(uid === undefined ? `no upstream ${plural}` : `${uid} may use no upstream ${kind}`);
      for (const t of objects) ctx.io.out(line(ctx, t));
      return 0;
    },
  };
}

function approveCommand(kind: ReviewedKind): Command {
  const { arg } = WORDS[kind];
  return {
    name: [kind, 'approve'],
    usage: `${kind} approve UPSTREAM ${arg} [--fingerprint F]`,
    summary: `approve ${kind === 'app' ? 'an app' : `a ${kind}`} as it is described now`,
    help: `Approves the ${kind}: its current definition is what agents are told from now on (pinned by its fingerprint).\nA pending or changed ${kind} becomes usable; a disabled one is enabled again. --fingerprint F (the 64 hex\ncharacters \`svc ${kind} list --json\` shows) approves only the definition you reviewed: if the upstream changed the\n${kind} since, nothing is approved and the exit status is 1.`,
    positionals: ['UPSTREAM', arg],
    options: { fingerprint: { type: 'string' } },
    configMode: 'data',
    async run(ctx) {
      const [upstream, name] = ctx.positionals as [string, string];
      const fingerprint = str(ctx, 'fingerprint');
      if (fingerprint !== undefined && !/^[0-9a-f]{64}$/.test(fingerprint))
        throw new UsageError(`--fingerprint takes the 64 hex characters of fingerprint in \`svc ${kind} list --json\``);
      const t = await withDatabase(ctx.config(), (database) =>
        approveObjectAs(database, cliActor(), { upstream, kind, name }, fingerprint),
      );
      ctx.io.out(`approved ${named(t)} (fingerprint ${t.fingerprint.slice(0, 12)}…)`);
      return 0;
    },
  };
}

function labelCommand(kind: ReviewedKind): Command {
  const { arg } = WORDS[kind];
  return {
    name: [kind, 'label'],
    usage: `${kind} label UPSTREAM ${arg} (--labels L | --inherit)`,
    summary: `set ${kind === 'app' ? 'an app' : `a ${kind}`}'s own labels, or return it to its upstream's`,
    help: `--labels L gives the ${kind} its own ACL labels ('' for none: every signed-in user may use it);\n--inherit returns it to the labels of its [upstream] section.`,
    positionals: ['UPSTREAM', arg],
    options: { labels: { type: 'string' }, inherit: { type: 'boolean' } },
    configMode: 'data',
    async run(ctx) {
      const [upstream, name] = ctx.positionals as [string, string];
      const given = str(ctx, 'labels');
      const inherit = flag(ctx, 'inherit') === true;
      if ((given === undefined) === !inherit) throw new UsageError('give exactly one of --labels L and --inherit');
      const labels = inherit ? null : labelsField(given);
      const t = await withDatabase(ctx.config(), (database) => labelObjectAs(database, cliActor(), { upstream, kind, name }, labels));
      ctx.io.out(`${named(t)}: ${labels === null ? "its upstream's labels" : `labels ${labels.join(',') || '(none)'}`}`);
      return 0;
    },
  };
}

function disableCommand(kind: ReviewedKind): Command {
  const { arg } = WORDS[kind];
  return {
    name: [kind, 'disable'],
    usage: `${kind} disable UPSTREAM ${arg}`,
    summary: `disable ${kind === 'app' ? 'an app' : `a ${kind}`}`,
    help: `Disables the ${kind}: no caller may list or use it until it is approved again.`,
    positionals: ['UPSTREAM', arg],
    options: {},
    configMode: 'data',
    async run(ctx) {
      const [upstream, name] = ctx.positionals as [string, string];
      const t = await withDatabase(ctx.config(), (database) => disableObjectAs(database, cliActor(), { upstream, kind, name }));
      ctx.io.out(`disabled ${named(t)}`);
      return 0;
    },
  };
}

const upstreamList: Command = {
  name: ['upstream', 'list'],
  usage: 'upstream list [--json]',
  summary: 'the configured upstreams, their state and what they offer',
  help: 'Lists each [upstream] section: how svc reaches it (http or stdio), its state as svc last found it (up, down,\nor starting: not listed yet) and how many of its tools, prompts and apps are in each state. --json prints an\narray of {name, transport, state, checked_at, tools, prompts, apps}, each of the last three\n{pending, approved, changed, disabled, gone}.',
  positionals: [],
  options: { json: { type: 'boolean' } },
  configMode: 'data',
  async run(ctx) {
    const config = ctx.config();
    const [statuses, counted] = await withDatabase(config, ({ db }) => Promise.all([upstreamStatuses(db), objectCounts(db)]));
    const rows = config.upstreams.map((u) => {
      const status = statuses.get(u.name);
      const counts = counted.get(u.name) ?? { tool: noCounts(), prompt: noCounts(), app: noCounts() };
      return {
        name: u.name,
        transport: u.transport.kind,
        state: status?.state ?? 'starting',
        checked_at: iso(status?.checkedAt ?? null),
        tools: counts.tool,
        prompts: counts.prompt,
        apps: counts.app,
      };
    });
    if (flag(ctx, 'json')) {
      ctx.io.out(JSON.stringify(rows, null, 2));
      return 0;
    }
    if (rows.length === 0) ctx.io.out('no [upstream] section in the configuration');
    const said = (counts: Record<string, number>) =>
      Object.entries(counts)
        .filter(([, n]) => n > 0)
        .map(([state, n]) => `${n} ${state}`)
        .join(', ');
    for (const r of rows) {
      // Prompts and apps are named only when the upstream has some.
      const more = (['prompts', 'apps'] as const).filter((k) => said(r[k]) !== '').map((k) => `; ${k}: ${said(r[k])}`);
      ctx.io.out(`${r.name}\t${r.transport}\t${r.state}\t${said(r.tools) || 'no tools'}${more.join('')}`);
    }
    return 0;
  },
};

/** `svc KIND list|approve|label|disable` for each kind svc reviews, and `svc upstream list`. */
export const toolCommands: Command[] = [
  ...(['tool', 'prompt', 'app'] as const).flatMap((kind) => [
    listCommand(kind),
    approveCommand(kind),
    labelCommand(kind),
    disableCommand(kind),
  ]),
  upstreamList,
];

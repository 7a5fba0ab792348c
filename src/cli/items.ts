import { existsSync, statSync } from 'node:fs';
import { type Command, withDatabase, str, flag, cliActor } from './command.ts';
import { listAllItems } from '../store/items.ts';
import { checkItemId, itemRequest } from '../requests/items.ts';
import { putItemAs, adminRemoveItem, importItemsAs } from '../admin/actions.ts';
import { readMarkdownDir } from '../requests/markdown-dir.ts';
import { UsageError } from './errors.ts';
import { itemSummaryJson } from '../wire/json.ts';

export const itemCommands: Command[] = [
  {
    name: ['item', 'put'],
    usage: 'item put ID --title T [--labels L] < text',
    summary: 'create or replace an item from standard input',
    help: "Creates or replaces the item ID with the text read from standard input.\nOptions:\n  --title T    title (required)\n  --labels L   ACL labels. Without --labels a new item has none (every signed-in user can read it) and a\n               replaced item keeps its labels; --labels '' removes them.",
    positionals: ['ID'],
    options: { title: { type: 'string' }, labels: { type: 'string' } },
    configMode: 'data',
    async run(ctx) {
      const title = str(ctx, 'title');
      if (title === undefined) throw new UsageError('--title is required');
      const id = checkItemId(ctx.positionals[0]);
      const config = ctx.config();
      const text = await ctx.io.readStdin();
      const { item, created } = await withDatabase(config, (database) =>
        putItemAs(database, cliActor(), id, itemRequest({ title, text, labels: str(ctx, 'labels') })),
      );
      ctx.io.out(
        `${created ? 'created' : 'replaced'} item ${item.id} (labels: ${item.labels.join(',') || 'none, every signed-in user can read it'})`,
      );
      return 0;
    },
  },
  {
    name: ['item', 'import'],
    usage: 'item import DIR',
    summary: 'create or replace items from *.md files',
    help: 'Reads every *.md file under DIR. The id is the path relative to DIR without .md; optional front matter\n(--- title: … labels: … ---) gives the title and labels; without a title the first "# heading" or the file name is used.\nA replaced item whose file has no labels: line keeps its labels; "labels:" with nothing after it removes them.',
    positionals: ['DIR'],
    options: {},
    configMode: 'data',
    async run(ctx) {
      const dir = ctx.positionals[0]!;
      if (!existsSync(dir) || !statSync(dir).isDirectory()) throw new UsageError(`${dir} is not a directory`);
      const docs = readMarkdownDir(dir);
      const results = await withDatabase(ctx.config(), (database) => importItemsAs(database, cliActor(), dir, docs));
      for (const r of results) ctx.io.out(`${r.created ? 'created' : 'replaced'} item ${r.id}`);
      ctx.io.out(`imported ${results.length} item(s)`);
      return 0;
    },
  },
  {
    name: ['item', 'remove'],
    usage: 'item remove ID',
    summary: 'remove an item',
    help: 'Removes the item ID.',
    positionals: ['ID'],
    options: {},
    configMode: 'data',
    async run(ctx) {
      await withDatabase(ctx.config(), (database) => adminRemoveItem(database, cliActor(), ctx.positionals[0]!));
      ctx.io.out(`removed item ${ctx.positionals[0]}`);
      return 0;
    },
  },
  {
    name: ['item', 'list'],
    usage: 'item list [--json]',
    summary: 'list items',
    help: 'Lists all items. --json prints an array of {id, title, labels}.',
    positionals: [],
    options: { json: { type: 'boolean' } },
    configMode: 'data',
    async run(ctx) {
      const items = await withDatabase(ctx.config(), ({ db }) => listAllItems(db));
      if (flag(ctx, 'json')) {
        ctx.io.out(JSON.stringify(items.map(itemSummaryJson), null, 2));
        return 0;
      }
      if (items.length === 0) ctx.io.out('no items');
      for (const i of items) ctx.io.out(`${i.id}\t${i.labels.join(',') || '(unrestricted)'}\t${i.title}`);
      return 0;
    },
  },
];

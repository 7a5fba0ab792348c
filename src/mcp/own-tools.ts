// svc's own tools (CONTRACT §6): whoami, search and fetch, each an object with its definition, as tools/list gives
// it, and what it does for a caller. The definitions are made once, as JSON, when the module loads; the arguments
// are checked with the same zod schema the definition was made from.
import { z } from 'zod';
import type { Db } from '../db/open.ts';
import type { Caller } from '../domain/caller.ts';
import { AppError } from '../domain/errors.ts';
import { ITEM_ID_MAX } from '../domain/item-id.ts';
import { fetchVisible } from '../store/items.ts';
import { searchVisible } from '../store/search.ts';

export const QUERY_MAX = 1000;

/** A tool's answer, as MCP's tools/call result has it. */
export interface ToolAnswer {
  content: { type: 'text'; text: string }[];
  structuredContent?: Record<string, unknown>;
  isError?: boolean;
}

/** What a tool's run gets besides its arguments. */
export interface ToolRun {
  readonly db: Db;
  readonly caller: Caller;
  /** aborted when the request's client has gone (a broad search stops at its next turn); made only when asked */
  readonly signal: () => AbortSignal;
}

export interface OwnTool {
  /** the definition tools/list gives: name, title, description, schemas, annotations */
  readonly definition: Readonly<Record<string, unknown>> & { readonly name: string };
  /** checks the arguments: the tool's input, or the words that say what is wrong */
  parse(args: unknown): { ok: true; input: unknown } | { ok: false; message: string };
  run(input: unknown, run: ToolRun): Promise<ToolAnswer>;
}

const whoamiOutput = z.object({
  uid: z.string(),
  name: z.string(),
  email: z.string(),
  labels: z.array(z.string()).describe("the labels that decide what this connection can read: the user's, narrowed by a token restriction"),
  admin: z.boolean(),
  via: z.enum(['token', 'session', 'header']),
  restriction: z.array(z.string()).nullable().describe("the token's label restriction, or null for the user's whole access"),
  scopes: z
    .array(z.string())
    .nullable()
    .describe('what the token may do (mcp, api, admin), or null for a browser session or the proxy, which are not scoped'),
});
const hit = z.object({ id: z.string(), title: z.string(), snippet: z.string() });
const itemOutput = z.object({ id: z.string(), title: z.string(), text: z.string(), labels: z.array(z.string()) });
const searchInput = z.object({
  query: z.string().min(1).max(QUERY_MAX).describe('words to look for'),
  limit: z.number().int().min(1).max(50).default(10).describe('how many results, 1 to 50 (default 10)'),
});
const searchOutput = z.object({ results: z.array(hit) });
const fetchInput = z.object({ id: z.string().min(1).max(ITEM_ID_MAX).describe('the document id') });
const noInput = z.object({});

const READ_ONLY = { readOnlyHint: true, openWorldHint: false } as const;

function json(value: unknown) {
  return [{ type: 'text' as const, text: JSON.stringify(value) }];
}

/** A tool made from its zod schemas: its definition in JSON Schema, and arguments checked by the input schema. */
function tool<I extends z.ZodObject, O extends z.ZodObject>(
  name: string,
  about: { title: string; description: string },
  input: I,
  output: O,
  run: (input: z.output<I>, run: ToolRun) => Promise<ToolAnswer>,
): OwnTool {
  const definition = {
    name,
    ...about,
    inputSchema: z.toJSONSchema(input, { io: 'input' }),
    outputSchema: z.toJSONSchema(output, { io: 'output' }),
    annotations: READ_ONLY,
  };
  return {
    definition,
    parse(args) {
      const parsed = input.safeParse(args ?? {});
      if (parsed.success) return { ok: true, input: parsed.data };
      const problems = parsed.error.issues.map((i) => `${i.path.join('.') || 'arguments'}: ${i.message}`).join('; ');
      return { ok: false, message: `Input validation error: invalid arguments for tool ${name}: ${problems}` };
    },
    run: (value, context) => run(value as z.output<I>, context),
  };
}

const whoami = tool(
  'whoami',
  {
    title: 'Who am I',
    description:
      "Tells which svc user this connection acts as: uid, name, email, the ACL labels it reads with, admin flag, how it signed in (token, session or header), and a token's label restriction.",
  },
  noInput,
  whoamiOutput,
  async (_input, { caller }) => {
    const restriction = caller.access.restriction === null ? null : [...caller.access.restriction];
    const result = {
      uid: caller.uid,
      name: caller.name,
      email: caller.email,
      labels: [...caller.labels],
      admin: caller.admin,
      via: caller.via,
      restriction,
      scopes: caller.scopes === null ? null : [...caller.scopes],
    };
    return { content: json(result), structuredContent: result };
  },
);

const search = tool(
  'search',
  {
    title: 'Search documents',
    description:
      'Full-text search over the documents this user may read; best matches first. Give plain words (punctuation and search operators are ignored). Returns id, title and a snippet for each hit; call `fetch` with an id to read the whole document.',
  },
  searchInput,
  searchOutput,
  async ({ query, limit }, { db, caller, signal }) => {
    try {
      const who = { user: caller.userId, credential: caller.credential };
      const results = await searchVisible(db, query, caller.access, limit, who, { signal: signal() });
      return { content: json(results), structuredContent: { results } };
    } catch (e) {
      // A search too broad to rank, or one broad search too many at once: the caller is told what to do.
      if (e instanceof AppError) return { content: [{ type: 'text' as const, text: e.message }], isError: true };
      throw e;
    }
  },
);

const fetchItem = tool(
  'fetch',
  {
    title: 'Fetch a document',
    description: 'Reads one document in full by its id (as returned by `search`): id, title, text and ACL labels.',
  },
  fetchInput,
  itemOutput,
  async ({ id }, { db, caller }) => {
    const item = await fetchVisible(db, id, caller.access);
    // Missing and not visible are the same answer, from the same single query.
    if (!item) return { content: [{ type: 'text' as const, text: `not found: no document "${id}"` }], isError: true };
    const result = { id: item.id, title: item.title, text: item.text, labels: [...item.labels] };
    return { content: json(result), structuredContent: result };
  },
);

/** svc's own tools, by name, in the order tools/list gives them. */
export const OWN_TOOLS: ReadonlyMap<string, OwnTool> = new Map([whoami, search, fetchItem].map((t) => [t.definition.name, t]));

// An upstream's apps (CONTRACT §6.3, "Apps are code, so they are pinned"): each `ui://` resource, HTML a person's
// client renders, is a reviewed row of kind 'app' named by its upstream URI, whose definition holds the SHA-256 and
// size of its contents (the bytes of its text, or of its base64 blob, as served), whether they came as a blob, and
// its `_meta.ui` (CSP, permissions, domain). Discovery reads each app on the upstream's shared connection
// (discoverApps); a caller's read is served only as approved (AppPins.served), as the bytes hashed: other bytes, the
// other encoding, or another `_meta.ui`, are the missing resource's answer and make the app `changed`, recorded here as
// discovery records it, until an admin approves it. A tool names its app in `_meta.ui.resourceUri`, and is offered
// with it only while that app is approved and the caller may read it.
import { createHash } from 'node:crypto';
import type { ReadResourceResult, Resource, Tool } from '@modelcontextprotocol/client';
import type { Config, UpstreamConfig } from '../config/load.ts';
import type { Database } from '../db/open.ts';
import { canonicalJson, isObject } from '../domain/canonical-json.ts';
import { mapResource, mapToolMeta, mapUri } from '../domain/resource-uris.ts';
import type { Access } from '../domain/visibility.ts';
import type { Logger } from '../log.ts';
import {
  approvedDefinitions,
  findTool,
  getObject,
  listApproved,
  toolFingerprints,
  type AppDefinition,
  type FoundApp,
  type ToolGate,
} from '../store/upstream-tools.ts';
import { mayRead, usable } from './access.ts';
import type { UpstreamConnection } from './connection.ts';
import type { UpstreamConnections } from './connections.ts';
import { foundObject, recordFound, uiOf } from './found.ts';
import type { OfferedTool } from './offered.ts';

/** At most this many apps of one upstream are kept (each read at every discovery). */
export const APPS_PER_UPSTREAM = 50;
/** An app whose contents are larger than this is held: never served, and it cannot be approved. */
export const APP_MAX_BYTES = 2 * 1024 * 1024;
/** A base64 blob longer than this holds more than APP_MAX_BYTES: held as too large before it is looked at further. */
const BLOB_MAX_CHARS = 4 * Math.ceil(APP_MAX_BYTES / 3);
/** An app whose URI is longer than this is left out. */
const URI_MAX = 512;
/** A resource listing reads at most this many pages. */
const LIST_PAGES = 20;
const UI = 'ui://';
/** A lone surrogate: with the `u` flag a pair is one code point, so only an unpaired half matches (no backtracking). */
const LONE_SURROGATE = /\p{Cs}/u;

const hex = (bytes: Buffer | string) => createHash('sha256').update(bytes).digest('hex');

/** What an app's listing (or its approved definition) says of it besides its contents. */
interface Listed {
  readonly title?: string | undefined;
  readonly description?: string | undefined;
  readonly mimeType?: string | undefined;
  readonly ui?: Record<string, unknown> | undefined;
}

/** What an upstream served of an app in one `resources/read` answer. */
interface Served {
  /**
   * its one content as svc would serve it: the bytes hashed, as text (their UTF-8) or as a blob (their base64); null
   * when the answer is not one such content
   */
  readonly content: { readonly text: string } | { readonly blob: string } | null;
  /** the bytes hashed: of the text (UTF-8), of the blob (decoded), else of the answer's contents as JSON */
  readonly bytes: Buffer;
  readonly sha256: string;
  readonly size: number;
  readonly mimeType?: string;
  readonly ui?: Record<string, unknown>;
  /** why what was served holds the app (not well-formed, too large, not one content): none when nothing does */
  readonly problems: readonly string[];
}

/**
 * One `resources/read` answer as an app: its one text or base64 blob content (exactly one of them), hashed as its
 * bytes. Held: text with a lone surrogate (its UTF-8 would be U+FFFD's, another text than a host is given), a blob that
 * is not base64 as svc would send it (the standard alphabet, padded, nothing else: it decodes and encodes back to
 * itself), and contents over APP_MAX_BYTES (a blob too long for that is held before its base64 is checked).
 */
function servedOf(answer: Record<string, unknown>): Served {
  const list = Array.isArray(answer.contents) ? answer.contents : [];
  const one = list.length === 1 && isObject(list[0]) ? list[0] : null;
  const text = typeof one?.text === 'string' ? one.text : undefined;
  const blob = typeof one?.blob === 'string' ? one.blob : undefined;
  if (one === null || (text === undefined) === (blob === undefined)) {
    // Pinned as what it is (its JSON), so a change still shows; held, as svc serves one text or blob only.
    const json = Buffer.from(canonicalJson(answer.contents ?? null), 'utf8');
    const problems = ['it is not served as one text or base64 blob content'];
    return { content: null, bytes: json, sha256: hex(json), size: json.length, problems };
  }
  const problems: string[] = [];
  let bytes: Buffer;
  let content: Served['content'];
  if (text !== undefined) {
    bytes = Buffer.from(text, 'utf8');
    content = { text: bytes.toString('utf8') };
    if (LONE_SURROGATE.test(text)) problems.push('its text is not well-formed: it holds a lone surrogate, which no UTF-8 encodes');
  } else {
    bytes = Buffer.from(blob!, 'base64');
    content = { blob: bytes.toString('base64') };
    if (blob!.length > BLOB_MAX_CHARS)
      problems.push(`its blob is ${blob!.length} characters of base64, over ${APP_MAX_BYTES / 1024 / 1024} MiB of contents`);
    else if (content.blob !== blob) problems.push('its blob is not base64 (the standard alphabet, padded, nothing else)');
  }
  if (problems.length === 0 && bytes.length > APP_MAX_BYTES)
    problems.push(`its contents are ${bytes.length} bytes, over ${APP_MAX_BYTES / 1024 / 1024} MiB`);
  const ui = uiOf(one._meta);
  return {
    content,
    bytes,
    sha256: hex(bytes),
    size: bytes.length,
    ...(typeof one.mimeType === 'string' ? { mimeType: one.mimeType } : {}),
    ...(ui === undefined ? {} : { ui }),
    problems,
  };
}

/**
 * The app at `uri` as svc records it: its listing's title and description, the MIME type and `_meta.ui` of what was
 * served (else as listed), the SHA-256 and size of its contents, and whether they came as a base64 blob (a host
 * decodes a blob otherwise than text: the same bytes are another app); held by the rule of what a reader cannot see
 * (in every string of it), and by what was served.
 */
function appFound(uri: string, listed: Listed, served: Served): FoundApp {
  const mimeType = served.mimeType ?? listed.mimeType;
  const ui = served.ui ?? listed.ui;
  // Text says nothing: an app served as text has the fingerprint it had before svc kept how it was served.
  const encoding = served.content !== null && 'blob' in served.content ? { encoding: 'blob' as const } : {};
  const definition: AppDefinition = {
    ...(listed.title === undefined ? {} : { title: listed.title }),
    ...(listed.description === undefined ? {} : { description: listed.description }),
    ...(mimeType === undefined ? {} : { mimeType }),
    contents_sha256: served.sha256,
    ...encoding,
    ...(ui === undefined ? {} : { ui }),
    size: served.size,
  };
  const found = foundObject({ name: uri, ...definition }, definition, { contents_sha256: served.sha256, ...encoding, size: served.size });
  return served.problems.length === 0 ? found : { ...found, held: [...(found.held ?? []), ...served.problems] };
}

/** What a resource listing says of an app besides its URI. */
function listedOf(resource: Resource): Listed {
  return { title: resource.title, description: resource.description, mimeType: resource.mimeType, ui: uiOf(resource._meta) };
}

/**
 * The upstream's apps as listed: its `ui://` resources, each once (`twice`: it was listed more than once), at most
 * APPS_PER_UPSTREAM of them and LIST_PAGES pages, none with a URI over URI_MAX; and how many were left out.
 */
async function listApps(
  connection: UpstreamConnection,
): Promise<{ apps: Map<string, { resource: Resource; twice: boolean }>; leftOut: number }> {
  const apps = new Map<string, { resource: Resource; twice: boolean }>();
  let leftOut = 0;
  let cursor: string | undefined;
  for (let page = 0; page < LIST_PAGES; page++) {
    const listed = await connection.listResources(cursor);
    for (const resource of listed.resources) {
      if (!resource.uri.startsWith(UI)) continue;
      const known = apps.get(resource.uri);
      if (known) known.twice = true;
      else if (resource.uri.length > URI_MAX || apps.size >= APPS_PER_UPSTREAM) leftOut++;
      else apps.set(resource.uri, { resource, twice: false });
    }
    cursor = listed.nextCursor;
    if (cursor === undefined) break;
  }
  return { apps, leftOut };
}

/**
 * Discovery of an upstream's apps on its shared connection: each listed app read and recorded by its bytes. An app
 * whose read fails is in `keep` (its row stays as it is), logged; a listing that fails throws.
 */
export async function discoverApps(connection: UpstreamConnection, log: Logger): Promise<{ found: FoundApp[]; keep: Set<string> }> {
  const upstream = connection.upstream.name;
  const { apps, leftOut } = await listApps(connection);
  if (leftOut > 0) log.warn('upstream_apps_left_out', { upstream, left_out: leftOut, max_apps: APPS_PER_UPSTREAM });
  const found: FoundApp[] = [];
  const keep = new Set<string>();
  for (const [uri, { resource, twice }] of apps) {
    let answer: Record<string, unknown>;
    try {
      answer = await connection.send('resources/read', { uri }, null);
    } catch (e) {
      keep.add(uri);
      log.warn('upstream_app_unread', { upstream, uri: uri.slice(0, 200), error: e instanceof Error ? e.message.slice(0, 200) : 'failed' });
      continue;
    }
    const app = appFound(uri, listedOf(resource), servedOf(answer));
    found.push(twice ? { ...app, held: [...(app.held ?? []), 'the upstream lists this URI more than once'] } : app);
  }
  return { found, keep };
}

/** An approved app as a caller's read checks it: its row's gate, and the definition and fingerprint approved. */
export interface ApprovedApp {
  readonly gate: ToolGate;
  readonly fingerprint: string;
  readonly definition: AppDefinition;
}

const keyOf = (upstream: string, uri: string) => `${upstream}\n${uri}`;

/** What /mcp serves of the upstreams' apps: reads only as approved, listings, tools with their apps; an admin's preview. */
export class AppPins {
  constructor(
    private readonly config: Config,
    private readonly database: Database,
    private readonly connections: UpstreamConnections,
    private readonly log: Logger,
  ) {}

  /** The approved apps among `uris` of the upstream that this caller may read (its resources, and the app by its labels). */
  private async approvedOf(upstream: UpstreamConfig, uris: readonly string[], access: Access): Promise<Map<string, ApprovedApp>> {
    const answer = new Map<string, ApprovedApp>();
    if (uris.length === 0 || !mayRead(upstream, access)) return answer;
    const wanted = new Set(uris);
    const gates =
      uris.length === 1
        ? [await findTool(this.database.db, upstream.name, uris[0]!, 'app')]
        : (await listApproved(this.database.db, 'app')).filter((g) => g.upstream === upstream.name && wanted.has(g.name));
    const may = new Map(gates.filter((g): g is ToolGate => g !== null && usable(g, this.config, access)).map((g) => [g.name, g]));
    if (may.size === 0) return answer;
    for (const row of await approvedDefinitions(this.database.db, upstream.name, [...may.keys()], 'app')) {
      const gate = may.get(row.name)!;
      // Read apart from its gate: an approval between the two reads is not taken for the other's.
      if (row.approvedDefinition === null || row.approvedFingerprint === null || row.approvedFingerprint !== gate.approvedFingerprint)
        continue;
      answer.set(row.name, { gate, fingerprint: row.approvedFingerprint, definition: JSON.parse(row.approvedDefinition) as AppDefinition });
    }
    return answer;
  }

  /** The approved app at the upstream's `uri`, when this caller may read it; null otherwise. */
  async approved(upstream: UpstreamConfig, uri: string, access: Access): Promise<ApprovedApp | null> {
    return (await this.approvedOf(upstream, [uri], access)).get(uri) ?? null;
  }

  /**
   * A read of an approved app as svc serves it (at the `mapped` URI): the contents the upstream served when they are
   * exactly what was approved (their bytes, MIME type and `_meta.ui`), with the approved `_meta.ui` and nothing else
   * of the upstream's `_meta`. Anything else is null (the missing resource's answer), and the app is recorded as the
   * upstream now serves it: `changed`, until an admin approves it.
   */
  async served(
    upstream: UpstreamConfig,
    app: ApprovedApp,
    mapped: string,
    answer: Record<string, unknown>,
  ): Promise<ReadResourceResult | null> {
    const served = servedOf(answer);
    const found = appFound(app.gate.name, app.definition, served);
    const { mimeType, ui } = app.definition;
    if (found.fingerprint === app.fingerprint && found.held === null && served.content !== null)
      return {
        contents: [
          {
            uri: mapped,
            ...(mimeType === undefined ? {} : { mimeType }),
            ...served.content,
            ...(ui === undefined ? {} : { _meta: { ui } }),
          },
        ],
      } as ReadResourceResult;
    this.log.warn('upstream_app_changed', { upstream: upstream.name, uri: app.gate.name.slice(0, 200), sha256: served.sha256 });
    try {
      await this.database.write(async (tx) => {
        // This app alone: the upstream's other apps stay as they are.
        const others = new Set([...(await toolFingerprints(tx, upstream.name, 'app')).keys()].filter((n) => n !== found.name));
        // A read is no listing: review = auto approves nothing here.
        await recordFound(tx, upstream, 'app', [found], others, this.database.now(), false);
      });
    } catch (e) {
      this.log.warn('upstream_app_not_recorded', {
        upstream: upstream.name,
        error: e instanceof Error ? e.message.slice(0, 200) : 'failed',
      });
    }
    return null;
  }

  /**
   * One page of an upstream's resources as this caller sees them, mapped: an app only when it is approved and the
   * caller may read it, listed as approved (its upstream URI for a name; its title, description, MIME type and
   * `_meta.ui`), never as the upstream lists it now.
   */
  async listing(upstream: UpstreamConfig, resources: readonly Resource[], access: Access): Promise<Resource[]> {
    const uis = resources.filter((r) => r.uri.startsWith(UI)).map((r) => r.uri);
    const apps = await this.approvedOf(upstream, uis, access);
    return resources.flatMap((r) => {
      if (!r.uri.startsWith(UI)) return [mapResource(upstream.name, r)];
      const app = apps.get(r.uri);
      if (app === undefined) return [];
      apps.delete(r.uri);
      const { title, description, mimeType, ui } = app.definition;
      return [
        {
          uri: mapUri(upstream.name, r.uri),
          name: r.uri,
          ...(title === undefined ? {} : { title }),
          ...(description === undefined ? {} : { description }),
          ...(mimeType === undefined ? {} : { mimeType }),
          ...(ui === undefined ? {} : { _meta: { ui } }),
        },
      ];
    });
  }

  /**
   * The tools offered to this caller, each with its approved `_meta.ui` (its resourceUri mapped) while the app it
   * names is approved and the caller may read it; any other tool is offered without `_meta`.
   */
  async withApps(offered: ReadonlyMap<ToolGate, OfferedTool>, access: Access): Promise<OfferedTool[]> {
    const named = (o: OfferedTool) => (typeof o.ui?.resourceUri === 'string' && o.ui.resourceUri.startsWith(UI) ? o.ui.resourceUri : null);
    if (![...offered.values()].some((o) => named(o) !== null)) return [...offered.values()];
    const readable = new Map(this.config.upstreams.filter((u) => mayRead(u, access)).map((u) => [u.name, u]));
    const apps = new Set(
      (await listApproved(this.database.db, 'app'))
        .filter((g) => readable.has(g.upstream) && usable(g, this.config, access))
        .map((g) => keyOf(g.upstream, g.name)),
    );
    return [...offered].map(([gate, o]) => {
      const uri = named(o);
      if (uri === null || !apps.has(keyOf(gate.upstream, uri))) return o;
      const tool = mapToolMeta(gate.upstream, { ...o.tool, _meta: { ui: o.ui } }) as Tool;
      return { tool, bytes: Buffer.byteLength(JSON.stringify(tool)) };
    });
  }

  /**
   * An app's bytes for an admin's preview, read now on the upstream's shared connection: only when what it serves is
   * what `fingerprint` pins, and that is the row's definition as discovered or as approved; null otherwise (not
   * recorded, another fingerprint, other bytes now, held by what it serves, or the upstream cannot be read). Text is
   * its bytes as served; a blob is decoded as the MCP Apps reference host decodes it (atob: each byte a character),
   * given in UTF-8.
   */
  async preview(upstreamName: string, uri: string, fingerprint: string): Promise<{ bytes: Buffer; encoding: 'text' | 'blob' } | null> {
    const upstream = this.config.upstreams.find((u) => u.name === upstreamName);
    if (upstream === undefined || upstream.oauth !== null) return null;
    const row = await getObject(this.database.db, upstream.name, uri, 'app');
    const base = fingerprint === row.fingerprint ? row.definition : fingerprint === row.approvedFingerprint ? row.approvedDefinition : null;
    if (base === null) return null;
    let answer: Record<string, unknown>;
    try {
      answer = await this.connections.shared(upstream.name).send('resources/read', { uri }, null);
    } catch (e) {
      this.log.warn('upstream_app_preview_failed', {
        upstream: upstream.name,
        error: e instanceof Error ? e.message.slice(0, 200) : 'failed',
      });
      return null;
    }
    const served = servedOf(answer);
    // What nobody is served is not previewed either (a text with a lone surrogate would show as U+FFFD).
    if (served.content === null || served.problems.length > 0 || appFound(uri, base, served).fingerprint !== fingerprint) return null;
    // A blob as the MCP Apps reference host renders it: atob, each byte one character (U+0000–U+00FF), here in UTF-8.
    if ('blob' in served.content) return { bytes: Buffer.from(served.bytes.toString('latin1'), 'utf8'), encoding: 'blob' };
    return { bytes: served.bytes, encoding: 'text' };
  }
}

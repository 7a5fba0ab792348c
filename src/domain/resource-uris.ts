// An upstream's resource URIs as svc's one endpoint shows them (CONTRACT §6.3): the upstream `name`'s URI `U` is
// `name+U`, except an app's `ui://REST`, which keeps its scheme as `ui://name+REST` (clients render only `ui://`).
// Every URI svc passes from an upstream to a caller is mapped, so whatever an upstream points at is read back through
// svc, and only through svc; what a caller sends (resources/read, resources/subscribe, a completion's ref/resource)
// is unmapped to find the upstream. Templates map the same way, so mapTemplate and unmapTemplate are the same functions.
//
// The upstream's values are untrusted JSON: the functions below never throw on an odd shape and never mutate what
// they are given. They return new objects along the path to each URI they map and leave everything else as it was
// (shared, not copied); a value that is not where a URI belongs, or not a string there, passes as it is.

import { isObject } from './canonical-json.ts';

/** The rule of an upstream's name (config's UPSTREAM_NAME): it never holds a `+`, so the first `+` ends it. */
const NAME = /^[a-z][a-z0-9-]{0,31}$/;
const UI = 'ui://';

/** The URI under which svc shows the upstream's `uri`. */
export function mapUri(upstream: string, uri: string): string {
  return uri.startsWith(UI) ? `${UI}${upstream}+${uri.slice(UI.length)}` : `${upstream}+${uri}`;
}

/**
 * The upstream and its own URI that a URI svc showed stands for; null for any other (svc's own `svc://items/…`, a
 * bad name, nothing after the `+`). Only what mapUri gives back exactly is accepted, so `name+ui://x` (which mapUri
 * writes `ui://name+x`) is refused; an empty URI and a bare `ui://` map but never back.
 */
export function unmapUri(uri: string): { upstream: string; uri: string } | null {
  const ui = uri.startsWith(UI);
  const text = ui ? uri.slice(UI.length) : uri;
  const plus = text.indexOf('+');
  const upstream = text.slice(0, plus);
  const rest = text.slice(plus + 1);
  if (plus < 0 || rest === '' || !NAME.test(upstream)) return null;
  const own = ui ? `${UI}${rest}` : rest;
  return mapUri(upstream, own) === uri ? { upstream, uri: own } : null;
}

/** A resource template (RFC 6570) maps as a URI does: `demo://doc/{id}` → `name+demo://doc/{id}`. */
export const mapTemplate = mapUri;
export const unmapTemplate = unmapUri;

/** `value` with its string `key` mapped by `map`; anything else as it is. */
function withMapped<T>(value: T, key: string, map: (s: string) => string): T {
  if (!isObject(value) || typeof value[key] !== 'string') return value;
  return { ...value, [key]: map(value[key]) } as T;
}

/** `value` with its `key` replaced by `map` of it, when value is an object holding the key; else as it is. */
function withInner<T>(value: T, key: string, map: (inner: unknown) => unknown): T {
  if (!isObject(value) || !Object.hasOwn(value, key)) return value;
  const inner = value[key];
  const mapped = map(inner);
  return mapped === inner ? value : ({ ...value, [key]: mapped } as T);
}

const arrayOf = (list: unknown, map: (item: unknown) => unknown): unknown => (Array.isArray(list) ? list.map(map) : list);

/**
 * The URI of contents an upstream sends in a result (an embedded resource, a read's contents): `name+U` for every
 * scheme, `ui://` too. Such bytes were never reviewed, so they never pass under an app's URI (`ui://name+REST`, which
 * a host renders and may keep by its URI); the approved app is read by its own URI, through its pin.
 */
function dataUri(upstream: string, uri: string): string {
  return `${upstream}+${uri}`;
}

/** One content block: a `resource_link`'s `uri` (a pointer, read back through svc) and an embedded `resource`'s `resource.uri`. */
function mapBlock(upstream: string, block: unknown): unknown {
  if (!isObject(block)) return block;
  if (block.type === 'resource_link') return withMapped(block, 'uri', (uri) => mapUri(upstream, uri));
  if (block.type === 'resource') return withInner(block, 'resource', (r) => withMapped(r, 'uri', (uri) => dataUri(upstream, uri)));
  return block;
}

/** Content: a tool result's list of blocks, or a prompt message's single block. */
export function mapContent<T>(upstream: string, content: T): T {
  return (Array.isArray(content) ? content.map((b) => mapBlock(upstream, b)) : mapBlock(upstream, content)) as T;
}

/** A tool result (`tools/call`): the URIs in its `content`; `structuredContent` is the tool's own data. */
export function mapToolResult<T>(upstream: string, result: T): T {
  return withInner(result, 'content', (c) => mapContent(upstream, c));
}

/** A `resources/read` result (not an app's, which is served by its pin): each of its `contents[].uri`, as data. */
export function mapReadResult<T>(upstream: string, result: T): T {
  return withInner(result, 'contents', (list) => arrayOf(list, (c) => withMapped(c, 'uri', (u) => dataUri(upstream, u))));
}

/** A `prompts/get` result: the content of each of its `messages`. */
export function mapPromptResult<T>(upstream: string, result: T): T {
  return withInner(result, 'messages', (list) => arrayOf(list, (m) => withInner(m, 'content', (c) => mapContent(upstream, c))));
}

/**
 * A tool definition's app: `_meta.ui.resourceUri` (MCP Apps), and the older flat `_meta["ui/resourceUri"]`, which
 * hosts still read when the first is absent (ext-apps' getToolUiResourceUri).
 */
export function mapToolMeta<T>(upstream: string, tool: T): T {
  const map = (uri: string) => mapUri(upstream, uri);
  return withInner(tool, '_meta', (meta) =>
    withMapped(
      withInner(meta, 'ui', (ui) => withMapped(ui, 'resourceUri', map)),
      'ui/resourceUri',
      map,
    ),
  );
}

/** A `resources/list` entry: its `uri`. */
export function mapResource<T>(upstream: string, resource: T): T {
  return withMapped(resource, 'uri', (u) => mapUri(upstream, u));
}

/** A `resources/templates/list` entry: its `uriTemplate`. */
export function mapResourceTemplate<T>(upstream: string, template: T): T {
  return withMapped(template, 'uriTemplate', (u) => mapTemplate(upstream, u));
}

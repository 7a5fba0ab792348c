// One object an upstream offers as svc records it (CONTRACT §6.1, §6.3): its definition, the fingerprint of that
// definition's canonical JSON and why it is held, and the recording of what discovery found of one kind, each change
// of state audited (actor: the upstream). Shared by discovery.ts (tools, prompts) and apps.ts (apps).
import type { UpstreamConfig } from '../config/load.ts';
import type { Tx } from '../db/open.ts';
import { canonicalJson, isObject, nestingDepth, sha256 } from '../domain/canonical-json.ts';
import { DEFINITION_MAX_BYTES, DEFINITION_MAX_DEPTH, heldReasons } from '../domain/definition-text.ts';
import { recordAudit } from '../store/audit.ts';
import {
  firstListing,
  recordDiscovery,
  type DiscoveryChange,
  type Found,
  type ReviewedDefinition,
  type ReviewedKind,
} from '../store/upstream-tools.ts';

/**
 * One listed object as svc records it: its definition, the fingerprint of that definition's canonical JSON, and why
 * it is held, if it is (definition-text.ts: the rule applied here, once, to everything the upstream listed of it,
 * `listed`). A definition too large or too deep is held and kept as `notKept` (its fingerprint still tells when it
 * changes). For a tool, a prompt, and (named by its URI) an app.
 */
export function foundObject<D extends ReviewedDefinition>(listed: { readonly name: string }, definition: D, notKept: D): Found<D> {
  const canonical = canonicalJson(definition);
  const size = { bytes: Buffer.byteLength(canonical), depth: nestingDepth(definition, DEFINITION_MAX_DEPTH) };
  const held = heldReasons(listed, size);
  const kept = size.bytes > DEFINITION_MAX_BYTES || size.depth > DEFINITION_MAX_DEPTH ? notKept : definition;
  return { name: listed.name, definition: kept, fingerprint: sha256(canonical), held: held.length === 0 ? null : held };
}

/**
 * Records what discovery found of one kind of one upstream (`keep`: names whose row stays as it is; `auto`: what is
 * new is approved as found, as review = auto does in a server's first listing), each change audited.
 */
export async function recordFound(
  tx: Tx,
  upstream: UpstreamConfig,
  kind: ReviewedKind,
  found: readonly Found[],
  keep: ReadonlySet<string>,
  now: number,
  auto: boolean,
): Promise<DiscoveryChange[]> {
  const changes = await recordDiscovery(tx, upstream.name, upstream.server, found, auto, now, keep, kind);
  for (const c of changes) {
    await recordAudit(
      tx,
      { actor: null, via: 'upstream', action: `${c.kind}.${c.to}`, target: `${upstream.name}/${c.name}`, detail: { from: c.from } },
      now,
    );
  }
  return changes;
}

/** Whether review = auto approves what this run lists of the upstream: only in its server's first successful listing. */
export async function approvesAsFound(tx: Tx, upstream: UpstreamConfig): Promise<boolean> {
  return upstream.review === 'auto' && (await firstListing(tx, upstream.name, upstream.server));
}

/** A plain object, not an array. */

/**
 * What svc keeps of an upstream's `_meta` (of a tool, or an app's resource): its `ui`, when it is an object (an MCP
 * App's CSP, permissions, domain, a tool's resourceUri), and nothing else of it.
 */
export function uiOf(meta: unknown): Record<string, unknown> | undefined {
  return isObject(meta) && isObject(meta.ui) ? meta.ui : undefined;
}

// What administrators do to what svc reviews of its upstreams (CONTRACT §6.1, §6.3): tools, prompts and apps alike,
// for the page, the JSON API and the CLI: approve (pinning the definition agents are told), label, disable. Each
// change with its audit row (`tool.approve`, `prompt.label`, `app.disable`…), target `UPSTREAM/NAME`.
import type { Database } from '../db/open.ts';
import { AppError } from '../domain/errors.ts';
import type { LabelSet } from '../domain/labels.ts';
import { recordActorAudit as audit, type Actor } from '../store/audit.ts';
import { approveTool, disableTool, getObject, labelTool, type ReviewedKind, type UpstreamObject } from '../store/upstream-tools.ts';
import type { ToolChange } from '../requests/tools.ts';
import type { Tx } from '../db/open.ts';
import { definitionSize, escapeHidden, heldReasons } from '../domain/definition-text.ts';

const target = (object: UpstreamObject) => `${object.upstream}/${object.name}`;

/** Approves the object as it is described now: its current definition and fingerprint become what agents see. */
async function approveIn(tx: Tx, database: Database, actor: Actor, object: UpstreamObject, reviewed: string | undefined): Promise<void> {
  const { kind, name } = object;
  if (object.state === 'gone')
    throw new AppError('conflict', `the upstream no longer offers the ${kind} "${escapeHidden(name)}"; nothing to approve`);
  // What is held cannot be approved as it is: the upstream must describe it otherwise first. The stored reasons are
  // checked again against the definition itself, for a row recorded before svc held any.
  const held = object.held ?? heldReasons({ name, ...object.definition }, definitionSize(object.definition));
  if (held.length > 0)
    throw new AppError('conflict', `"${escapeHidden(name)}" is held and cannot be approved as it is: ${held.join('; ')}`);
  // What is pinned is what the admin saw: a definition that changed since is reviewed again.
  if (reviewed !== undefined && reviewed !== object.fingerprint)
    throw new AppError(
      'conflict',
      `the upstream changed "${escapeHidden(name)}" since you looked at it; review the new definition and approve again`,
    );
  await approveTool(tx, object, database.now());
  await audit(tx, actor, `${kind}.approve`, target(object), { from: object.state, fingerprint: object.fingerprint });
}

async function disableIn(tx: Tx, database: Database, actor: Actor, object: UpstreamObject): Promise<void> {
  await disableTool(tx, object, database.now());
  await audit(tx, actor, `${object.kind}.disable`, target(object), { from: object.state });
}

async function labelIn(tx: Tx, database: Database, actor: Actor, object: UpstreamObject, labels: LabelSet | null): Promise<void> {
  await labelTool(tx, object, labels, database.now());
  await audit(tx, actor, `${object.kind}.label`, target(object), { labels: labels ?? 'inherit' });
}

/** One object named by its upstream, kind and name (an app's name is its upstream `ui://` URI). */
export interface ObjectRef<K extends ReviewedKind = ReviewedKind> {
  readonly upstream: string;
  readonly kind: K;
  readonly name: string;
}

/** Labels and state changed together (the JSON API's PATCH), each audited; all or nothing. */
export function changeObjectAs<K extends ReviewedKind>(
  database: Database,
  actor: Actor,
  ref: ObjectRef<K>,
  change: ToolChange,
): Promise<UpstreamObject<K>> {
  return database.write(async (tx) => {
    const object = await getObject(tx, ref.upstream, ref.name, ref.kind);
    if (change.labels !== undefined) await labelIn(tx, database, actor, object, change.labels);
    if (change.state === 'approved') await approveIn(tx, database, actor, object, change.fingerprint);
    if (change.state === 'disabled') await disableIn(tx, database, actor, object);
    return getObject(tx, ref.upstream, ref.name, ref.kind);
  });
}

/** Approves the object; with `fingerprint`, only if its definition is still the one reviewed. */
export const approveObjectAs = <K extends ReviewedKind>(database: Database, actor: Actor, ref: ObjectRef<K>, fingerprint?: string) =>
  changeObjectAs(database, actor, ref, fingerprint === undefined ? { state: 'approved' } : { state: 'approved', fingerprint });
export const disableObjectAs = <K extends ReviewedKind>(database: Database, actor: Actor, ref: ObjectRef<K>) =>
  changeObjectAs(database, actor, ref, { state: 'disabled' });
/** Gives the object its own labels, or (null) returns it to its upstream's. */
export const labelObjectAs = <K extends ReviewedKind>(database: Database, actor: Actor, ref: ObjectRef<K>, labels: LabelSet | null) =>
  changeObjectAs(database, actor, ref, { labels });

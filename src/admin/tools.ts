// What administrators do to upstream tools (CONTRACT §6.1), for the CLI (and next the page and the JSON API):
// approve (pinning the definition agents are told), label, disable. Each change with its audit row.
import type { Database } from '../db/open.ts';
import { AppError } from '../domain/errors.ts';
import type { LabelSet } from '../domain/labels.ts';
import { recordActorAudit as audit, type Actor } from '../store/audit.ts';
import { approveTool, disableTool, getTool, labelTool, type UpstreamTool } from '../store/upstream-tools.ts';
import type { ToolChange } from '../requests/tools.ts';
import type { Tx } from '../db/open.ts';
import { definitionSize, escapeHidden, heldReasons } from '../domain/definition-text.ts';

const target = (tool: UpstreamTool) => `${tool.upstream}/${tool.name}`;

/** Approves the tool as it is described now: its current definition and fingerprint become what agents see. */
async function approveIn(tx: Tx, database: Database, actor: Actor, tool: UpstreamTool, reviewed: string | undefined): Promise<void> {
  if (tool.state === 'gone') throw new AppError('conflict', `the upstream no longer offers "${tool.name}"; nothing to approve`);
  // What is held cannot be approved as it is: the upstream must describe the tool otherwise first. The stored reasons
  // are checked again against the definition itself, for a row recorded before svc held any.
  const held = tool.held ?? heldReasons({ name: tool.name, ...tool.definition }, definitionSize(tool.definition));
  if (held.length > 0)
    throw new AppError('conflict', `"${escapeHidden(tool.name)}" is held and cannot be approved as it is: ${held.join('; ')}`);
  // What is pinned is what the admin saw: a definition that changed since is reviewed again.
  if (reviewed !== undefined && reviewed !== tool.fingerprint)
    throw new AppError(
      'conflict',
      `the upstream changed "${tool.name}" since you looked at it; review the new definition and approve again`,
    );
  await approveTool(tx, tool, database.now());
  await audit(tx, actor, 'tool.approve', target(tool), { from: tool.state, fingerprint: tool.fingerprint });
}

async function disableIn(tx: Tx, database: Database, actor: Actor, tool: UpstreamTool): Promise<void> {
  await disableTool(tx, tool, database.now());
  await audit(tx, actor, 'tool.disable', target(tool), { from: tool.state });
}

async function labelIn(tx: Tx, database: Database, actor: Actor, tool: UpstreamTool, labels: LabelSet | null): Promise<void> {
  await labelTool(tx, tool, labels, database.now());
  await audit(tx, actor, 'tool.label', target(tool), { labels: labels ?? 'inherit' });
}

/** Labels and state changed together (the JSON API's PATCH), each audited; all or nothing. */
export function changeToolAs(database: Database, actor: Actor, upstream: string, name: string, change: ToolChange): Promise<UpstreamTool> {
  return database.write(async (tx) => {
    const tool = await getTool(tx, upstream, name);
    if (change.labels !== undefined) await labelIn(tx, database, actor, tool, change.labels);
    if (change.state === 'approved') await approveIn(tx, database, actor, tool, change.fingerprint);
    if (change.state === 'disabled') await disableIn(tx, database, actor, tool);
    return getTool(tx, upstream, name);
  });
}

/** Approves the tool; with `fingerprint`, only if its definition is still the one reviewed. */
export const approveToolAs = (database: Database, actor: Actor, upstream: string, name: string, fingerprint?: string) =>
  changeToolAs(database, actor, upstream, name, fingerprint === undefined ? { state: 'approved' } : { state: 'approved', fingerprint });
export const disableToolAs = (database: Database, actor: Actor, upstream: string, name: string) =>
  changeToolAs(database, actor, upstream, name, { state: 'disabled' });
/** Gives the tool its own labels, or (null) returns it to its upstream's. */
export const labelToolAs = (database: Database, actor: Actor, upstream: string, name: string, labels: LabelSet | null) =>
  changeToolAs(database, actor, upstream, name, { labels });

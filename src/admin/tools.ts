// What administrators do to upstream tools (CONTRACT §6.1), for the CLI (and next the page and the JSON API):
// approve (pinning the definition agents are told), label, disable. Each change with its audit row.
import type { Database } from '../db/open.ts';
import { AppError } from '../domain/errors.ts';
import type { LabelSet } from '../domain/labels.ts';
import { recordActorAudit as audit, type Actor } from '../store/audit.ts';
import { approveTool, disableTool, getTool, labelTool, type UpstreamTool } from '../store/upstream-tools.ts';

const target = (tool: UpstreamTool) => `${tool.upstream}/${tool.name}`;

/** Approves the tool as it is described now: its current definition and fingerprint become what agents see. */
export function approveToolAs(database: Database, actor: Actor, upstream: string, name: string): Promise<UpstreamTool> {
  return database.write(async (tx) => {
    const tool = await getTool(tx, upstream, name);
    if (tool.state === 'gone') throw new AppError('conflict', `the upstream no longer offers "${name}"; nothing to approve`);
    await approveTool(tx, tool, database.now());
    await audit(tx, actor, 'tool.approve', target(tool), { from: tool.state, fingerprint: tool.fingerprint });
    return getTool(tx, upstream, name);
  });
}

export function disableToolAs(database: Database, actor: Actor, upstream: string, name: string): Promise<UpstreamTool> {
  return database.write(async (tx) => {
    const tool = await getTool(tx, upstream, name);
    await disableTool(tx, tool, database.now());
    await audit(tx, actor, 'tool.disable', target(tool), { from: tool.state });
    return getTool(tx, upstream, name);
  });
}

/** Gives the tool its own labels, or (null) returns it to its upstream's. */
export function labelToolAs(
  database: Database,
  actor: Actor,
  upstream: string,
  name: string,
  labels: LabelSet | null,
): Promise<UpstreamTool> {
  return database.write(async (tx) => {
    const tool = await getTool(tx, upstream, name);
    await labelTool(tx, tool, labels, database.now());
    await audit(tx, actor, 'tool.label', target(tool), { labels: labels ?? 'inherit' });
    return getTool(tx, upstream, name);
  });
}

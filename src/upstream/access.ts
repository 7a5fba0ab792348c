// Who may use an upstream tool, prompt or app: the one access rule of svc (domain/visibility.ts), as for items. One
// is usable when it is approved, not held (domain/definition-text.ts), its upstream is configured (and, for a tool,
// its `tools` list, if any, names it), it was recorded from the server configured now, and its labels (its own, or
// its upstream's) are visible to the caller, narrowed by a token's restriction.
import type { Config, UpstreamConfig } from '../config/load.ts';
import type { LabelSet } from '../domain/labels.ts';
import { visible, type Access } from '../domain/visibility.ts';
import type { ToolGate } from '../store/upstream-tools.ts';

/** The labels that decide who may use the tool: its own, else its upstream's (null when the upstream is not configured). */
export function toolLabels(tool: Pick<ToolGate, 'upstream' | 'labels'>, upstreams: readonly UpstreamConfig[]): LabelSet | null {
  if (tool.labels !== null) return tool.labels;
  return upstreams.find((u) => u.name === tool.upstream)?.labels ?? null;
}

export function usable(tool: ToolGate, config: Config, access: Access): boolean {
  // A tool whose definition as listed now is held (hidden characters, a name listed twice…) is offered to nobody.
  if (tool.state !== 'approved' || tool.approvedFingerprint === null || tool.held !== null) return false;
  const upstream = config.upstreams.find((u) => u.name === tool.upstream);
  // Not configured any more, a tool left out of its `tools` list since it was recorded (the list names tools only,
  // not prompts or apps), or recorded from another server (its url or command changed since) and not listed by this
  // one yet.
  if (!upstream || (tool.kind === 'tool' && upstream.tools !== null && !upstream.tools.includes(tool.name))) return false;
  // Nor one of a kind its upstream no longer passes through (`expose`: an app is a resource).
  if (!exposes(upstream, tool.kind)) return false;
  if (tool.server !== upstream.server) return false;
  const labels = toolLabels(tool, config.upstreams);
  return labels !== null && visible(labels, access.labels, access.restriction);
}

/** Who may connect their account to an `auth = oauth` upstream, and use it: whoever may see the upstream's labels. */
export function mayConnect(upstream: UpstreamConfig, access: Access): boolean {
  return visible(upstream.labels, access.labels, access.restriction);
}

/** Whether the upstream passes a kind of object through svc (`expose`). */
function exposes(upstream: UpstreamConfig, kind: 'tool' | 'prompt' | 'app'): boolean {
  return kind === 'tool' ? upstream.expose.tools : kind === 'prompt' ? upstream.expose.prompts : upstream.expose.resources;
}

/**
 * Who may read an upstream's resources (CONTRACT §6.3): its data, like its tool results, so whoever may see the
 * upstream's own `labels` (narrowed by a token's restriction), while it passes resources through.
 */
export function mayRead(upstream: UpstreamConfig, access: Access): boolean {
  return upstream.expose.resources && visible(upstream.labels, access.labels, access.restriction);
}

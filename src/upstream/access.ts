// Who may use an upstream tool: the one access rule of svc (domain/visibility.ts), as for items. A tool is usable
// when it is approved, not held (domain/definition-text.ts), its upstream is configured (and its `tools` list, if any, names it), it was recorded from the
// server configured now, and its labels (its own, or its upstream's) are visible to the caller, narrowed by a token's
// restriction.
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
  // Not configured any more, left out of its `tools` list since it was recorded, or recorded from another server
  // (its url or command changed since) and not listed by this one yet.
  if (!upstream || (upstream.tools !== null && !upstream.tools.includes(tool.name))) return false;
  if (tool.server !== upstream.server) return false;
  const labels = toolLabels(tool, config.upstreams);
  return labels !== null && visible(labels, access.labels, access.restriction);
}

/** Who may connect their account to an `auth = oauth` upstream, and use it: whoever may see the upstream's labels. */
export function mayConnect(upstream: UpstreamConfig, access: Access): boolean {
  return visible(upstream.labels, access.labels, access.restriction);
}

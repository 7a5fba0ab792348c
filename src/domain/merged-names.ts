// The names under which /mcp offers what an upstream has (CONTRACT §6.1): a tool `tool` of the upstream `name` is
// `name__tool`. Pure, so the pages and the command line can say whether a tool can be offered without loading the
// MCP layer.

/** What MCP clients accept as a tool name, no longer than 128. */
const MERGED_NAME = /^[A-Za-z0-9_.-]{1,128}$/;
/** Between the upstream's name and the tool's. Upstream names never hold an underscore, so the first one splits. */
export const SEPARATOR = '__';

/** An upstream's object under its own name. */
export interface UpstreamName {
  readonly upstream: string;
  readonly name: string;
}

/** The merged name of an upstream's tool. */
export const mergedName = (tool: UpstreamName): string => `${tool.upstream}${SEPARATOR}${tool.name}`;

/** Whether the tool's merged name is one a client accepts: otherwise it is not offered. */
export const offerable = (tool: UpstreamName): boolean => MERGED_NAME.test(mergedName(tool));

/** The upstream and tool a merged name stands for; null for a name that is no merged name (svc's own, say). */
export function splitMerged(merged: string): UpstreamName | null {
  const at = merged.indexOf(SEPARATOR);
  if (at <= 0 || !MERGED_NAME.test(merged)) return null;
  return { upstream: merged.slice(0, at), name: merged.slice(at + SEPARATOR.length) };
}

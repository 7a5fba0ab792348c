// The MCP methods svc knows by name, in either protocol era: what its metrics count by method and its spans are named
// by. Any other method a client sends is counted and named as one word (`other`, `unknown`), so no caller can add a
// metric series or a span name of its own.
export const MCP_METHODS: ReadonlySet<string> = new Set([
  'initialize',
  'ping',
  'tools/list',
  'tools/call',
  'resources/list',
  'resources/templates/list',
  'resources/read',
  'resources/subscribe',
  'resources/unsubscribe',
  'prompts/list',
  'prompts/get',
  'completion/complete',
  'logging/setLevel',
  'server/discover',
  'subscriptions/listen',
  'notifications/initialized',
  'notifications/cancelled',
  'notifications/progress',
  'notifications/roots/list_changed',
]);

/** A tool's or prompt's name longer than this is not put in a span's name (its attribute holds it, cut to 512). */
const NAMED_TARGET_MAX = 64;

/**
 * What one MCP request is about, as its span says it by the MCP semantic conventions, whether svc answers it or sends
 * it to an upstream: the span's name (`{method} {tool or prompt}`, low in cardinality and short: a method svc knows,
 * else `unknown`, and the tool or prompt only when its name is short) and the attributes naming the tool, prompt or
 * resource. `target` is the request's tool or prompt name, or its resource's URI.
 */
export function mcpSpanTarget(
  method: string,
  target: string | undefined,
): { name: string; attributes: Record<string, string | undefined> } {
  const tool = method === 'tools/call' ? target : undefined;
  const prompt = method === 'prompts/get' ? target : undefined;
  const named = MCP_METHODS.has(method) ? method : 'unknown';
  const shown = tool ?? prompt;
  return {
    name: shown === undefined || shown.length > NAMED_TARGET_MAX ? named : `${named} ${shown}`,
    attributes: {
      'mcp.method.name': method,
      'gen_ai.operation.name': tool === undefined ? undefined : 'execute_tool',
      'gen_ai.tool.name': tool,
      'gen_ai.prompt.name': prompt,
      'mcp.resource.uri': method.startsWith('resources/') ? target : undefined,
    },
  };
}

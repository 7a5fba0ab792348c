// Each MCP request a server span by the MCP semantic conventions (CONTRACT §8): `{method} {tool or prompt}`, its
// method, protocol revision, session, JSON-RPC id and target, continuing the trace context of its `params._meta`
// (linked to the HTTP request's span) or else the HTTP request's. The handlers of methods.ts make theirs as they
// answer; the endpoint (server.ts) makes one for what the SDK answers itself (initialize, ping, a listen). Never an
// argument, a result or a document's text.
import { PROTOCOL_VERSION_META_KEY } from '@modelcontextprotocol/server';
import { isObject } from '../domain/canonical-json.ts';
import { mcpSpanTarget } from '../domain/mcp-methods.ts';
import { inSpan, NO_SPAN, tracing, type Span } from '../trace/spans.ts';

/** Who is calling, as the span tells it: the era, the revision a 2025 request named in its header, the session. */
export interface SpanCall {
  readonly era: 'legacy' | 'modern';
  /** a 2025 request's MCP-Protocol-Version header */
  readonly protocolVersion?: string;
  /** a 2025 request's session id */
  readonly session?: string;
}

const text = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);

/** The attributes and parent of one MCP request's span. */
export function mcpSpan<T>(
  method: string,
  params: Record<string, unknown> | undefined,
  id: unknown,
  call: SpanCall,
  fn: (span: Span) => Promise<T>,
): Promise<T> {
  if (!tracing()) return fn(NO_SPAN);
  const p = params ?? {};
  const meta = isObject(p._meta) ? p._meta : null;
  const version =
    method === 'initialize'
      ? text(p.protocolVersion)
      : call.era === 'modern'
        ? text(meta?.[PROTOCOL_VERSION_META_KEY])
        : call.protocolVersion;
  const target = mcpSpanTarget(method, method.startsWith('resources/') ? text(p.uri) : text(p.name));
  return inSpan(
    target.name,
    {
      kind: 'server',
      parent: meta,
      attributes: {
        ...target.attributes,
        'mcp.protocol.version': version,
        'mcp.session.id': call.session,
        'jsonrpc.request.id': typeof id === 'string' || typeof id === 'number' ? String(id) : undefined,
        'network.transport': 'tcp',
        'network.protocol.name': 'http',
      },
    },
    fn,
  );
}

/** Marks an MCP span failed with a JSON-RPC error's code (CONTRACT §8: the fault class, never the message). */
export function failedWith(span: Span, code: number): void {
  span.set('rpc.response.status_code', String(code));
  span.fail(String(code));
}

// JSON-RPC batches on /mcp. MCP allowed them in one protocol revision only: 2025-03-26 added them and 2025-06-18
// removed them (2024-11-05 never had them). The SDK's transport still accepts up to 100 messages in one body for
// any version, all run at once, so one request could cost a hundred calls. svc takes a batch only from a client
// that negotiated 2025-03-26 (or sent no MCP-Protocol-Version header, which the transport specification says to
// read as 2025-03-26), and at most MAX_BATCH messages, each checked as if it had come alone.

/** The only protocol revision whose messages may be batched. */
export const BATCH_PROTOCOL_VERSION = '2025-03-26';
/** At most this many messages in one batch: ten calls' work for one request. */
export const MAX_BATCH = 10;

/** Why this body is refused, or null when it is a single message or a batch svc takes. */
export function batchRefusal(body: unknown, protocolVersion: string | undefined): string | null {
  if (!Array.isArray(body)) return null;
  const initialize = body.find(
    (m): m is { params: { protocolVersion: unknown } } =>
      m !== null &&
      typeof m === 'object' &&
      (m as { method?: unknown }).method === 'initialize' &&
      typeof (m as { params?: unknown }).params === 'object',
  );
  const version =
    protocolVersion ??
    (typeof initialize?.params?.protocolVersion === 'string' ? initialize.params.protocolVersion : BATCH_PROTOCOL_VERSION);
  if (version !== BATCH_PROTOCOL_VERSION) {
    return `Invalid Request: JSON-RPC batches are not part of MCP protocol version ${version.slice(0, 32)}; send one message per request`;
  }
  if (body.length === 0) return 'Invalid Request: an empty batch';
  if (body.length > MAX_BATCH) return `Invalid Request: a batch holds at most ${MAX_BATCH} messages; send the rest in further requests`;
  // The transport answers a body once every id it holds has an answer, so a repeated id would end the request
  // while a call under that id still runs, and a cancel of one of the batch's own calls would leave it unanswered.
  const ids = new Set<string>();
  for (const m of body) {
    if (m === null || typeof m !== 'object' || !('id' in m) || !('method' in m)) continue;
    const id = JSON.stringify((m as { id: unknown }).id);
    if (ids.has(id)) return `Invalid Request: the id ${id.slice(0, 40)} is used twice in this batch; give each request its own id`;
    ids.add(id);
  }
  for (const m of body) {
    const { method, params } = (m ?? {}) as { method?: unknown; params?: { requestId?: unknown } };
    if (method === 'notifications/cancelled' && ids.has(JSON.stringify(params?.requestId)))
      return 'Invalid Request: a batch cannot cancel one of its own requests; send the cancellation in a request of its own';
  }
  return null;
}

/** Whether the body (one message or a batch) holds an `initialize`: the request that opens a session. */
export function opensSession(body: unknown): boolean {
  const messages = Array.isArray(body) ? body : [body];
  return messages.some((m) => m !== null && typeof m === 'object' && (m as { method?: unknown }).method === 'initialize');
}

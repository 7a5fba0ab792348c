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
  return null;
}

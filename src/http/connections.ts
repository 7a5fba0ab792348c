// Connections as a resource clients share: no one address may hold more than its share of the connection limit,
// and a request whose body stops arriving is cut, so slow or greedy clients from one address never stop others.
// Node's own timeouts cut a request whose headers are not complete in time and an idle keep-alive connection.
import type { Server, IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { clientAddress, normalizeIp } from '../domain/addresses.ts';
import type { Logger } from '../log.ts';

export interface ShareLimits {
  /** connections (direct) plus requests in flight (through a trusted proxy) one client address may hold */
  readonly perAddress: number;
  /** a request body that brings no byte for this long is cut */
  readonly bodyIdleMs: number;
  /** how often stalled bodies are looked for */
  readonly checkEveryMs: number;
}

export interface ConnectionShare {
  /**
   * For a request that came through a trusted proxy: holds a place for the client it forwards, released when the
   * response ends; false when that client already holds its share (the request is to be refused).
   */
  admitForwarded(incoming: IncomingMessage, outgoing: ServerResponse): boolean;
  stop(): void;
}

interface Watched {
  readonly request: IncomingMessage;
  readonly socket: Socket;
  bytesRead: number;
  lastProgress: number;
}

export function shareConnections(
  server: Server,
  limits: ShareLimits,
  trustedProxy: (address: string) => boolean,
  log: Logger,
): ConnectionShare {
  const held = new Map<string, number>();
  const take = (address: string): boolean => {
    const n = held.get(address) ?? 0;
    if (n >= limits.perAddress) return false;
    held.set(address, n + 1);
    return true;
  };
  const release = (address: string) => {
    const n = (held.get(address) ?? 1) - 1;
    if (n <= 0) held.delete(address);
    else held.set(address, n);
  };

  // One line per address that reaches its share, at most every ten seconds, so a flood cannot flood the log too.
  let lastWarned = 0;
  let refusedSince = 0;
  const refused = (address: string, forwarded: boolean) => {
    refusedSince++;
    const now = Date.now();
    if (now - lastWarned < 10_000) return;
    log.warn('connection_share_exceeded', { peer: address, forwarded, per_address: limits.perAddress, refused: refusedSince });
    lastWarned = now;
    refusedSince = 0;
  };

  // A trusted proxy carries many clients on its connections: they are counted by the address it forwards, per
  // request, never as the proxy's own.
  server.on('connection', (socket: Socket) => {
    const address = normalizeIp(socket.remoteAddress ?? '');
    if (trustedProxy(address)) return;
    if (!take(address)) {
      refused(address, false);
      socket.destroy();
      return;
    }
    socket.once('close', () => release(address));
  });

  const watched = new Set<Watched>();
  server.on('request', (request: IncomingMessage) => {
    if (request.complete) return;
    watched.add({ request, socket: request.socket, bytesRead: request.socket.bytesRead, lastProgress: Date.now() });
  });
  const sweep = setInterval(() => {
    const now = Date.now();
    for (const w of watched) {
      if (w.request.complete || w.socket.destroyed) {
        watched.delete(w);
      } else if (w.socket.bytesRead !== w.bytesRead || w.request.readableLength >= w.request.readableHighWaterMark) {
        // Bytes arrived, or svc has not read what it holds yet (then the wait is ours, not the client's).
        w.bytesRead = w.socket.bytesRead;
        w.lastProgress = now;
      } else if (now - w.lastProgress >= limits.bodyIdleMs) {
        watched.delete(w);
        log.info('request_body_stalled', { peer: normalizeIp(w.socket.remoteAddress ?? ''), idle_ms: now - w.lastProgress });
        w.socket.destroy();
      }
    }
  }, limits.checkEveryMs);
  sweep.unref();

  return {
    admitForwarded(incoming, outgoing) {
      const peer = incoming.socket.remoteAddress ?? '';
      if (!trustedProxy(peer)) return true;
      const forwarded = incoming.headers['x-forwarded-for'];
      const client = clientAddress(peer, typeof forwarded === 'string' ? forwarded : (forwarded?.join(',') ?? null), trustedProxy);
      // Requests the proxy makes for itself (no client named) are not anyone's share.
      if (trustedProxy(client)) return true;
      if (!take(client)) {
        refused(client, true);
        return false;
      }
      outgoing.once('close', () => release(client));
      return true;
    },
    stop() {
      clearInterval(sweep);
      watched.clear();
    },
  };
}

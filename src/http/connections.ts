// Connections as a resource clients share: no one client address may hold more than its share of the connection
// limit, connections still waiting for a request (its headers or its body) may hold at most half of it, and a request
// whose body stops arriving is cut, so slow or greedy clients, from one address or from many, never stop others.
// Node's own timeouts cut a request whose headers are not complete in time and an idle keep-alive connection.
import type { Server, IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { clientAddress, limitAddress, normalizeIp } from '../domain/addresses.ts';
import type { Logger } from '../log.ts';

export interface ShareLimits {
  /** connections at once, of every peer; past it a waiting connection is cut for a new one, else the new one is */
  readonly maxConnections: number;
  /** connections (direct) plus requests in flight (through a trusted proxy) one client address may hold */
  readonly perAddress: number;
  /**
   * direct connections that may wait at once for a request to arrive in full (headers, body, or the next request
   * on a kept-alive connection); past it, the oldest waiting connection of the address that holds the most is cut
   */
  readonly maxWaiting: number;
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

/** Whether a request comes with a body (a length above zero, or a chunked one), by its headers. */
function hasBody(request: IncomingMessage): boolean {
  const length = request.headers['content-length'];
  return request.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

interface Watched {
  readonly request: IncomingMessage;
  readonly socket: Socket;
  bytesRead: number;
  lastProgress: number;
}

/**
 * Direct connections waiting for a request, by limit address, oldest first: what a slow client holds without
 * having asked for anything yet. Sets keep insertion order, so the first of a set is its oldest.
 */
class Waiting {
  private readonly byAddress = new Map<string, Set<Socket>>();
  private size = 0;

  add(address: string, socket: Socket): void {
    let set = this.byAddress.get(address);
    if (!set) {
      set = new Set();
      this.byAddress.set(address, set);
    }
    if (set.has(socket)) return;
    set.add(socket);
    this.size++;
  }

  remove(address: string, socket: Socket): void {
    const set = this.byAddress.get(address);
    if (!set?.delete(socket)) return;
    this.size--;
    if (set.size === 0) this.byAddress.delete(address);
  }

  get count(): number {
    return this.size;
  }

  /** The oldest waiting connection of the address that holds the most waiting ones. */
  victim(): { address: string; socket: Socket } | null {
    let most: [string, Set<Socket>] | null = null;
    for (const entry of this.byAddress) if (most === null || entry[1].size > most[1].size) most = entry;
    if (most === null) return null;
    const socket = most[1].values().next().value as Socket;
    return { address: most[0], socket };
  }
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

  // A server full of connections that are all busy turns new ones away; a line at most every ten seconds.
  let lastFullWarned = 0;
  let fullSince = 0;
  const full = () => {
    fullSince++;
    const now = Date.now();
    if (now - lastFullWarned < 10_000) return;
    log.warn('connections_full', { max_connections: limits.maxConnections, refused: fullSince });
    lastFullWarned = now;
    fullSince = 0;
  };

  // Cutting waiting connections is logged like refusals: a line at most every ten seconds.
  let lastCutWarned = 0;
  let cutSince = 0;
  const cutWaiting = () => {
    const victim = waiting.victim();
    if (!victim) return;
    waiting.remove(victim.address, victim.socket);
    victim.socket.destroy();
    cutSince++;
    const now = Date.now();
    if (now - lastCutWarned < 10_000) return;
    log.warn('waiting_connections_cut', { peer: victim.address, max_waiting: limits.maxWaiting, cut: cutSince });
    lastCutWarned = now;
    cutSince = 0;
  };

  // Every connection counts against max_connections here (not Node's maxConnections, which drops a new connection
  // before anything can make room for it). A trusted proxy carries many clients on its connections: they are counted
  // by the address it forwards, per request, never as the proxy's own. Every other connection counts for its
  // client's limit address (an IPv6 /64), and waits until its request has arrived.
  let open = 0;
  const waiting = new Waiting();
  const addressOf = new WeakMap<Socket, string>();
  server.on('connection', (socket: Socket) => {
    if (open >= limits.maxConnections) {
      if (waiting.count === 0) {
        full();
        socket.destroy();
        return;
      }
      cutWaiting();
    }
    open++;
    socket.once('close', () => open--);
    const peer = normalizeIp(socket.remoteAddress ?? '');
    if (trustedProxy(peer)) return;
    const address = limitAddress(peer);
    if (!take(address)) {
      refused(address, false);
      socket.destroy();
      return;
    }
    // Room for this one among the waiting: slow clients from many addresses cannot fill every slot either.
    while (waiting.count >= limits.maxWaiting) cutWaiting();
    addressOf.set(socket, address);
    waiting.add(address, socket);
    socket.once('close', () => {
      waiting.remove(address, socket);
      release(address);
    });
  });

  const watched = new Set<Watched>();
  server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    const socket = request.socket;
    const address = addressOf.get(socket);
    if (address !== undefined) {
      // The request has arrived with its headers when it has no body, else when its body has been read; from its
      // response's end the connection waits for the next request. A late 'end' (Node drains an unread body after
      // the response) no longer counts.
      let answered = false;
      const arrived = () => {
        if (!answered) waiting.remove(address, socket);
      };
      if (request.complete || !hasBody(request)) arrived();
      else request.once('end', arrived);
      response.once('finish', () => {
        answered = true;
        if (!socket.destroyed) waiting.add(address, socket);
      });
    }
    if (request.complete) return;
    watched.add({ request, socket, bytesRead: socket.bytesRead, lastProgress: Date.now() });
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
      const forwardedClient = clientAddress(peer, typeof forwarded === 'string' ? forwarded : (forwarded?.join(',') ?? null), trustedProxy);
      // Requests the proxy makes for itself (no client named) are not anyone's share.
      if (trustedProxy(forwardedClient)) return true;
      const client = limitAddress(forwardedClient);
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

// Connections as a resource clients share: no one client address may hold more than its share of the connection
// limit, connections still waiting for a request (its headers or its body) may hold at most half of it, and a request
// whose body stops arriving is cut, so slow or greedy clients, from one address or from many, never stop others.
// Node's own timeouts cut a request whose headers are not complete in time and an idle keep-alive connection.
import type { Server, IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { clientAddress, limitAddress, normalizeIp } from '../domain/addresses.ts';
import type { Fields, Logger } from '../log.ts';

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

/**
 * A warning logged at most every ten seconds, with how many times it happened since the last line, so a flood cannot
 * flood the log too. The count goes last, under `countKey`.
 */
class RareWarning {
  private lastWarned = 0;
  private since = 0;

  constructor(
    private readonly log: Logger,
    private readonly event: string,
    private readonly countKey: string,
  ) {}

  note(fields: Fields): void {
    this.since++;
    const now = Date.now();
    if (now - this.lastWarned < 10_000) return;
    this.log.warn(this.event, { ...fields, [this.countKey]: this.since });
    this.lastWarned = now;
    this.since = 0;
  }
}

/** The places each client address holds: its direct connections, or its requests in flight through a trusted proxy. */
class AddressShares {
  private readonly held = new Map<string, number>();
  // One line per address that reaches its share, at most every ten seconds.
  private readonly refusals: RareWarning;

  constructor(
    private readonly perAddress: number,
    log: Logger,
  ) {
    this.refusals = new RareWarning(log, 'connection_share_exceeded', 'refused');
  }

  /** Holds a place for `address`; false, and the refusal noted, when it already holds its share. */
  take(address: string, forwarded: boolean): boolean {
    const n = this.held.get(address) ?? 0;
    if (n >= this.perAddress) {
      this.refusals.note({ peer: address, forwarded, per_address: this.perAddress });
      return false;
    }
    this.held.set(address, n + 1);
    return true;
  }

  release(address: string): void {
    const n = (this.held.get(address) ?? 1) - 1;
    if (n <= 0) this.held.delete(address);
    else this.held.set(address, n);
  }
}

/** The waiting connections and their ceiling: what is past it is cut, the oldest of the address that holds the most first. */
class WaitingCeiling {
  readonly waiting = new Waiting();
  // Cutting waiting connections is logged like refusals: a line at most every ten seconds.
  private readonly cuts: RareWarning;

  constructor(
    private readonly maxWaiting: number,
    log: Logger,
  ) {
    this.cuts = new RareWarning(log, 'waiting_connections_cut', 'cut');
  }

  /** Cuts one waiting connection, when any waits. */
  cut(): void {
    const victim = this.waiting.victim();
    if (!victim) return;
    this.waiting.remove(victim.address, victim.socket);
    victim.socket.destroy();
    this.cuts.note({ peer: victim.address, max_waiting: this.maxWaiting });
  }

  /** Room for one more among the waiting: slow clients from many addresses cannot fill every slot either. */
  makeRoom(): void {
    while (this.waiting.count >= this.maxWaiting) this.cut();
  }
}

/**
 * Every connection counts against max_connections here (not Node's maxConnections, which drops a new connection
 * before anything can make room for it). A trusted proxy carries many clients on its connections: they are counted
 * by the address it forwards, per request, never as the proxy's own. Every other connection counts for its
 * client's limit address (an IPv6 /64), and waits until its request has arrived.
 */
class ConnectionAccounting {
  private open = 0;
  private readonly addressOf = new WeakMap<Socket, string>();
  // A server full of connections that are all busy turns new ones away; a line at most every ten seconds.
  private readonly full: RareWarning;

  constructor(
    private readonly maxConnections: number,
    private readonly trustedProxy: (address: string) => boolean,
    private readonly shares: AddressShares,
    private readonly ceiling: WaitingCeiling,
    log: Logger,
  ) {
    this.full = new RareWarning(log, 'connections_full', 'refused');
  }

  connected(socket: Socket): void {
    if (!this.roomFor(socket)) return;
    this.open++;
    socket.once('close', () => this.open--);
    const peer = normalizeIp(socket.remoteAddress ?? '');
    if (this.trustedProxy(peer)) return;
    const address = limitAddress(peer);
    if (!this.shares.take(address, false)) {
      socket.destroy();
      return;
    }
    this.ceiling.makeRoom();
    this.addressOf.set(socket, address);
    this.ceiling.waiting.add(address, socket);
    socket.once('close', () => {
      this.ceiling.waiting.remove(address, socket);
      this.shares.release(address);
    });
  }

  /** At max_connections a waiting connection is cut for a new one; when none waits, the new one is refused. */
  private roomFor(socket: Socket): boolean {
    if (this.open < this.maxConnections) return true;
    if (this.ceiling.waiting.count === 0) {
      this.full.note({ max_connections: this.maxConnections });
      socket.destroy();
      return false;
    }
    this.ceiling.cut();
    return true;
  }

  /**
   * A direct connection's request has arrived with its headers when it has no body, else when its body has been
   * read; from its response's end the connection waits for the next request. A late 'end' (Node drains an unread
   * body after the response) no longer counts.
   */
  requested(request: IncomingMessage, response: ServerResponse): void {
    const socket = request.socket;
    const address = this.addressOf.get(socket);
    if (address === undefined) return;
    const waiting = this.ceiling.waiting;
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
}

/** Requests whose body is still arriving: one that brings no byte for `bodyIdleMs` is cut. */
class StalledBodies {
  private readonly watched = new Set<Watched>();

  constructor(
    private readonly bodyIdleMs: number,
    private readonly log: Logger,
  ) {}

  /**
   * Looks again once the data already received has been parsed: a body that came with its headers is complete by
   * then, and only one still arriving is held until a sweep. (Held, every request would stay reachable for up to
   * a sweep's interval, long enough for the garbage collector to move it to the old generation.) A request with
   * no body has nothing to wait for.
   */
  watch(request: IncomingMessage): void {
    if (request.complete || !hasBody(request)) return;
    setImmediate(() => {
      const socket = request.socket;
      if (request.complete || socket.destroyed) return;
      this.watched.add({ request, socket, bytesRead: socket.bytesRead, lastProgress: Date.now() });
    });
  }

  sweep(): void {
    const now = Date.now();
    for (const w of this.watched) {
      if (w.request.complete || w.socket.destroyed) {
        this.watched.delete(w);
      } else if (w.socket.bytesRead !== w.bytesRead || w.request.readableLength >= w.request.readableHighWaterMark) {
        // Bytes arrived, or svc has not read what it holds yet (then the wait is ours, not the client's).
        w.bytesRead = w.socket.bytesRead;
        w.lastProgress = now;
      } else if (now - w.lastProgress >= this.bodyIdleMs) {
        this.watched.delete(w);
        this.log.info('request_body_stalled', { peer: normalizeIp(w.socket.remoteAddress ?? ''), idle_ms: now - w.lastProgress });
        w.socket.destroy();
      }
    }
  }

  clear(): void {
    this.watched.clear();
  }
}

/** A request through a trusted proxy holds a place for the client it forwards until its response ends. */
function admitForwardedClient(
  incoming: IncomingMessage,
  outgoing: ServerResponse,
  trustedProxy: (address: string) => boolean,
  shares: AddressShares,
): boolean {
  const peer = incoming.socket.remoteAddress ?? '';
  if (!trustedProxy(peer)) return true;
  const forwarded = incoming.headers['x-forwarded-for'];
  const forwardedClient = clientAddress(peer, typeof forwarded === 'string' ? forwarded : (forwarded?.join(',') ?? null), trustedProxy);
  // Requests the proxy makes for itself (no client named) are not anyone's share.
  if (trustedProxy(forwardedClient)) return true;
  const client = limitAddress(forwardedClient);
  if (!shares.take(client, true)) return false;
  outgoing.once('close', () => shares.release(client));
  return true;
}

export function shareConnections(
  server: Server,
  limits: ShareLimits,
  trustedProxy: (address: string) => boolean,
  log: Logger,
): ConnectionShare {
  const shares = new AddressShares(limits.perAddress, log);
  const ceiling = new WaitingCeiling(limits.maxWaiting, log);
  const connections = new ConnectionAccounting(limits.maxConnections, trustedProxy, shares, ceiling, log);
  server.on('connection', (socket: Socket) => connections.connected(socket));

  const stalled = new StalledBodies(limits.bodyIdleMs, log);
  server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    connections.requested(request, response);
    stalled.watch(request);
  });
  const sweep = setInterval(() => stalled.sweep(), limits.checkEveryMs);
  sweep.unref();

  return {
    admitForwarded(incoming, outgoing) {
      return admitForwardedClient(incoming, outgoing, trustedProxy, shares);
    },
    stop() {
      clearInterval(sweep);
      stalled.clear();
    },
  };
}

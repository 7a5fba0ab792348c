// Every connection svc holds to its upstreams (CONTRACT §6.1, §6.2), by role, in one owner:
// - the upstream's own (`shared`): one per upstream that is not `auth = oauth`, on which its tools are listed and its
//   list changes heard, and with `isolation = shared` every call to its one stdio process;
// - a person's own (`personal`): an MCP session at an HTTP upstream (so what an upstream keeps per session never
//   passes between people), their own token at an `auth = oauth` upstream, or with `isolation = user` a process of
//   their own. Bounded per upstream; one idle for IDLE_MS is closed; one with a call under way is never closed to
//   make room or for being idle;
// - a person's listing (`listing`): their token at an `auth = oauth` upstream, for one discovery of what their own
//   connection lists, closed after it by the discovery that asked for it.
// Which one a call goes to is decided here (`forCall`).
import type { Config, UpstreamConfig } from '../config/load.ts';
import type { Logger } from '../log.ts';
import type { UpstreamAccounts } from './accounts.ts';
import { UpstreamConnection, type ResourceNotice } from './connection.ts';

/**
 * Told what an upstream says of its resources on one of its connections: `owner` is the person whose own connection it
 * came on, null for the upstream's own (shared) connection.
 */
export type ResourceListener = (upstream: string, owner: number | null, notice: ResourceNotice) => void;

/** A connection idle this long is closed. */
export const IDLE_MS = 10 * 60_000;
/** At most this many people's processes of one stdio upstream (isolation = user), or sessions at one HTTP upstream. */
export const PROCESSES_PER_UPSTREAM = 50;
export const SESSIONS_PER_UPSTREAM = 200;

export class UpstreamConnections {
  /** each upstream's own, by name */
  private readonly own = new Map<string, UpstreamConnection>();
  /** per upstream, each person's own, the one used longest ago first */
  private readonly byUpstream = new Map<string, Map<number, UpstreamConnection>>();
  private readonly sweeper = setInterval(() => this.sweep(Date.now()), 60_000).unref();
  /** told what upstreams say of their resources (mcp/changes.ts, once /mcp serves); none until then */
  resourceListener: ResourceListener | null = null;

  constructor(
    config: Config,
    private readonly log: Logger,
    /** the people's accounts at `auth = oauth` upstreams; null when there is none */
    private readonly accounts: UpstreamAccounts | null,
    /** told when an upstream says its tool list changed, on its own connection or a person's */
    private readonly toolsChanged: (upstream: string) => void,
  ) {
    // The upstream's own connection listens for list changes (a 2026-07-28 upstream tells them on a listen stream only).
    for (const u of config.upstreams)
      if (u.oauth === null)
        this.own.set(
          u.name,
          new UpstreamConnection(u, log, () => toolsChanged(u.name), null, {
            listen: true,
            resources: (notice) => this.resourceListener?.(u.name, null, notice),
          }),
        );
  }

  /** The upstream's own connection (an upstream that is not `auth = oauth`). */
  shared(upstream: string): UpstreamConnection {
    const own = this.own.get(upstream);
    if (own === undefined) throw new Error(`the upstream ${upstream} has no shared connection`);
    return own;
  }

  /**
   * The connection a person's call goes to: a shared stdio upstream's one process, or the person's own; null when the
   * upstream has as many people's connections as it may and each has a call under way.
   */
  forCall(upstream: UpstreamConfig, userId: number): UpstreamConnection | null {
    return this.ownerOf(upstream, userId) === null ? this.shared(upstream.name) : this.personal(upstream, userId);
  }

  /** Whose connection a person's call goes to: theirs (their id), or the upstream's own one process (null). */
  ownerOf(upstream: UpstreamConfig, userId: number): number | null {
    return upstream.transport.kind === 'stdio' && upstream.transport.isolation === 'shared' ? null : userId;
  }

  /** A connection with the person's token at an `auth = oauth` upstream, for one listing; the caller closes it. */
  listing(upstream: UpstreamConfig, userId: number): UpstreamConnection {
    return new UpstreamConnection(upstream, this.log, () => undefined, this.accounts!.source(userId, upstream));
  }

  private open(upstream: UpstreamConfig, userId: number): UpstreamConnection {
    const bearer = upstream.oauth === null ? null : this.accounts!.source(userId, upstream);
    return new UpstreamConnection(upstream, this.log, () => this.toolsChanged(upstream.name), bearer, {
      resources: (notice) => this.resourceListener?.(upstream.name, userId, notice),
      person: userId,
    });
  }

  /**
   * The person's connection to the upstream: theirs, or a new one. When the upstream has as many as it may, the one
   * used longest ago that has no call under way is closed to make room; null when every one has a call under way.
   */
  personal(upstream: UpstreamConfig, userId: number): UpstreamConnection | null {
    let people = this.byUpstream.get(upstream.name);
    if (!people) {
      people = new Map();
      this.byUpstream.set(upstream.name, people);
    }
    const mine = people.get(userId);
    if (mine) {
      // Moved to the end: the map stays in order of use.
      people.delete(userId);
      people.set(userId, mine);
      return mine;
    }
    const max = upstream.transport.kind === 'stdio' ? PROCESSES_PER_UPSTREAM : SESSIONS_PER_UPSTREAM;
    if (people.size >= max) {
      const idle = [...people].find(([, c]) => !c.busy);
      if (!idle) return null;
      void idle[1].close();
      people.delete(idle[0]);
    }
    const connection = this.open(upstream, userId);
    people.set(userId, connection);
    return connection;
  }

  /** Closes the connections idle for IDLE_MS (never one with a call under way). */
  sweep(now: number): void {
    for (const people of this.byUpstream.values()) {
      for (const [userId, c] of people) {
        if (c.busy || now - c.usedAt < IDLE_MS) continue;
        void c.close();
        people.delete(userId);
      }
    }
  }

  async stop(): Promise<void> {
    clearInterval(this.sweeper);
    const all = [...this.own.values(), ...[...this.byUpstream.values()].flatMap((people) => [...people.values()])];
    this.byUpstream.clear();
    this.own.clear();
    await Promise.allSettled(all.map((c) => c.close()));
  }
}

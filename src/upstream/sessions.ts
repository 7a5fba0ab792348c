// Each person's own connection to an upstream (CONTRACT §6.1, §6.2): an MCP session at an HTTP upstream (so what an
// upstream keeps per session never passes between people), a person's own token at an `auth = oauth` upstream, or
// with `isolation = user` a process of their own. Bounded per upstream; one idle for IDLE_MS is closed; a connection
// with a call under way is never closed to make room or for being idle.
import type { UpstreamConfig } from '../config/load.ts';
import type { UpstreamConnection } from './connection.ts';

/** A connection idle this long is closed. */
export const IDLE_MS = 10 * 60_000;
/** At most this many people's processes of one stdio upstream (isolation = user), or sessions at one HTTP upstream. */
export const PROCESSES_PER_UPSTREAM = 50;
export const SESSIONS_PER_UPSTREAM = 200;

export class PersonalConnections {
  /** per upstream, each person's connection, the one used longest ago first */
  private readonly byUpstream = new Map<string, Map<number, UpstreamConnection>>();
  private readonly sweeper = setInterval(() => this.sweep(Date.now()), 60_000).unref();

  constructor(private readonly open: (upstream: UpstreamConfig, userId: number) => UpstreamConnection) {}

  /**
   * The person's connection to the upstream: theirs, or a new one. When the upstream has as many as it may, the one
   * used longest ago that has no call under way is closed to make room; null when every one has a call under way.
   */
  get(upstream: UpstreamConfig, userId: number): UpstreamConnection | null {
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

  /** How many people hold a connection to the upstream. */
  count(upstream: string): number {
    return this.byUpstream.get(upstream)?.size ?? 0;
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
    const all = [...this.byUpstream.values()].flatMap((people) => [...people.values()]);
    this.byUpstream.clear();
    await Promise.allSettled(all.map((c) => c.close()));
  }
}

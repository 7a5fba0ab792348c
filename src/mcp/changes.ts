// Change notifications (CONTRACT §6.3): a caller hears that a list changed when what they may see of it changed, and
// never for what they may not see. One hub per instance holds every open stream (a 2025 session's GET stream, a
// 2026-07-28 `subscriptions/listen` stream) with its caller. While any is open it reads, every TICK_MS, a version of
// what every listing decides on (the reviewed rows and the people's upstream accounts, which every instance on the
// database writes); when that changed, or a caller's access did, it works out again what each caller sees (tools with
// their NAME__connect stand-ins, prompts, the upstreams whose resources they may read) and tells a stream each kind
// whose fingerprint changed for its caller. Each tick also asks the auth core again for each stream's credential: one
// revoked or expired, or no longer allowed `mcp`, ends the stream.
//
// Resource subscriptions are held here too, per instance: routed to the owning upstream on the caller's own connection
// (gateway.ts `subscription`) and renewed every RENEW_MS; an upstream's notifications/resources/updated reaches each
// subscriber of that URI on that connection, mapped, when their credential, asked again then, still lets them read
// that upstream. An upstream's resources/list_changed reaches the streams of whoever may read it (of its own
// connection: everyone's; of a person's: theirs).
import { untraced } from '../trace/spans.ts';
import { createHash } from 'node:crypto';
import type { Db } from '../db/open.ts';
import type { Caller } from '../domain/caller.ts';
import type { Logger } from '../log.ts';
import { reviewedVersion } from '../store/upstream-tools.ts';
import { accountsVersion } from '../store/upstream-accounts.ts';
import type { ResourceNotice } from '../upstream/connection.ts';
import type { ResourceWatch, UpstreamGateway } from '../upstream/gateway.ts';

export type ListKind = 'tools' | 'prompts' | 'resources';
export const LIST_KINDS: readonly ListKind[] = ['tools', 'prompts', 'resources'];

/** How often the hub looks for changes while a stream or a subscription is held. */
export const TICK_MS = 3000;
/** Streams one person may hold on one instance at once, and every person together. */
export const STREAMS_PER_USER = 16;
export const STREAMS_MAX = 512;
/** A stream that carried no notification for this long is ended (a 2025 client opens another). */
export const STREAM_IDLE_MS = 30 * 60_000;
/** Resource subscriptions one person may hold on one instance, and every person together. */
export const SUBSCRIPTIONS_PER_USER = 32;
export const SUBSCRIPTIONS_MAX = 1024;
/** A listen stream subscribes to at most this many of the URIs its filter names. */
export const LISTEN_URIS_MAX = 32;
/** How often each upstream subscription is made again (which also keeps the person's connection from going idle). */
export const RENEW_MS = 2 * 60_000;
/** A 2025 session's subscriptions are dropped once no stream of that session was open here for this long. */
export const SESSION_GRACE_MS = 2 * 60_000;
/** At most this many resource notifications of one upstream are passed on per second; the rest are dropped. */
const NOTICES_PER_SECOND = 20;
/** What a 2025 stream asks its client to wait before opening another, and how often it says it is alive. */
const RECONNECT_MS = 2000;
const KEEPALIVE_MS = 15_000;

/** One notification on a stream: a list of a kind changed, or a subscribed resource (its mapped URI) was updated. */
export type Change = { readonly list: ListKind } | { readonly updated: string };

/** Where a stream's notifications go, written by its era's own wire. */
export interface Sink {
  send(change: Change): void;
  /** ends the stream gracefully (a 2025 client opens another; a 2026-07-28 one gets its listen's result) */
  end(): void;
}

/** The caller as the auth core finds their credential now; null when it no longer holds (revoked, expired, narrowed). */
export type Recheck = () => Promise<Caller | null>;

/** What a stream is opened with. */
export interface StreamSpec {
  readonly caller: Caller;
  readonly recheck: Recheck;
  /** the kinds of list its client asked to hear (2025: every kind) */
  readonly kinds: ReadonlySet<ListKind>;
  /** 2025: the session whose resources/subscribe subscriptions this stream carries; null for a listen stream */
  readonly session: string | null;
  readonly sink: Sink;
}

/** A stream the hub holds, and how it lets go of it. */
export interface StreamHandle {
  readonly id: number;
  close(): void;
}

/** What a caller sees of each kind, as a fingerprint. */
export type View = Partial<Record<ListKind, string>>;

interface Stream extends StreamSpec {
  readonly id: number;
  caller: Caller;
  readonly seen: View;
  lastSent: number;
  readonly close: () => void;
}

/** Where a subscriber's updates go: a 2025 session's streams (of its user), or one listen stream. */
type Subscriber = { readonly session: string; readonly userId: number } | { readonly stream: number };

interface Subscription {
  readonly to: Subscriber;
  readonly mapped: string;
  readonly watch: ResourceWatch;
  caller: Caller;
  /** when a stream of its session was last open here (2025) */
  seenAt: number;
}

const digest = (value: unknown) => createHash('sha256').update(JSON.stringify(value)).digest('base64url');
/** Who sees the same lists: a person, with the labels that decide for them. */
const accessKey = (caller: Caller) => `${caller.userId}\n${caller.labels.join(',')}`;
const subscriberKey = (to: Subscriber) => ('stream' in to ? `stream:${to.stream}` : `session:${to.userId}:${to.session}`);
const watchKey = (w: ResourceWatch) => `${w.upstream}\n${w.owner ?? ''}\n${w.uri}`;

export class ChangeHub {
  private readonly streams = new Map<number, Stream>();
  /** places reserved per person (streams open, and about to be) */
  private readonly places = new Map<number, number>();
  private placesHeld = 0;
  private nextId = 1;
  private timer: NodeJS.Timeout | null = null;
  private ticking = false;
  private stopped = false;
  /** the version the streams' views were last decided on */
  private version: string | null = null;
  private readonly subscriptions = new Map<string, Subscription>();
  private lastRenewal = Date.now();
  /** resource notifications passed on this second, per upstream */
  private readonly notices = new Map<string, { second: number; count: number }>();

  constructor(
    private readonly db: Db,
    private readonly gateway: UpstreamGateway,
    private readonly log: Logger,
    stopping?: AbortSignal,
  ) {
    gateway.listenToResources((upstream, owner, notice) => this.heard(upstream, owner, notice));
    stopping?.addEventListener('abort', () => this.stop(), { once: true });
  }

  /** A place for one more stream of this person's (released by the stream, or by the caller when none opens); null: full. */
  reserve(userId: number): (() => void) | null {
    const mine = this.places.get(userId) ?? 0;
    if (this.stopped || mine >= STREAMS_PER_USER || this.placesHeld >= STREAMS_MAX) return null;
    this.places.set(userId, mine + 1);
    this.placesHeld++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.placesHeld--;
      const left = (this.places.get(userId) ?? 1) - 1;
      if (left === 0) this.places.delete(userId);
      else this.places.set(userId, left);
    };
  }

  /** What the caller sees now of each of `kinds`, as fingerprints: the lists exactly as they would be answered. */
  async viewOf(caller: Caller, kinds: ReadonlySet<ListKind>, cache = new Map<string, Promise<string>>()): Promise<View> {
    const view: View = {};
    for (const kind of kinds) {
      const key = `${kind}\n${accessKey(caller)}`;
      let fingerprint = cache.get(key);
      if (fingerprint === undefined) {
        fingerprint = this.fingerprint(caller, kind);
        cache.set(key, fingerprint);
      }
      view[kind] = await fingerprint;
    }
    return view;
  }

  private async fingerprint(caller: Caller, kind: ListKind): Promise<string> {
    const all = Number.MAX_SAFE_INTEGER;
    if (kind === 'tools') return digest((await this.gateway.tools(caller.access, caller.userId, null, all)).tools);
    if (kind === 'prompts') return digest((await this.gateway.prompts(caller.access, null, all)).prompts);
    return digest(this.gateway.readable(caller.access));
  }

  /** Holds a stream in a place `reserve` gave, with what its caller saw when it opened. */
  attach(release: () => void, spec: StreamSpec, seen: View): StreamHandle {
    const id = this.nextId++;
    let closed = false;
    const close = () => {
      if (closed) return;
      closed = true;
      this.streams.delete(id);
      release();
      this.dropSubscriber({ stream: id });
    };
    this.streams.set(id, { ...spec, id, seen: { ...seen }, lastSent: Date.now(), close });
    this.start();
    return { id, close };
  }

  /**
   * A 2025 session's GET stream of the caller's notifications (SSE); null when the caller, or this instance, holds as
   * many streams as it may.
   */
  async openSession(caller: Caller, recheck: Recheck, session: string, signal: AbortSignal): Promise<Response | null> {
    const release = this.reserve(caller.userId);
    if (release === null) return null;
    const kinds = new Set(LIST_KINDS);
    let seen: View;
    try {
      seen = await this.viewOf(caller, kinds);
    } catch (e) {
      release();
      throw e;
    }
    return sseStream((sink) => this.attach(release, { caller, recheck, kinds, session, sink }, seen).close, signal);
  }

  /**
   * Subscribes `to` (a 2025 session of the caller's, or a listen stream) to a mapped upstream URI: `missing` is the
   * answer of a URI that does not exist (as for one the caller may not read), `too_many` past the bounds. An upstream
   * that refuses throws its refusal (domain/errors.ts UpstreamRefusal).
   */
  async subscribe(caller: Caller, to: Subscriber, mapped: string): Promise<'ok' | 'missing' | 'too_many'> {
    const key = `${subscriberKey(to)}\n${mapped}`;
    const had = this.subscriptions.get(key);
    if (had === undefined && !this.room(caller.userId)) return 'too_many';
    const watch = await this.gateway.subscription(mapped, caller, true);
    if (watch === null) {
      if (had !== undefined) this.unhold(key, had);
      return 'missing';
    }
    const gone = 'stream' in to && !this.streams.has(to.stream);
    if (gone || (!this.subscriptions.has(key) && !this.room(caller.userId))) {
      await this.release(watch, mapped, caller);
      return gone ? 'missing' : 'too_many';
    }
    this.subscriptions.set(key, { to, mapped, watch, caller, seenAt: Date.now() });
    this.start();
    return 'ok';
  }

  /** Ends the subscription of `to` to a mapped URI, if it has one (the upstream's too, when nobody else holds it). */
  unsubscribe(to: Subscriber, mapped: string): void {
    const key = `${subscriberKey(to)}\n${mapped}`;
    const had = this.subscriptions.get(key);
    if (had !== undefined) this.unhold(key, had);
  }

  private room(userId: number): boolean {
    if (this.subscriptions.size >= SUBSCRIPTIONS_MAX) return false;
    let mine = 0;
    for (const s of this.subscriptions.values()) if (s.caller.userId === userId) mine++;
    return mine < SUBSCRIPTIONS_PER_USER;
  }

  private unhold(key: string, sub: Subscription): void {
    this.subscriptions.delete(key);
    void this.release(sub.watch, sub.mapped, sub.caller);
  }

  /** Unsubscribes at the upstream once no subscription here holds the same watch. */
  private async release(watch: ResourceWatch, mapped: string, caller: Caller): Promise<void> {
    const id = watchKey(watch);
    if ([...this.subscriptions.values()].some((s) => watchKey(s.watch) === id)) return;
    await this.gateway.subscription(mapped, caller, false, true).catch(() => undefined);
  }

  private dropSubscriber(to: Subscriber): void {
    const prefix = `${subscriberKey(to)}\n`;
    for (const [key, sub] of this.subscriptions) if (key.startsWith(prefix)) this.unhold(key, sub);
  }

  /** What an upstream said of its resources on one of its connections (`owner`: whose; null: its own). */
  private heard(upstream: string, owner: number | null, notice: ResourceNotice): void {
    if (!this.passes(upstream)) return;
    if ('updated' in notice) {
      for (const sub of this.subscriptions.values()) {
        const w = sub.watch;
        if (w.upstream !== upstream || w.uri !== notice.updated || w.owner !== owner) continue;
        for (const stream of this.streamsOf(sub.to)) void this.deliver(stream, upstream, { updated: sub.mapped });
      }
      return;
    }
    for (const stream of this.streams.values())
      if (stream.kinds.has('resources') && (owner === null || stream.caller.userId === owner))
        void this.deliver(stream, upstream, { list: 'resources' });
  }

  /** At most NOTICES_PER_SECOND of one upstream's resource notifications each second. */
  private passes(upstream: string): boolean {
    const second = Math.floor(Date.now() / 1000);
    const seen = this.notices.get(upstream);
    if (seen === undefined || seen.second !== second) {
      this.notices.set(upstream, { second, count: 1 });
      return true;
    }
    seen.count++;
    if (seen.count === NOTICES_PER_SECOND + 1) this.log.warn('upstream_resource_notices_dropped', { upstream });
    return seen.count <= NOTICES_PER_SECOND;
  }

  private streamsOf(to: Subscriber): Stream[] {
    if ('stream' in to) {
      const one = this.streams.get(to.stream);
      return one === undefined ? [] : [one];
    }
    return [...this.streams.values()].filter((s) => s.session === to.session && s.caller.userId === to.userId);
  }

  /** Sends `change` when the stream's caller, their credential asked again now, may still read the upstream. */
  private async deliver(stream: Stream, upstream: string, change: Change): Promise<void> {
    const caller = await stream.recheck().catch(() => null);
    if (caller === null || !this.streams.has(stream.id)) return;
    stream.caller = caller;
    if (this.gateway.readable(caller.access).includes(upstream)) this.send(stream, change);
  }

  private send(stream: Stream, change: Change): void {
    stream.lastSent = Date.now();
    stream.sink.send(change);
  }

  /** Ends a stream the hub lets go of: its client is told (gracefully), and its place and subscriptions go. */
  private end(stream: Stream): void {
    stream.close();
    stream.sink.end();
  }

  private start(): void {
    if (this.timer !== null || this.stopped) return;
    // Started by the first stream's request, and serving every stream: in no request's trace.
    this.timer = setInterval(() => void untraced(() => this.tick()), TICK_MS);
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    if (this.ticking) return;
    this.ticking = true;
    try {
      if (this.streams.size > 0) await this.checkStreams();
      await this.keepSubscriptions(Date.now());
      if (this.streams.size === 0 && this.subscriptions.size === 0 && this.timer !== null) {
        clearInterval(this.timer);
        this.timer = null;
        this.version = null;
      }
    } catch (e) {
      this.log.warn('mcp_changes_failed', { error: e instanceof Error ? e.message.slice(0, 200) : 'failed' });
    } finally {
      this.ticking = false;
    }
  }

  /** Each stream's credential asked again, and its views worked out again when what they are decided on changed. */
  private async checkStreams(): Promise<void> {
    const version = `${await reviewedVersion(this.db)}/${await accountsVersion(this.db)}`;
    const changed = version !== this.version;
    const cache = new Map<string, Promise<string>>();
    const checked = await Promise.allSettled([...this.streams.values()].map((s) => this.checkStream(s, changed, cache)));
    const failed = checked.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    // Kept only once every stream was decided on it: a stream that failed is looked at again next time.
    if (failed !== undefined) throw failed.reason;
    this.version = version;
  }

  private async checkStream(stream: Stream, changed: boolean, cache: Map<string, Promise<string>>): Promise<void> {
    const caller = await stream.recheck();
    if (!this.streams.has(stream.id)) return;
    if (caller === null || Date.now() - stream.lastSent > STREAM_IDLE_MS) return this.end(stream);
    const accessChanged = accessKey(caller) !== accessKey(stream.caller);
    stream.caller = caller;
    if (!changed && !accessChanged) return;
    const now = await this.viewOf(caller, stream.kinds, cache);
    if (!this.streams.has(stream.id)) return;
    for (const kind of stream.kinds) {
      if (now[kind] === stream.seen[kind]) continue;
      stream.seen[kind] = now[kind];
      this.send(stream, { list: kind });
    }
  }

  /**
   * A 2025 session's subscriptions follow its streams here (dropped SESSION_GRACE_MS after the last one); a
   * subscription whose caller may no longer read its upstream goes; each upstream subscription is made again every
   * RENEW_MS.
   */
  private async keepSubscriptions(now: number): Promise<void> {
    for (const [key, sub] of this.subscriptions) {
      const open = this.streamsOf(sub.to);
      if (open.length > 0) {
        sub.seenAt = now;
        sub.caller = open[0]!.caller;
      }
      const lapsed = 'session' in sub.to && open.length === 0 && now - sub.seenAt > SESSION_GRACE_MS;
      if (lapsed || !this.gateway.readable(sub.caller.access).includes(sub.watch.upstream)) this.unhold(key, sub);
    }
    if (now - this.lastRenewal < RENEW_MS) return;
    this.lastRenewal = now;
    const renewed = new Set<string>();
    for (const [key, sub] of this.subscriptions) {
      const id = watchKey(sub.watch);
      if (renewed.has(id)) continue;
      renewed.add(id);
      const watch = await this.gateway.subscription(sub.mapped, sub.caller, true, true).catch((e: unknown) => {
        this.log.debug?.('upstream_subscription_renewal_failed', { error: e instanceof Error ? e.message.slice(0, 200) : 'failed' });
        return sub.watch;
      });
      if (watch === null && this.subscriptions.get(key) === sub) this.unhold(key, sub);
    }
  }

  /** svc stops: every stream ends (its client told), nothing more is heard. */
  stop(): void {
    this.stopped = true;
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    for (const stream of [...this.streams.values()]) this.end(stream);
    this.subscriptions.clear();
  }
}

const LIST_METHOD: Record<ListKind, string> = {
  tools: 'notifications/tools/list_changed',
  prompts: 'notifications/prompts/list_changed',
  resources: 'notifications/resources/list_changed',
};

/** A change as the JSON-RPC notification a 2025 client reads. */
export function notificationOf(change: Change): { jsonrpc: '2.0'; method: string; params?: { uri: string } } {
  return 'list' in change
    ? { jsonrpc: '2.0', method: LIST_METHOD[change.list] }
    : { jsonrpc: '2.0', method: 'notifications/resources/updated', params: { uri: change.updated } };
}

/**
 * An SSE response whose sink `open` takes (returning how to let go of it): each change an `event: message`, a comment
 * every KEEPALIVE_MS, and `retry` so that a client opens another soon after svc ends this one. It ends when svc ends
 * it, or when the client goes (`signal`, or the body cancelled).
 */
function sseStream(open: (sink: Sink) => () => void, signal: AbortSignal): Response {
  const encoder = new TextEncoder();
  let finish = () => {};
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      let done = false;
      const write = (text: string) => {
        if (!done) controller.enqueue(encoder.encode(text));
      };
      const keepAlive = setInterval(() => write(': keepalive\n\n'), KEEPALIVE_MS);
      keepAlive.unref();
      let letGo = () => {};
      finish = () => {
        if (done) return;
        done = true;
        clearInterval(keepAlive);
        signal.removeEventListener('abort', finish);
        letGo();
      };
      const sink: Sink = {
        send: (change) => write(`event: message\ndata: ${JSON.stringify(notificationOf(change))}\n\n`),
        end: () => {
          if (done) return;
          finish();
          controller.close();
        },
      };
      write(`retry: ${RECONNECT_MS}\n\n`);
      letGo = open(sink);
      if (signal.aborted) finish();
      else signal.addEventListener('abort', finish, { once: true });
    },
    cancel() {
      finish();
    },
  });
  return new Response(body, {
    status: 200,
    headers: { 'content-type': 'text/event-stream', 'cache-control': 'no-cache, no-transform', 'x-accel-buffering': 'no' },
  });
}

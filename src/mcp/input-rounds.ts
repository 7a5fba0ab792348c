// A 2026-07-28 caller answers an upstream's questions by retrying (CONTRACT §6.3): svc's answer to its call is an
// `input_required` result with the questions, and the retry carries the person's answers back. What the retry needs
// travels in svc's request state, sealed (AES-256-GCM) and bound to the caller, their credential, the tool and its
// arguments, with an expiry:
// - a 2026-07-28 upstream's own `input_required` is handed on: its state is sealed inside svc's, so any instance can
//   carry the retry to the upstream;
// - a 2025 upstream asks during its call, which stays open on the instance that made it (for at most the call's
//   `timeout`): the state names it there, and a retry that reaches another instance finds nothing.
// A retry from anyone else, with altered state, or for a call that is gone gets the error of an expired request.
import { randomBytes } from 'node:crypto';
import { ProtocolError, ProtocolErrorCode } from '@modelcontextprotocol/server';
import { fingerprint } from '../domain/canonical-json.ts';
import type { Caller } from '../domain/caller.ts';
import { deriveKey } from '../domain/secrets.ts';
import { seal, unseal } from '../domain/sealed.ts';
import { MissingCapability, type QuestionMethod } from '../domain/questions.ts';

/** How long a sealed state is good for: a person takes a while to answer, but not a day. */
const STATE_MS = 10 * 60 * 1000;
/** At most this many calls wait for their caller's answers on one instance. */
const HELD_MAX = 10_000;
const CONTEXT = 'mcp-input-state';

export type Question = { readonly method: QuestionMethod; readonly params: Record<string, unknown> };
type Progress = { progress: number; total?: number; message?: string };
/** The caller's request a round runs in: its signal and where its progress goes. */
export interface Attached {
  readonly signal: AbortSignal;
  readonly progress?: (p: Progress) => void;
}

/** What svc's request state holds, sealed. */
interface State {
  readonly kind: 'upstream' | 'held';
  readonly user: number;
  readonly credential: string;
  readonly tool: string;
  readonly args: string;
  readonly exp: number;
  /** the upstream's own request state (kind upstream) */
  readonly state?: string;
  /** the call held on this instance (kind held) */
  readonly held?: string;
}

/** The error of an expired request: the caller calls the tool again. */
export function expired(): ProtocolError {
  return new ProtocolError(ProtocolErrorCode.InvalidParams, 'this input request has expired or is not yours; call the tool again');
}

/**
 * The questions of one call to a 2025 upstream, as they are asked during it: each waits for the caller's retry,
 * which answers it by its key.
 */
export class HeldQuestions {
  readonly id = randomBytes(15).toString('base64url');
  /** cancels the call: aborted when the caller's request attached to it now is cancelled or closed */
  readonly controller = new AbortController();
  /** where the call's progress goes: the caller's request attached to it now, if any */
  private progressTo: ((p: Progress) => void) | undefined;
  private detachFrom: (() => void) | null = null;
  private readonly pending = new Map<
    string,
    { question: Question; sent: boolean; resolve(a: Record<string, unknown>): void; reject(e: Error): void }
  >();
  private wake: (() => void) | null = null;
  private count = 0;

  /** `can`: whether the caller's client declared what a question needs; one it did not is refused at once. */
  constructor(private readonly can: (question: Question) => boolean) {}

  /** The call's progress, to the request attached now (none between rounds: the caller is answering). */
  readonly progress = (p: Progress) => this.progressTo?.(p);

  /** A request of the caller's is the call's for one round: its cancel cancels the call, its stream gets the progress. */
  attach(request: Attached): void {
    const cancel = () => this.controller.abort();
    request.signal.addEventListener('abort', cancel, { once: true });
    if (request.signal.aborted) cancel();
    this.progressTo = request.progress;
    this.detachFrom = () => request.signal.removeEventListener('abort', cancel);
  }

  /** The round's request has its answer: the call goes on without it (its end is not the call's). */
  detach(): void {
    this.detachFrom?.();
    this.detachFrom = null;
    this.progressTo = undefined;
  }

  ask(method: QuestionMethod, params: Record<string, unknown>): Promise<Record<string, unknown>> {
    const question = { method, params };
    if (!this.can(question)) return Promise.reject(new MissingCapability(method));
    return new Promise((resolve, reject) => {
      this.pending.set(`q${++this.count}`, { question, sent: false, resolve, reject });
      this.wake?.();
    });
  }

  /** Resolves once a question not yet sent to the caller is waiting. */
  asked(): Promise<void> {
    if ([...this.pending.values()].some((p) => !p.sent)) return Promise.resolve();
    return new Promise((ok) => {
      this.wake = () => {
        this.wake = null;
        ok();
      };
    });
  }

  /** The questions not yet sent, by key, marked sent. */
  take(): Record<string, Question> {
    const out: Record<string, Question> = {};
    for (const [key, p] of this.pending)
      if (!p.sent) {
        p.sent = true;
        out[key] = p.question;
      }
    return out;
  }

  /** The caller's answers: each sent question answered by its key; one left unanswered is refused. */
  answer(responses: Record<string, unknown>): void {
    for (const [key, p] of this.pending) {
      if (!p.sent) continue;
      this.pending.delete(key);
      const response = responses[key];
      if (typeof response === 'object' && response !== null) p.resolve(response as Record<string, unknown>);
      else p.reject(new Error('the caller did not answer the question'));
    }
  }

  /** The call ended or expired: every question still open is refused. */
  end(): void {
    for (const p of this.pending.values()) p.reject(new Error('the request ended before the person answered'));
    this.pending.clear();
  }
}

/** A call waiting on this instance for its caller's retry. */
interface Waiting<R> {
  readonly questions: HeldQuestions;
  readonly done: Promise<R>;
  readonly timer: NodeJS.Timeout;
}

/** The result of a round: the call's own, or the questions to put to the caller with the state of the retry. */
export type Round<R> = { readonly result: R } | { readonly inputRequests: Record<string, Question>; readonly requestState: string };

export class InputRounds {
  private readonly key: Buffer;
  private readonly waiting = new Map<string, Waiting<unknown>>();

  constructor(secret: Buffer) {
    this.key = deriveKey(secret, CONTEXT);
  }

  /** svc's request state for a round of this caller's call of `tool` with `args`. */
  seal(caller: Caller, tool: string, args: unknown, what: { state?: string } | { held: string }): string {
    const state: State = {
      kind: 'held' in what ? 'held' : 'upstream',
      user: caller.userId,
      credential: caller.credential,
      tool,
      args: fingerprint(args ?? {}),
      exp: Date.now() + STATE_MS,
      ...what,
    };
    return seal(this.key, JSON.stringify(state), CONTEXT);
  }

  /** The state a retry carries, when it is this caller's, for this call, and not expired; else the expired error. */
  open(raw: unknown, caller: Caller, tool: string, args: unknown): State {
    const text = typeof raw === 'string' && raw.length <= 16_384 ? unseal(this.key, raw, CONTEXT) : null;
    const state = text === null ? null : (JSON.parse(text) as State);
    if (
      state === null ||
      state.user !== caller.userId ||
      state.credential !== caller.credential ||
      state.tool !== tool ||
      state.args !== fingerprint(args ?? {}) ||
      state.exp < Date.now()
    )
      throw expired();
    return state;
  }

  /**
   * Waits for the call to end or to ask a question, whichever is first. A question: the call is held here until the
   * caller's retry (or its `holdMs`), and the round is the questions with the state that names the held call.
   */
  async round<R>(
    done: Promise<R>,
    questions: HeldQuestions,
    seal: (held: string) => string,
    holdMs: number,
    request: Attached,
  ): Promise<Round<R>> {
    questions.attach(request);
    const first = await Promise.race([done.then((result) => ({ result })), questions.asked().then(() => null)]).finally(() =>
      questions.detach(),
    );
    if (first !== null) {
      questions.end();
      return first;
    }
    if (this.waiting.size >= HELD_MAX) {
      questions.end();
      return { result: await done };
    }
    const timer = setTimeout(() => this.release(questions.id), holdMs).unref();
    this.waiting.set(questions.id, { questions, done, timer });
    // A call that ends while it waits (its upstream gave up) is let go.
    void done.finally(() => this.release(questions.id)).catch(() => undefined);
    return { inputRequests: questions.take(), requestState: seal(questions.id) };
  }

  /** The held call a retry names, answered with its responses, and its next round; the expired error when it is gone. */
  resume<R>(
    id: string,
    responses: Record<string, unknown>,
    seal: (held: string) => string,
    holdMs: number,
    request: Attached,
  ): Promise<Round<R>> {
    const waiting = this.waiting.get(id) as Waiting<R> | undefined;
    if (waiting === undefined) throw expired();
    this.waiting.delete(id);
    clearTimeout(waiting.timer);
    waiting.questions.answer(responses);
    return this.round(waiting.done, waiting.questions, seal, holdMs, request);
  }

  private release(id: string): void {
    const waiting = this.waiting.get(id);
    if (waiting === undefined) return;
    this.waiting.delete(id);
    clearTimeout(waiting.timer);
    waiting.questions.end();
  }
}

// Questions an upstream asks the person during a 2025-era request (CONTRACT §6.3): svc asks them of the caller's
// client on the request's own stream and waits for the answer, which the client posts in a request of its own. svc
// answers every POST on a server of its own, so the answer is found here, by the caller, their session and the
// question's id: a random id, which only that caller's client was sent. An answer from anyone else, or of another
// session, reaches nothing; a question whose request has ended is gone.
import { randomBytes } from 'node:crypto';
import type { JSONRPCMessage, Transport } from '@modelcontextprotocol/server';

/** At most this many questions wait for answers on one instance; past it a question is refused. */
const OPEN_MAX = 10_000;

/** A client's answer to a question: its result, or the error it answered with. */
export class ClientRefused extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

type Answer = { readonly result?: unknown; readonly error?: { readonly code?: unknown; readonly message?: unknown } };

export class PendingQuestions {
  private readonly open = new Map<string, (answer: Answer) => void>();

  /**
   * Sends the question on `transport` (on the stream of the request `relatedId`) and resolves with the client's
   * result; rejects with ClientRefused for its error, or when `signal` aborts first (the request ended).
   */
  ask(
    transport: Transport,
    who: { readonly userId: number; readonly session: string },
    relatedId: string | number,
    method: string,
    params: Record<string, unknown>,
    signal: AbortSignal,
  ): Promise<Record<string, unknown>> {
    if (this.open.size >= OPEN_MAX) return Promise.reject(new Error('too many questions wait for answers on this instance'));
    if (signal.aborted) return Promise.reject(new Error('the request ended before its question was asked'));
    const id = `svc-q-${randomBytes(15).toString('base64url')}`;
    const key = keyOf(who.userId, who.session, id);
    return new Promise((resolve, reject) => {
      const end = () => {
        this.open.delete(key);
        signal.removeEventListener('abort', gone);
      };
      const gone = () => {
        end();
        reject(new Error('the request ended before the person answered'));
      };
      signal.addEventListener('abort', gone, { once: true });
      this.open.set(key, (answer) => {
        end();
        if (answer.error === undefined && typeof answer.result === 'object' && answer.result !== null)
          resolve(answer.result as Record<string, unknown>);
        else {
          const code = typeof answer.error?.code === 'number' ? answer.error.code : -32603;
          reject(new ClientRefused(code, String(answer.error?.message ?? 'the client answered nothing').slice(0, 200)));
        }
      });
      const question = { jsonrpc: '2.0', id, method, params } as JSONRPCMessage;
      transport.send(question, { relatedRequestId: relatedId }).catch((e: unknown) => {
        end();
        reject(e);
      });
    });
  }

  /**
   * The answers in a body, each given to its question when it is this caller's and this session's. Whether the body
   * held answers only (nothing else for a server to do).
   */
  answer(userId: number, session: string, body: unknown): boolean {
    const messages = Array.isArray(body) ? body : [body];
    let only = messages.length > 0;
    for (const m of messages) {
      const message = (typeof m === 'object' && m !== null ? m : {}) as { id?: unknown; method?: unknown } & Answer;
      const isAnswer = message.method === undefined && (typeof message.id === 'string' || typeof message.id === 'number');
      if (!isAnswer || !('result' in message || 'error' in message)) {
        only = false;
        continue;
      }
      if (typeof message.id === 'string') this.open.get(keyOf(userId, session, message.id))?.(message);
    }
    return only;
  }
}

const keyOf = (userId: number, session: string, id: string) => `${userId}\n${session}\n${id}`;

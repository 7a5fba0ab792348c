// MCP session ids. svc serves MCP statelessly (any instance answers any request), but it still hands out a
// session id on initialize so clients can tell their sessions apart. The id carries no authority (the caller's
// credentials are checked on every request); it is bound to the user who opened it by an HMAC, so the same id
// with another user's credentials is refused, nobody can make a valid id for someone else, and no id reveals
// who it belongs to.
import { createHmac } from 'node:crypto';
import { encodeBase32LowerCaseNoPadding } from '@oslojs/encoding';
import type { Config } from '../config/load.ts';
import type { Db } from '../db/open.ts';
import { serverKey } from '../store/server-keys.ts';
import { deriveKey, randomId } from '../domain/secrets.ts';
import { declaredQuestions } from '../domain/questions.ts';

/**
 * The HMAC key: derived from the session secret for this purpose alone, or, in configurations without sessions,
 * the random key the database made at migration (so every instance on it agrees).
 */
export async function sessionIdKey(config: Config, db: Db): Promise<Buffer> {
  if (config.auth.session) return deriveKey(config.auth.session.secret, 'mcp-session-id');
  const key = await serverKey(db, 'mcp-session-id');
  if (key === null) throw new Error('the database has no MCP session key; run svc migrate');
  return Buffer.from(key, 'hex');
}

/**
 * What the client declared at initialize that later requests of the session need to know: URL elicitation, and the
 * questions an upstream may ask the person through it (form elicitation, sampling, roots).
 */
export interface SessionTraits {
  readonly urlElicitation: boolean;
  readonly formElicitation?: boolean;
  readonly sampling?: boolean;
  readonly roots?: boolean;
}

/** Each trait's mark in an id, in this order. */
const MARKS: [keyof SessionTraits, string][] = [
  ['urlElicitation', 'u'],
  ['formElicitation', 'f'],
  ['sampling', 's'],
  ['roots', 'r'],
];

function tag(key: Buffer, nonce: string, userId: number, traits: string): string {
  const what = traits === '' ? `${nonce}:${userId}` : `${nonce}:${userId}:${traits}`;
  return encodeBase32LowerCaseNoPadding(createHmac('sha256', key).update(what).digest().subarray(0, 15));
}

/** A new session id for the user; the traits are in it, under the HMAC, so a client cannot claim others later. */
export function newSessionId(key: Buffer, userId: number, traits: SessionTraits = { urlElicitation: false }): string {
  const nonce = randomId(15);
  const marks = MARKS.filter(([trait]) => traits[trait] === true)
    .map(([, mark]) => mark)
    .join('');
  return marks === '' ? `${nonce}.${tag(key, nonce, userId, '')}` : `${nonce}.${tag(key, nonce, userId, marks)}.${marks}`;
}

export type SessionIdCheck = { readonly check: 'ok'; readonly traits: SessionTraits } | { readonly check: 'malformed' | 'other_user' };

export function checkSessionId(key: Buffer, id: string, userId: number): SessionIdCheck {
  const m = /^([a-z2-7]{24})\.([a-z2-7]{24})(?:\.(?=[ufsr])(u?f?s?r?))?$/.exec(id);
  if (!m) return { check: 'malformed' };
  const marks = m[3] ?? '';
  // The tag is public once sent, so comparing it in plain time gives nothing away.
  if (tag(key, m[1]!, userId, marks) !== m[2]) return { check: 'other_user' };
  const traits = Object.fromEntries(MARKS.map(([trait, mark]) => [trait, marks.includes(mark)])) as unknown as SessionTraits;
  return { check: 'ok', traits };
}

/**
 * What an initialize request's client declares of the questions svc relays: elicitation in form mode (an empty
 * `elicitation` is form mode), in URL mode, sampling and roots.
 */
export function declaredTraits(body: unknown): SessionTraits {
  const messages = Array.isArray(body) ? body : [body];
  const init = messages.find((m) => (m as { method?: unknown } | null)?.method === 'initialize') as
    | { params?: { capabilities?: Record<string, unknown> } }
    | undefined;
  const questions = declaredQuestions(init?.params?.capabilities);
  return { urlElicitation: questions.url, formElicitation: questions.form, sampling: questions.sampling, roots: questions.roots };
}

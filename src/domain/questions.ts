// Questions an upstream asks the person during a request (CONTRACT §6.3), as values every layer above may name
// without loading an MCP SDK: the kinds svc relays, what a client declared it can answer, the refusal when the
// caller's client cannot take one, and a 2026-07-28 upstream's questions handed back for the caller to answer by
// retrying.
import { isObject } from './canonical-json.ts';

/** A question an upstream asks the person during a request. */
export type QuestionMethod = 'elicitation/create' | 'sampling/createMessage' | 'roots/list';
export const QUESTION_METHODS: readonly QuestionMethod[] = ['elicitation/create', 'sampling/createMessage', 'roots/list'];

/** What a client declared it can answer of an upstream's questions. */
export interface Questions {
  readonly form: boolean;
  readonly url: boolean;
  readonly sampling: boolean;
  readonly roots: boolean;
}

/**
 * What a client's capabilities (2025: at initialize; 2026-07-28: in each request) declare of the questions svc
 * relays: elicitation in form mode (an empty `elicitation` is form mode), in URL mode, sampling and roots.
 */
export function declaredQuestions(capabilities: unknown): Questions {
  const caps = isObject(capabilities) ? capabilities : {};
  const elicitation = caps.elicitation;
  return {
    form: isObject(elicitation) && (isObject(elicitation.form) || (!('form' in elicitation) && !('url' in elicitation))),
    url: isObject(elicitation) && isObject(elicitation.url),
    sampling: isObject(caps.sampling),
    roots: isObject(caps.roots),
  };
}

/** Whether a client that declared `questions` can answer a question: elicitation in its mode (form when none is named). */
export function mayAsk(questions: Questions | null, method: QuestionMethod, params: Record<string, unknown>): boolean {
  if (questions === null) return false;
  if (method === 'sampling/createMessage') return questions.sampling;
  if (method === 'roots/list') return questions.roots;
  return params.mode === 'url' ? questions.url : params.mode === undefined || params.mode === 'form' ? questions.form : false;
}

/** The caller's client did not declare the capability a question needs (the specification's error -32021). */
export class MissingCapability extends Error {
  constructor(readonly method: QuestionMethod) {
    super(`the client svc answers for did not declare what ${method} needs`);
  }
}

/**
 * A 2026-07-28 upstream's questions to the person, handed back for a 2026-07-28 caller: at most 16, each one svc
 * relays, with the upstream's own state for the retry.
 */
export class InputAsked {
  constructor(
    readonly inputRequests: Record<string, { readonly method: QuestionMethod; readonly params: Record<string, unknown> }>,
    readonly requestState: string | undefined,
    /** how many of the answer's questions were of a kind svc does not relay (left out of inputRequests) */
    readonly unrelayed = 0,
  ) {}

  /** The questions of an upstream's `input_required` answer (at most 16), as svc relays them, and its state. */
  static from(answer: Record<string, unknown>): InputAsked {
    const asked = isObject(answer.inputRequests) ? answer.inputRequests : {};
    const inputRequests: InputAsked['inputRequests'] = {};
    let unrelayed = 0;
    for (const [key, q] of Object.entries(asked).slice(0, 16)) {
      const method = QUESTION_METHODS.find((m) => isObject(q) && m === q.method);
      if (method === undefined) unrelayed++;
      else inputRequests[key] = { method, params: isObject(q) && isObject(q.params) ? q.params : {} };
    }
    return new InputAsked(inputRequests, typeof answer.requestState === 'string' ? answer.requestState : undefined, unrelayed);
  }
}

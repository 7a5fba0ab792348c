// Questions an upstream asks the person during a request (CONTRACT §6.3), as values every layer above may name
// without loading an MCP SDK: the kinds svc relays, the refusal when the caller's client cannot take one, and a
// 2026-07-28 upstream's questions handed back for the caller to answer by retrying.

/** A question an upstream asks the person during a request. */
export type QuestionMethod = 'elicitation/create' | 'sampling/createMessage' | 'roots/list';
export const QUESTION_METHODS: readonly QuestionMethod[] = ['elicitation/create', 'sampling/createMessage', 'roots/list'];

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
  ) {}
}

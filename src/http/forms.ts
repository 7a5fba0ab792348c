// Request bodies and redirects shared by the routes.
import { AppError, badRequest } from '../domain/errors.ts';
import type { Context } from 'hono';

/**
 * A form (urlencoded or multipart) or JSON object body, as plain string/unknown fields. Form fields named in
 * `lists` (checkboxes) come as arrays of their values; other fields repeated keep their first value.
 */
export async function readBody(c: Context, options: { lists?: readonly string[] } = {}): Promise<Record<string, unknown>> {
  const type = (c.req.header('content-type') ?? '').toLowerCase();
  if (type.startsWith('application/x-www-form-urlencoded') || type.startsWith('multipart/form-data')) {
    const body = await c.req.parseBody({ all: true });
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(body)) {
      const values = (Array.isArray(v) ? v : [v]).filter((x): x is string => typeof x === 'string');
      out[k] = options.lists?.includes(k) ? values : values[0];
    }
    return out;
  }
  if (type.startsWith('application/json')) {
    let body: unknown;
    try {
      body = await c.req.json();
    } catch {
      throw badRequest('the body is not valid JSON');
    }
    if (body === null || typeof body !== 'object' || Array.isArray(body)) throw badRequest('the body must be a JSON object');
    return body as Record<string, unknown>;
  }
  throw badRequest('send a form (application/x-www-form-urlencoded) or a JSON object (application/json)');
}

/**
 * Where to send a browser after login: only a path on this site. The candidate is resolved against base_url
 * and kept only if it stays on base_url's origin; the answer is absolute, so no browser can read it as
 * another host.
 */
/** A JSON API's body: a JSON object sent as application/json. */
export async function jsonBody(c: Context): Promise<Record<string, unknown>> {
  if (!/^application\/json\b/i.test(c.req.header('content-type') ?? ''))
    throw badRequest('send a JSON object with Content-Type: application/json');
  return readBody(c);
}

export function safeNext(next: unknown, baseUrl: string): string {
  const home = `${baseUrl}/`;
  if (typeof next !== 'string' || !next.startsWith('/') || next.length > 2000) return home;
  try {
    const url = new URL(next, home);
    if (url.origin !== baseUrl || url.pathname.startsWith('//')) return home;
    return `${baseUrl}${url.pathname}${url.search}`;
  } catch {
    return home;
  }
}

/** The path form of safeNext, for hidden form fields. */
export function safeNextPath(next: unknown, baseUrl: string): string {
  return safeNext(next, baseUrl).slice(baseUrl.length);
}

/**
 * The scopes a token form or request asks for: the page's checkboxes arrive as a list (none checked is refused by
 * the scope rules), an API client sends a list or a string, or nothing for the default.
 */
export function scopesFromForm(body: Record<string, unknown>): unknown {
  // The page marks its choice, so that no box checked is refused rather than read as "the default".
  const scopes = body.scope_choice === '1' && body.scopes === undefined ? [] : body.scopes;
  return Array.isArray(scopes) && scopes.length === 1 && typeof scopes[0] === 'string' && /[\s,]/.test(scopes[0]) ? scopes[0] : scopes;
}

/**
 * The label restriction a token or consent form asks for. The page sends access=all or access=labels with the checked labels
 * (none checked: unlabelled documents only); API clients send `labels` (an array or a label string) or nothing.
 */
export function restrictionFromForm(body: Record<string, unknown>): unknown {
  if (body.access === 'all') {
    // Checked labels with "everything" selected is a mistake a person makes; never answer it with a wider token.
    if (Array.isArray(body.labels) && body.labels.length > 0) {
      throw badRequest(
        'labels: you checked labels but chose "Everything I can see"; choose "Only documents with these labels" to restrict the token, or uncheck them',
        'labels',
      );
    }
    return null;
  }
  if (body.access === 'labels') return body.labels ?? [];
  if (body.access !== undefined) throw badRequest('access: "all" or "labels"', 'access');
  const labels = body.labels;
  // A form's labels field arrives as a list of its values; one value is a label string like any other.
  return Array.isArray(labels) && labels.length === 1 && typeof labels[0] === 'string' && /[\s,]/.test(labels[0]) ? labels[0] : labels;
}

/** Refusals a person at a form can correct, and the status their page answers with. */
const CORRECTABLE = { bad_request: 400, conflict: 409 } as const;
type Correctable = keyof typeof CORRECTABLE;

/**
 * A form post: `act` does the work and answers (usually a redirect). A refusal the person can correct (bad input, or
 * a conflict, or only those named in `only`) shows the form's page again with the message, at its status; anything
 * else goes on to the one error handler.
 */
export async function formPost(
  act: () => Promise<Response>,
  again: (status: 400 | 409, message: string) => Response | Promise<Response>,
  only: readonly Correctable[] = ['bad_request', 'conflict'],
): Promise<Response> {
  try {
    return await act();
  } catch (e) {
    if (e instanceof AppError && (e.code === 'bad_request' || e.code === 'conflict') && only.includes(e.code))
      return again(CORRECTABLE[e.code], e.message);
    throw e;
  }
}

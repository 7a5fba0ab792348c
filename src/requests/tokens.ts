// Personal tokens as a person, the token page or the CLI asks for them: `{name, ttl?, labels?, scopes?}`, and a
// restriction to set on a token. Checked here into what the account actions take; whether the owner holds the
// labels, and may have `admin`, is judged by the action against the owner's record.
import { badRequest } from '../domain/errors.ts';
import { hasUnseen } from '../domain/display-text.ts';
import { DURATION_HINT, parseDuration } from '../domain/duration.ts';
import { parseScopes } from '../domain/scopes.ts';
import { RESTRICTION_MAX } from '../domain/restriction.ts';
import type { LabelSet } from '../domain/labels.ts';
import type { NewToken } from '../store/tokens.ts';
import { labelsField } from './fields.ts';

export const TOKEN_NAME_MAX = 100;
export const TOKEN_TTL_MAX_DAYS = 3650;

export function checkTokenName(name: unknown): string {
  const trimmed = typeof name === 'string' ? name.trim() : '';
  if (trimmed === '' || trimmed.length > TOKEN_NAME_MAX || hasUnseen(trimmed)) {
    throw badRequest(
      `name: required, 1 to ${TOKEN_NAME_MAX} characters, no control, invisible or bidirectional-formatting characters`,
      'name',
    );
  }
  return trimmed;
}

/** Seconds of lifetime, or null for a token that never expires (ttl omitted or empty). */
export function checkTokenTtl(ttl: unknown): number | null {
  if (ttl === undefined || ttl === null || ttl === '') return null;
  const seconds = typeof ttl === 'string' ? parseDuration(ttl) : null;
  if (seconds === null) throw badRequest(`ttl: ${DURATION_HINT}, or empty for a token that never expires`, 'ttl');
  if (seconds > TOKEN_TTL_MAX_DAYS * 86400) throw badRequest(`ttl: at most ${TOKEN_TTL_MAX_DAYS}d`, 'ttl');
  return seconds;
}

/**
 * A label restriction: absent (undefined or null) means none, the owner's whole access; an array or a label string,
 * even an empty one, restricts to those labels, at most RESTRICTION_MAX of them.
 */
export function restrictionRequest(labels: unknown): LabelSet | null {
  if (labels === undefined || labels === null) return null;
  const restriction = labelsField(labels);
  if (restriction.length > RESTRICTION_MAX)
    throw badRequest(`labels: a restriction names at most ${RESTRICTION_MAX} labels (this one names ${restriction.length})`, 'labels');
  return restriction;
}

/** A new personal token; `scopes` omitted means `mcp`. */
export function tokenRequest(input: { name: unknown; ttl: unknown; labels: unknown; scopes: unknown }): NewToken {
  return {
    name: checkTokenName(input.name),
    ttlSeconds: checkTokenTtl(input.ttl),
    restriction: restrictionRequest(input.labels),
    scopes: parseScopes(input.scopes),
  };
}

// What every request reader shares: a field of a body (JSON, form or CLI flags) checked into its type, each refusal
// naming the field first.
import { badRequest } from '../domain/errors.ts';
import { LabelError, parseLabels, type LabelSet } from '../domain/labels.ts';

/** A request as it arrives: a JSON object, a form's fields or a command's flags. */
export type Body = Readonly<Record<string, unknown>>;

export function rejectUnknown(body: Body, known: readonly string[]): void {
  for (const key of Object.keys(body)) if (!known.includes(key)) throw badRequest(`${key}: unknown field`, key);
}

export function optionalString(body: Body, key: string): string | undefined {
  const v = body[key];
  if (v === undefined) return undefined;
  if (typeof v !== 'string') throw badRequest(`${key}: must be a string`, key);
  return v;
}

export function optionalBoolean(body: Body, key: string): boolean | undefined {
  const v = body[key];
  if (v === undefined) return undefined;
  if (typeof v !== 'boolean') throw badRequest(`${key}: must be true or false`, key);
  return v;
}

/** An ACL label string or an array of labels, into the canonical set. */
export function labelsField(input: unknown, field = 'labels'): LabelSet {
  if (input !== undefined && typeof input !== 'string' && !Array.isArray(input)) {
    throw badRequest('labels: give an ACL label string or an array of labels', field);
  }
  try {
    return parseLabels(input as string | readonly unknown[] | undefined);
  } catch (e) {
    if (e instanceof LabelError) throw badRequest(`${field}: ${e.message}`, field);
    throw e;
  }
}

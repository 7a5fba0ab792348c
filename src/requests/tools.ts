// A change to an upstream tool, prompt or app, as the admin JSON API asks for it: `{labels?, state?, fingerprint?}`.
// Labels are an ACL label string or an array (its own), or null (its upstream's); state is approved or disabled.
import { badRequest } from '../domain/errors.ts';
import type { LabelSet } from '../domain/labels.ts';
import { labelsField, rejectUnknown, type Body } from './fields.ts';

export interface ToolChange {
  /** undefined: unchanged; null: its upstream's */
  readonly labels?: LabelSet | null;
  readonly state?: 'approved' | 'disabled';
  /** with state approved: the fingerprint of the definition the admin reviewed; refused when it is no longer current */
  readonly fingerprint?: string;
}

export function toolChangeRequest(body: Body): ToolChange {
  rejectUnknown(body, ['labels', 'state', 'fingerprint']);
  const change: { labels?: LabelSet | null; state?: 'approved' | 'disabled'; fingerprint?: string } = {};
  if (body.labels !== undefined) change.labels = body.labels === null ? null : labelsField(body.labels);
  if (body.state !== undefined) {
    if (body.state !== 'approved' && body.state !== 'disabled') throw badRequest('state: approved or disabled', 'state');
    change.state = body.state;
  }
  if (body.fingerprint !== undefined) {
    if (typeof body.fingerprint !== 'string' || !/^[0-9a-f]{64}$/.test(body.fingerprint))
      throw badRequest('fingerprint: the 64 hex digits of the definition you reviewed', 'fingerprint');
    if (change.state !== 'approved') throw badRequest('fingerprint: only with state approved', 'fingerprint');
    change.fingerprint = body.fingerprint;
  }
  if (change.labels === undefined && change.state === undefined) throw badRequest('give labels, state or both');
  return change;
}

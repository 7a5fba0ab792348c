// A change to an upstream tool, as the admin JSON API asks for it: `{labels?, state?}`. Labels are an ACL label
// string or an array (the tool's own), or null (its upstream's); state is approved or disabled.
import { badRequest } from '../domain/errors.ts';
import type { LabelSet } from '../domain/labels.ts';
import { labelsField, rejectUnknown, type Body } from './fields.ts';

export interface ToolChange {
  /** undefined: unchanged; null: its upstream's */
  readonly labels?: LabelSet | null;
  readonly state?: 'approved' | 'disabled';
}

export function toolChangeRequest(body: Body): ToolChange {
  rejectUnknown(body, ['labels', 'state']);
  const change: { labels?: LabelSet | null; state?: 'approved' | 'disabled' } = {};
  if (body.labels !== undefined) change.labels = body.labels === null ? null : labelsField(body.labels);
  if (body.state !== undefined) {
    if (body.state !== 'approved' && body.state !== 'disabled') throw badRequest('state: approved or disabled', 'state');
    change.state = body.state;
  }
  if (change.labels === undefined && change.state === undefined) throw badRequest('give labels, state or both');
  return change;
}

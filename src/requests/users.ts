// User records as administrators and the CLI ask for them: `{uid, email, name?, labels?, admin?, password?}` to
// create, any of `{email, name, labels, admin, password}` to change. Checked here, once, into what the admin
// actions take; a password stays plaintext until the action hashes it.
import { badRequest } from '../domain/errors.ts';
import { hasUnseen, PERSON_NAME_MAX as NAME_MAX } from '../domain/display-text.ts';
import { passwordProblem } from '../domain/passwords.ts';
import { emailProblem, uidProblem } from '../domain/uid.ts';
import type { LabelSet } from '../domain/labels.ts';
import { labelsField, optionalBoolean, optionalString, rejectUnknown, type Body } from './fields.ts';

export interface NewUserRequest {
  readonly uid: string;
  readonly email: string;
  readonly name: string;
  readonly labels: LabelSet;
  readonly admin: boolean;
  /** null: no password (single sign-on only) */
  readonly password: string | null;
}

export interface UserChangeRequest {
  readonly email?: string;
  readonly name?: string;
  readonly labels?: LabelSet;
  readonly admin?: boolean;
  /** a new password, or null to remove it */
  readonly password?: string | null;
}

export function checkUid(uid: unknown): string {
  if (typeof uid !== 'string') throw badRequest('uid: required', 'uid');
  const problem = uidProblem(uid);
  if (problem) throw badRequest(`uid: ${problem}`, 'uid');
  return uid;
}

export function checkEmail(email: unknown): string {
  if (typeof email !== 'string') throw badRequest('email: required', 'email');
  const trimmed = email.trim();
  const problem = emailProblem(trimmed);
  if (problem) throw badRequest(`email: ${problem}`, 'email');
  return trimmed;
}

export function checkName(name: unknown): string {
  if (typeof name !== 'string') throw badRequest('name: must be text', 'name');
  const trimmed = name.trim();
  if (trimmed.length > NAME_MAX || hasUnseen(trimmed)) {
    throw badRequest(`name: at most ${NAME_MAX} characters, no control, invisible or bidirectional-formatting characters`, 'name');
  }
  return trimmed;
}

/** A password to set; null removes it (where a change allows that). */
export function checkPassword(password: unknown): string | null {
  if (password === null) return null;
  if (typeof password !== 'string') throw badRequest('password: must be a string, or null to remove it', 'password');
  const problem = passwordProblem(password);
  if (problem) throw badRequest(`password: ${problem}`, 'password');
  return password;
}

const USER_FIELDS = ['uid', 'email', 'name', 'labels', 'admin', 'password'];

/** A new user; an empty or missing password means none (single sign-on). */
export function newUserRequest(body: Body): NewUserRequest {
  rejectUnknown(body, USER_FIELDS);
  const uid = checkUid(body.uid);
  const email = optionalString(body, 'email');
  if (email === undefined) throw badRequest('email: required', 'email');
  return {
    uid,
    email: checkEmail(email),
    name: checkName(optionalString(body, 'name') ?? ''),
    labels: labelsField(body.labels ?? ''),
    admin: optionalBoolean(body, 'admin') ?? false,
    password: body.password === '' || body.password === undefined ? null : checkPassword(body.password),
  };
}

/** A change of the fields given; `password: null` removes the password. */
export function userChangeRequest(body: Body): UserChangeRequest {
  rejectUnknown(
    body,
    USER_FIELDS.filter((k) => k !== 'uid'),
  );
  const email = optionalString(body, 'email');
  const name = optionalString(body, 'name');
  const admin = optionalBoolean(body, 'admin');
  return {
    ...(email === undefined ? {} : { email: checkEmail(email) }),
    ...(name === undefined ? {} : { name: checkName(name) }),
    ...(body.labels === undefined ? {} : { labels: labelsField(body.labels) }),
    ...(admin === undefined ? {} : { admin }),
    ...(body.password === undefined ? {} : { password: checkPassword(body.password) }),
  };
}

// auth.header: people named by a trusted reverse proxy in request headers, vouched for by a shared secret.
import { isIP } from 'node:net';
import { normalizeIp } from '../../domain/addresses.ts';
import { secretFrom, type AuthContext, type Section, type Spec } from './section.ts';
import type { HeaderConfig } from '../types.ts';

export const HEADER_KEYS: Spec = {
  enabled: 'bool',
  user_header: 'header',
  email_header: 'header',
  name_header: 'header',
  groups_header: 'header',
  secret_header: 'header',
  shared_secret_env: 'env',
  trusted_proxy: 'text',
  jit: 'bool',
  default_acl: 'labels',
};

const HEADER_NAME = /^[A-Za-z0-9-]+$/;

/** Called only when header is enabled. */
export function readHeader(section: Section, context: AuthContext): HeaderConfig {
  const { problems } = context;
  const why = 'header is enabled';
  const headerName = (key: string, required: boolean): string | null => {
    const value = required ? section.required(key, why) : section.raw(key);
    if (value !== '' && !HEADER_NAME.test(value)) {
      problems.push(`${section.path(key)}: "${value}" is not a header name (letters, digits and -)`);
    }
    return value === '' ? null : value.toLowerCase();
  };
  const userHeader = headerName('user_header', true) ?? '';
  const emailHeader = headerName('email_header', true) ?? '';
  const nameHeader = headerName('name_header', false);
  const groupsHeader = headerName('groups_header', false);
  const secretHeader = headerName('secret_header', true) ?? '';
  const sharedSecret = secretFrom(section, 'shared_secret_env', why, context);
  if (sharedSecret !== null && context.mode === 'serve' && Buffer.byteLength(sharedSecret) < 16) {
    problems.push(
      `${section.path('shared_secret_env')}: the secret in ${section.raw('shared_secret_env')} is too short; use at least 16 bytes (better 32)`,
    );
  }
  const proxyText = section.required('trusted_proxy', why);
  const trustedProxies = proxyText.split(/[\s,]+/).filter((p) => p !== '');
  for (const p of trustedProxies) {
    if (isIP(p) === 0) problems.push(`${section.path('trusted_proxy')}: "${p}" is not an IP address`);
  }
  return {
    userHeader,
    emailHeader,
    nameHeader,
    groupsHeader,
    secretHeader,
    sharedSecret: Buffer.from(sharedSecret ?? ''),
    trustedProxies: trustedProxies.map(normalizeIp),
    jit: section.bool('jit'),
    defaultAcl: section.labels('default_acl'),
  };
}

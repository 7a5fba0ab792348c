// URL-valued keys of [auth]: identity providers' issuers, callback and audience URLs.
import { isLoopbackIssuerHost } from '../../domain/addresses.ts';
import type { Section } from './section.ts';

export function isHttpUrl(text: string): boolean {
  try {
    const u = new URL(text);
    return u.protocol === 'http:' || u.protocol === 'https:';
  } catch {
    return false;
  }
}

/** An identity provider's issuer: https, or plain http on loopback only (tests and local development). */
export function checkIssuer(section: Section, issuer: string, problems: string[]): void {
  if (issuer === '') return;
  if (!isHttpUrl(issuer)) problems.push(`${section.path('issuer')}: "${issuer}" is not an http(s) URL`);
  else if (new URL(issuer).protocol === 'http:' && !isLoopbackIssuerHost(new URL(issuer).hostname)) {
    problems.push(`${section.path('issuer')}: must be https:// (plain http is allowed only for a provider on loopback)`);
  }
}

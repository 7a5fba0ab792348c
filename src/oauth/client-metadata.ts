// Client ID Metadata Documents: a client whose client_id is an https URL publishes its metadata there. svc fetches
// it as an untrusted URL: https only, no redirects, at most 5 KB within 5 s, and only from a public address, the
// one it checked (the connection goes to that address, so a DNS answer cannot change between check and fetch).
import { lookup } from 'node:dns/promises';
import { request } from 'node:https';
import { BlockList, isIP } from 'node:net';
import { redirectUriProblem } from './rules.ts';
import { cleanClientName } from './names.ts';

export const METADATA_MAX_BYTES = 5 * 1024;
export const METADATA_TIMEOUT_MS = 5000;
export const METADATA_MAX_AGE_S = 86_400;

/** A document svc would not use, with the reason the person sees on the error page. */
export class MetadataRefused extends Error {}

/**
 * A document svc could not get: the host did not resolve or answer, or answered something other than 200. The
 * person is told only that (never why: the difference between a refused, reset or silent connection would let
 * anyone probe ports through svc); `detail` is for the server log.
 */
export class MetadataUnreachable extends Error {
  constructor(
    readonly host: string,
    readonly detail: string,
  ) {
    super(`the metadata document at ${host} could not be fetched`);
  }
}

export interface ClientMetadata {
  readonly name: string;
  readonly redirectUris: readonly string[];
  /** how long the copy may be used: the document's Cache-Control max-age, at most a day */
  readonly maxAgeSeconds: number;
}

// Loopback, private, link-local, shared, documentation, multicast and reserved ranges.
const NOT_PUBLIC = new BlockList();
for (const [net, bits] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.88.99.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const)
  NOT_PUBLIC.addSubnet(net, bits, 'ipv4');
// IPv6: besides its own local ranges, every form that embeds an IPv4 address (compatible, mapped, translated,
// NAT64, 6to4, Teredo), so a private IPv4 address cannot be reached through one of them.
for (const [net, bits] of [
  ['::', 96],
  ['::ffff:0:0', 96],
  ['::ffff:0:0:0', 96],
  ['64:ff9b::', 96],
  ['64:ff9b:1::', 48],
  ['100::', 64],
  ['2001::', 32],
  ['2001:2::', 48],
  ['2001:10::', 28],
  ['2001:20::', 28],
  ['2001:db8::', 32],
  ['2002::', 16],
  ['3fff::', 20],
  ['5f00::', 16],
  ['fc00::', 7],
  ['fe80::', 10],
  ['fec0::', 10],
  ['ff00::', 8],
] as const) {
  NOT_PUBLIC.addSubnet(net, bits, 'ipv6');
}

export function isPublicAddress(address: string): boolean {
  const family = isIP(address);
  return family !== 0 && !NOT_PUBLIC.check(address, family === 6 ? 'ipv6' : 'ipv4');
}

/** Whether a client_id is a metadata document URL: https with a path (the SEP's rule). */
export function isMetadataUrl(clientId: string): boolean {
  try {
    const u = new URL(clientId);
    return u.protocol === 'https:' && u.pathname !== '/' && u.hash === '' && u.username === '' && u.password === '';
  } catch {
    return false;
  }
}

export async function fetchClientMetadata(url: string, options: { allowPrivate: boolean }): Promise<ClientMetadata> {
  if (!isMetadataUrl(url) || url.length > 2000) throw new MetadataRefused('the client_id is not an https URL with a path');
  const target = new URL(url);
  const host = target.hostname.replace(/^\[|\]$/g, '');
  let addresses: { address: string; family: number }[];
  try {
    addresses = isIP(host) ? [{ address: host, family: isIP(host) }] : await lookup(host, { all: true, verbatim: true });
  } catch (e) {
    throw new MetadataUnreachable(target.host, `lookup failed: ${(e as NodeJS.ErrnoException).code ?? 'error'}`);
  }
  const checked = addresses[0];
  if (!checked) throw new MetadataUnreachable(target.host, 'no address');
  if (!options.allowPrivate && addresses.some((a) => !isPublicAddress(a.address))) {
    throw new MetadataRefused(
      `${target.host} resolves to a private or local address; svc fetches metadata documents only from public ones`,
    );
  }
  const { body, cacheControl } = await get(target, checked);
  let doc: Record<string, unknown>;
  try {
    doc = JSON.parse(body) as Record<string, unknown>;
  } catch {
    throw new MetadataRefused('the metadata document is not JSON');
  }
  if (doc === null || typeof doc !== 'object' || doc.client_id !== url)
    throw new MetadataRefused("the metadata document's client_id is not its own URL");
  const uris = doc.redirect_uris;
  if (!Array.isArray(uris) || uris.length === 0 || uris.length > 10 || uris.some((u) => redirectUriProblem(u) !== null)) {
    throw new MetadataRefused("the metadata document's redirect_uris are missing or not acceptable");
  }
  const method = doc.token_endpoint_auth_method ?? 'none';
  if (method !== 'none') throw new MetadataRefused('a metadata-document client must be public (token_endpoint_auth_method none)');
  if (doc.application_type !== undefined && doc.application_type !== 'native' && doc.application_type !== 'web') {
    throw new MetadataRefused("the metadata document's application_type is neither native nor web");
  }
  // The name is the app's claim: what cannot be shown plainly is dropped, and without a fit name the host speaks.
  const name = cleanClientName(doc.client_name) ?? target.host;
  const maxAge = /(?:^|,)\s*max-age=(\d+)/i.exec(cacheControl)?.[1];
  const noStore = /no-store|no-cache/i.test(cacheControl);
  return { name, redirectUris: uris as string[], maxAgeSeconds: noStore ? 0 : Math.min(Number(maxAge ?? 3600), METADATA_MAX_AGE_S) };
}

function get(target: URL, checked: { address: string; family: number }): Promise<{ body: string; cacheControl: string }> {
  const unreachable = (detail: string) => new MetadataUnreachable(target.host, detail);
  return new Promise((resolve, reject) => {
    const req = request(
      target,
      {
        method: 'GET',
        headers: { accept: 'application/json' },
        // Connect to the address that was checked; TLS still verifies the certificate for the URL's host.
        lookup: (_host, opts, cb) => {
          const options = opts as { all?: boolean };
          if (options.all) (cb as (e: null, a: { address: string; family: number }[]) => void)(null, [checked]);
          else (cb as (e: null, a: string, f: number) => void)(null, checked.address, checked.family);
        },
        timeout: METADATA_TIMEOUT_MS,
      },
      (res) => {
        if (res.statusCode !== 200) {
          res.resume();
          const status = res.statusCode ?? 0;
          reject(
            status >= 300 && status < 400
              ? new MetadataRefused('the metadata document redirects; svc does not follow redirects')
              : unreachable(`answered ${status}`),
          );
          return;
        }
        if (Number(res.headers['content-length'] ?? 0) > METADATA_MAX_BYTES) {
          req.destroy();
          reject(new MetadataRefused('the metadata document is larger than 5 KB'));
          return;
        }
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > METADATA_MAX_BYTES) {
            req.destroy();
            reject(new MetadataRefused('the metadata document is larger than 5 KB'));
            return;
          }
          chunks.push(chunk);
        });
        res.on('end', () =>
          resolve({ body: Buffer.concat(chunks).toString('utf8'), cacheControl: String(res.headers['cache-control'] ?? '') }),
        );
        res.on('error', (e) => reject(unreachable(`read failed: ${(e as NodeJS.ErrnoException).code ?? 'error'}`)));
      },
    );
    const deadline = setTimeout(() => {
      req.destroy();
      reject(unreachable('no answer within 5 s'));
    }, METADATA_TIMEOUT_MS);
    req.on('close', () => clearTimeout(deadline));
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (e) =>
      reject(e instanceof MetadataRefused ? e : unreachable(`connection failed: ${(e as NodeJS.ErrnoException).code ?? 'error'}`)),
    );
    req.end();
  });
}

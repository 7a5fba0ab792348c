// Identity assertions (CONTRACT §6.1, identity = jwt): a short-lived ES256 JWT that tells an upstream who is calling,
// signed with a key svc makes once and keeps in its database, sealed with a key derived from the session secret, so
// every instance signs with the same key and the JWKS (GET /.well-known/jwks.json) lists it.
import { calculateJwkThumbprint, exportJWK, generateKeyPair, importJWK, SignJWT, type JWK } from 'jose';
import type { Config, UpstreamConfig } from '../config/load.ts';
import type { Database } from '../db/open.ts';
import { seal, unseal } from '../domain/sealed.ts';
import { deriveKey, randomId } from '../domain/secrets.ts';
import { recordAudit } from '../store/audit.ts';
import { addSigningKey, currentSigningKey, hasSigningKey, type SigningKeyRow } from '../store/signing-keys.ts';

const PURPOSE = 'identity-assertion-signing-key';
/** An assertion is good for this long at most. */
export const ASSERTION_SECONDS = 60;
/** How often an instance looks for a key another instance (or svc keys rotate) made. */
const KEY_REFRESH_MS = 60_000;

/** A new signing key: its private JWK sealed for the database, its public JWK as the JWKS lists it. */
export async function newSigningKey(secret: Buffer): Promise<{ kid: string; privateSealed: string; publicJwk: Record<string, unknown> }> {
  const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
  const publicJwk = await exportJWK(publicKey);
  const kid = await calculateJwkThumbprint(publicJwk);
  const privateJwk = await exportJWK(privateKey);
  return {
    kid,
    privateSealed: seal(deriveKey(secret, PURPOSE), JSON.stringify(privateJwk)),
    publicJwk: { ...publicJwk, kid, alg: 'ES256', use: 'sig' },
  };
}

/** Whether `secret` opens a signing key; false when it was sealed under another session secret. */
export const opensSigningKey = (secret: Buffer, key: Pick<SigningKeyRow, 'privateSealed'>) =>
  unseal(deriveKey(secret, PURPOSE), key.privateSealed) !== null;

/**
 * Makes the first signing key when the database has none, and a new one when this secret cannot open the one that
 * signs (the session secret changed since it was made): that one is retired and stays in the JWKS for a day, as after
 * `svc keys rotate`, and the replacement is audited. Returns the kid it replaced, else null. Every instance may try;
 * each key made is valid, and of instances that find the same key closed to them one replaces it.
 */
export async function ensureSigningKey(database: Database, secret: Buffer): Promise<string | null> {
  const current = await currentSigningKey(database.db);
  if (current && opensSigningKey(secret, current)) return null;
  const key = await newSigningKey(secret);
  return database.write(async (tx) => {
    if (current === null) {
      if (!(await hasSigningKey(tx))) await addSigningKey(tx, key, database.now(), false);
      return null;
    }
    // Another instance replaced it first.
    if ((await currentSigningKey(tx))?.kid !== current.kid) return null;
    await addSigningKey(tx, key, database.now(), true);
    await recordAudit(tx, {
      actor: null,
      via: 'upstream',
      action: 'keys.rotate',
      target: key.kid,
      detail: { replaced: current.kid, reason: 'sealed under another session secret' },
    });
    return current.kid;
  });
}

/** Who the assertion names. */
export interface Subject {
  readonly uid: string;
  readonly email: string;
  readonly name: string;
  /** the caller's effective labels: the user's, narrowed by a token's restriction */
  readonly labels: readonly string[];
  /** a token's scopes; null for a session or the proxy */
  readonly scopes: readonly string[] | null;
  readonly via: string;
  /** the OAuth client the caller's token was issued to; null for a personal token, a session or the proxy */
  readonly clientId: string | null;
}

/** The audience of an upstream's assertions: its URL, or svc:upstream:NAME for a stdio upstream. */
export const audienceOf = (upstream: UpstreamConfig) =>
  upstream.transport.kind === 'http' ? upstream.transport.url : `svc:upstream:${upstream.name}`;

export class IdentitySigner {
  private key: { kid: string; privateKey: CryptoKey; readAt: number } | null = null;

  constructor(
    private readonly config: Config,
    private readonly database: Database,
    private readonly secret: Buffer,
  ) {}

  private async signingKey(): Promise<{ kid: string; privateKey: CryptoKey }> {
    if (this.key && Date.now() - this.key.readAt < KEY_REFRESH_MS) return this.key;
    const row = await currentSigningKey(this.database.db);
    if (!row) throw new Error('no identity signing key in the database; start svc serve once, or run svc keys rotate');
    if (this.key?.kid !== row.kid) {
      const jwk = unseal(deriveKey(this.secret, PURPOSE), row.privateSealed);
      if (jwk === null) throw new Error('the identity signing key was sealed with another session secret; run svc keys rotate');
      this.key = { kid: row.kid, privateKey: (await importJWK(JSON.parse(jwk) as JWK, 'ES256')) as CryptoKey, readAt: Date.now() };
    } else this.key.readAt = Date.now();
    return this.key;
  }

  /** An assertion for the upstream, and its `jti` (which the upstream call's span names: CONTRACT §8). */
  async sign(subject: Subject, upstream: UpstreamConfig): Promise<{ assertion: string; jti: string }> {
    const { kid, privateKey } = await this.signingKey();
    const jti = randomId(16);
    const assertion = await new SignJWT({
      email: subject.email,
      name: subject.name,
      labels: [...subject.labels],
      ...(subject.scopes === null ? {} : { scope: subject.scopes.join(' ') }),
      ...(subject.clientId === null ? {} : { client_id: subject.clientId }),
      via: subject.via,
    })
      .setProtectedHeader({ alg: 'ES256', kid, typ: 'JWT' })
      .setIssuer(this.config.server.baseUrl)
      .setAudience(audienceOf(upstream))
      .setSubject(subject.uid)
      .setIssuedAt()
      .setExpirationTime(`${ASSERTION_SECONDS}s`)
      .setJti(jti)
      .sign(privateKey);
    return { assertion, jti };
  }
}

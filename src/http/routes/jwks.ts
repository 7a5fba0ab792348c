// GET /.well-known/jwks.json: the public keys of svc's identity assertions (CONTRACT §6.1), for upstreams to verify
// them: the key that signs now and those retired within the last day.
import { Hono } from 'hono';
import type { Env, Services } from '../context.ts';
import { READ, policyFor } from '../policy.ts';
import { publishedSigningKeys } from '../../store/signing-keys.ts';
import { RETIRED_KEYS_PUBLISHED_MS } from '../../admin/keys.ts';

export function jwksRoutes(services: Services): Hono<Env> {
  const app = new Hono<Env>();
  const policy = policyFor(services);
  app.get('/.well-known/jwks.json', policy(READ), async (c) => {
    const keys = await publishedSigningKeys(services.database.db, services.database.now() - RETIRED_KEYS_PUBLISHED_MS);
    return c.json({ keys: keys.map((k) => k.publicJwk) });
  });
  return app;
}

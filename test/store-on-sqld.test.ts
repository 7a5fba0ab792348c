// The suites that decide who may do what (the sign-in throttle and sessions, OAuth grants and refresh-token rotation,
// OAuth expiry by the server's clock, label-scoped tokens, scopes, enterprise assertions and their replay
// across instances, /mcp visibility in both protocol eras, administration, the token cap, the registration flood, upstream tool review and what a hostile upstream cannot do, prompts and apps reviewed like tools, people's own upstream accounts and whose listing decides what, and what a changed session secret leaves of them) run a second time here with every test server on a real
// sqld of its own, reached over its WebSocket (ws://, what docs/deploying.md recommends; the HTTP path has the
// durability, multi-instance, visibility-table and outage tests). test/helpers/server.ts reads SVC_TEST_DATABASE
// when it is first imported, which is below.
import { describe } from 'node:test';

process.env.SVC_TEST_DATABASE = 'sqld-ws';

describe('on sqld', async () => {
  await import('./login.test.ts');
  await import('./oauth.test.ts');
  await import('./oauth-grants.test.ts');
  await import('./token-restrictions.test.ts');
  await import('./scopes.test.ts');
  await import('./enterprise.test.ts');
  await import('./mcp.test.ts');
  await import('./mcp-eras.test.ts');
  await import('./admin.test.ts');
  await import('./user-limits.test.ts');
  await import('./client-registration.test.ts');
  await import('./upstreams.test.ts');
  await import('./upstream-hostile.test.ts');
  await import('./reviewed-prompts.test.ts');
  await import('./upstream-accounts.test.ts');
  await import('./upstream-accounts-listings.test.ts');
  await import('./secret-change.test.ts');
});

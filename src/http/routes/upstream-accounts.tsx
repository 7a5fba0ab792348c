// A person's own connection to an `auth = oauth` upstream (CONTRACT §6.2): Connect sends their browser to the
// upstream's authorization server, the callback brings it back, Disconnect ends it; svc's client metadata document
// for the upstream (CIMD). Only a signed-in browser or the proxy connects, and only its own account.
import { Hono } from 'hono';
import type { UpstreamConfig } from '../../config/load.ts';
import { AppError } from '../../domain/errors.ts';
import { mayConnect } from '../../upstream/access.ts';
import type { Person, UpstreamAccounts } from '../../upstream/accounts.ts';
import { clientMetadata } from '../../upstream/client-document.ts';
import type { Env, Services } from '../context.ts';
import { nonceOf, STATUS } from '../context.ts';
import { requireCaller, type SignedCtx } from '../guards.ts';
import { MessagePage } from '../pages/message.tsx';
import { Layout } from '../pages/layout.tsx';
import { CHANGE, READ, policyFor } from '../policy.ts';

function ConfirmConnect(p: { nonce: string; upstream: string }) {
  return (
    <Layout title={`Connect ${p.upstream}`} nonce={p.nonce}>
      <h1>Connect your account at {p.upstream}?</h1>
      <p>Your agents' calls to {p.upstream} will act as the account you connect there.</p>
      <form method="post" action={`/upstreams/${p.upstream}/connect`}>
        <button type="submit">Connect</button> <a href="/">Not now</a>
      </form>
    </Layout>
  );
}

/**
 * The confirmation page for a person who may connect. Its answer redirects to the upstream's authorization server, and
 * browsers hold a form's redirects to the page's form-action: that server's origin is allowed on this page. Not found,
 * the page keeps svc's alone, and the confirmation is answered with why (as Connect is).
 */
async function confirmation(c: SignedCtx, accounts: UpstreamAccounts, upstream: UpstreamConfig) {
  const server = await accounts.clients.party(upstream).then(
    (p) => p.as.authorization_endpoint,
    () => undefined,
  );
  if (server) c.set('formTarget', server);
  return c.html(<ConfirmConnect nonce={nonceOf(c)} upstream={upstream.name} />);
}

export function upstreamAccountRoutes(services: Services, accounts: UpstreamAccounts): Hono<Env> {
  const { config } = services;
  const app = new Hono<Env>();
  const policy = policyFor(services);
  const person = () => requireCaller({ page: true, via: ['session', 'header'] });

  /** The upstream the path names, when this person may connect to it; the same 404 otherwise. */
  const upstreamFor = (c: SignedCtx): UpstreamConfig => {
    const upstream = accounts.upstream(c.req.param('name') ?? '');
    const user = c.var.principal.user;
    if (!upstream || !mayConnect(upstream, { labels: user.labels, restriction: null }))
      throw new AppError('not_found', 'no such upstream to connect to');
    return upstream;
  };
  const personOf = (c: SignedCtx): Person => ({
    id: c.var.principal.user.id,
    uid: c.var.principal.user.uid,
    sessionId: c.var.principal.via === 'session' ? (c.var.principal.sessionId ?? null) : null,
    actor: c.var.actor,
  });
  /** A refusal shown to the person as a page, with the way back to their tokens. */
  const refused = (c: SignedCtx, e: unknown) => {
    if (!(e instanceof AppError)) throw e;
    return c.html(
      <MessagePage nonce={nonceOf(c)} title="Not connected" message={e.message} link={{ href: '/', text: 'Back to your tokens' }} />,
      STATUS[e.code],
    );
  };

  const connect = async (c: SignedCtx) => {
    try {
      return c.redirect(await accounts.startConnect(personOf(c), upstreamFor(c)), 302);
    } catch (e) {
      return refused(c, e);
    }
  };
  // A link followed from another site does not start a connection by itself: the person confirms it here (a
  // connection started behind their back could connect an account they did not choose).
  app.get('/upstreams/:name/connect', policy(READ), person(), async (c) => {
    const from = c.req.header('sec-fetch-site');
    if (from !== 'cross-site' && from !== 'same-site') return connect(c);
    return confirmation(c, accounts, upstreamFor(c));
  });
  app.post('/upstreams/:name/connect', policy(CHANGE), person(), connect);

  app.get('/upstreams/:name/callback', policy(READ), person(), async (c) => {
    try {
      const upstream = upstreamFor(c);
      await accounts.finishConnect(personOf(c), upstream, new URL(c.req.url, config.server.baseUrl));
      return c.redirect(`/?connected=${encodeURIComponent(upstream.name)}`, 303);
    } catch (e) {
      return refused(c, e);
    }
  });

  // Disconnect stays open to someone who lost access to the upstream since: their own account is theirs to end.
  app.post('/upstreams/:name/disconnect', policy(CHANGE), person(), async (c) => {
    const upstream = accounts.upstream(c.req.param('name'));
    if (!upstream) throw new AppError('not_found', 'no such upstream to disconnect from');
    await accounts.disconnect(personOf(c), upstream);
    return c.redirect('/', 303);
  });

  // svc's client metadata document at this upstream's authorization server: public, as CIMD requires.
  app.get('/upstreams/:name/client.json', policy(READ), (c) => {
    const upstream = accounts.upstream(c.req.param('name'));
    if (!upstream || upstream.oauth?.clientId !== null) throw new AppError('not_found', 'no such client metadata document');
    return c.json(clientMetadata(config, upstream), 200, { 'Cache-Control': 'max-age=300' });
  });

  return app;
}

// `svc oauth client add|list|remove`: OAuth clients an admin registers ahead (a fixed client_id, an optional
// secret shown once), beside those that register themselves.
import { type Command, withDatabase, str, flag, cliActor } from './command.ts';
import { UsageError } from './errors.ts';
import { listClients } from '../store/oauth-clients.ts';
import { addStaticClient, removeClientAs } from '../admin/actions.ts';
import { redirectUriProblem } from '../oauth/rules.ts';
import { clientNameProblem } from '../oauth/names.ts';
import { mintClientSecret } from '../domain/secrets.ts';
import { badRequest, notFound } from '../domain/errors.ts';
import { iso } from '../domain/clock.ts';

export const oauthCommands: Command[] = [
  {
    name: ['oauth', 'client', 'add'],
    usage: 'oauth client add NAME --redirect-uri URI [--redirect-uri URI …] [--id ID] [--secret]',
    summary: 'register an OAuth client ahead (prints its client_id, and a secret once)',
    help: `Registers an OAuth client with a fixed client_id. Without --secret it is a public client (PKCE only).
Options:
  --redirect-uri URI   where svc may send the browser back (repeat for several); https, loopback http or an app scheme
  --id ID              the client_id to use (default: made up, oc_…)
  --secret             make it a confidential client: a secret is printed once (client_secret_basic or _post)`,
    positionals: ['NAME'],
    options: { 'redirect-uri': { type: 'string', multiple: true }, id: { type: 'string' }, secret: { type: 'boolean' } },
    configMode: 'data',
    async run(ctx) {
      const uris = (ctx.values['redirect-uri'] as string[] | undefined) ?? [];
      if (uris.length === 0) throw new UsageError('give at least one --redirect-uri');
      for (const uri of uris) {
        const problem = redirectUriProblem(uri);
        if (problem) throw badRequest(`--redirect-uri: ${problem}`);
      }
      const name = ctx.positionals[0]!.trim();
      // An administrator may name a client after svc (it is theirs), but never hide characters in the name.
      const problem = clientNameProblem(name, { mayNameSvc: true });
      if (problem) throw badRequest(`NAME: ${problem}`);
      const id = str(ctx, 'id');
      if (id !== undefined && !/^[A-Za-z0-9._:-]{1,100}$/.test(id)) throw badRequest('--id: 1 to 100 characters of A-Z a-z 0-9 . _ : -');
      const secret = flag(ctx, 'secret') ? mintClientSecret() : null;
      const client = await withDatabase(ctx.config(), (database) =>
        addStaticClient(database, cliActor(), { ...(id ? { id } : {}), name, redirectUris: uris, secret }),
      );
      ctx.io.out(`client_id: ${client.id}`);
      if (secret) ctx.io.out(`client_secret: ${secret}   (shown once)`);
      return 0;
    },
  },
  {
    name: ['oauth', 'client', 'list'],
    usage: 'oauth client list [--json]',
    summary: 'list OAuth clients',
    help: 'Lists OAuth clients: registered ahead (static), self-registered (dynamic) and by metadata document.',
    positionals: [],
    options: { json: { type: 'boolean' } },
    configMode: 'data',
    async run(ctx) {
      const clients = await withDatabase(ctx.config(), ({ db }) => listClients(db));
      const rows = clients.map((c) => ({
        client_id: c.id,
        kind: c.kind,
        name: c.name,
        redirect_uris: c.redirectUris,
        confidential: c.secretHash !== null,
        created_at: iso(c.createdAt),
        last_used_at: iso(c.lastUsedAt),
      }));
      if (flag(ctx, 'json')) ctx.io.out(JSON.stringify(rows, null, 2));
      else if (rows.length === 0) ctx.io.out('no OAuth clients');
      else for (const r of rows) ctx.io.out(`${r.client_id}\t${r.kind}\t${r.name}\t${r.redirect_uris.join(' ')}`);
      return 0;
    },
  },
  {
    name: ['oauth', 'client', 'remove'],
    usage: 'oauth client remove CLIENT_ID',
    summary: 'remove an OAuth client and end its grants',
    help: 'Removes the client; every grant to it ends, with its tokens, at once.',
    positionals: ['CLIENT_ID'],
    options: {},
    configMode: 'data',
    async run(ctx) {
      const removed = await withDatabase(ctx.config(), (database) => removeClientAs(database, cliActor(), ctx.positionals[0]!));
      if (!removed) throw notFound(`no OAuth client "${ctx.positionals[0]}"`);
      ctx.io.out(`removed OAuth client ${ctx.positionals[0]}; its grants and tokens ended`);
      return 0;
    },
  },
];

import { type Command, withDatabase, str, cliActor } from './command.ts';
import { createPersonalToken } from '../account/actions.ts';
import { UsageError } from './errors.ts';
import { tokenRequest } from '../requests/tokens.ts';
import { SCOPES, SCOPE_MEANING } from '../domain/scopes.ts';

export const tokenCommands: Command[] = [
  {
    name: ['token', 'create'],
    usage: 'token create UID --name N [--ttl D] [--labels L] [--scopes S]',
    summary: 'mint a personal access token and print it once',
    help: `Mints a token for UID and prints it once on standard output (for bootstrap and automation).\nOptions:\n  --name N     what the token is for (required)\n  --ttl D      lifetime such as 90d; omitted, the token never expires\n  --labels L   restrict it to these labels ("finance, reports"; "" for unlabelled documents only);\n               it never sees more than its owner\n  --scopes S   what it may do, comma separated (default mcp):\n${SCOPES.map((s) => `                 ${s}: ${SCOPE_MEANING[s]}`).join('\n')}\n               admin only for an administrator's token without --labels`,
    positionals: ['UID'],
    options: { name: { type: 'string' }, ttl: { type: 'string' }, labels: { type: 'string' }, scopes: { type: 'string' } },
    configMode: 'data',
    async run(ctx) {
      const name = str(ctx, 'name');
      if (name === undefined) throw new UsageError('--name is required');
      const config = ctx.config();
      const created = await withDatabase(config, (database) =>
        createPersonalToken(
          database,
          cliActor(),
          ctx.positionals[0]!,
          tokenRequest({ name, ttl: str(ctx, 'ttl'), labels: str(ctx, 'labels') ?? null, scopes: str(ctx, 'scopes') }),
          config.auth.token,
        ),
      );
      ctx.io.out(created.token);
      return 0;
    },
  },
];

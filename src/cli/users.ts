import { type Command, type CommandContext, withDatabase, str, flag, passwordFromStdin, cliActor } from './command.ts';
import { listUsers } from '../store/users.ts';
import { createUserAs, updateUserAs, adminRemoveUser } from '../admin/actions.ts';
import { checkPassword, newUserRequest, userChangeRequest } from '../requests/users.ts';
import { UsageError } from './errors.ts';
import { userJson } from '../wire/json.ts';

/** The password given on standard input, checked. */
async function readPassword(ctx: CommandContext): Promise<string> {
  return checkPassword(await passwordFromStdin(ctx.io))!;
}

export const userCommands: Command[] = [
  {
    name: ['user', 'add'],
    usage: 'user add UID --email E [--name N] [--labels L] [--admin] [--password-stdin]',
    summary: 'create a user',
    help: `Creates a user. Without --password-stdin the user has no password and signs in only through single sign-on.
Options:
  --email E           email address (required)
  --name N            display name
  --labels L          ACL labels, separated by commas or spaces ("eng, finance")
  --admin             may use /admin
  --password-stdin    read the password from standard input (never from the command line)`,
    positionals: ['UID'],
    options: {
      email: { type: 'string' },
      name: { type: 'string' },
      labels: { type: 'string' },
      admin: { type: 'boolean' },
      'password-stdin': { type: 'boolean' },
    },
    configMode: 'data',
    async run(ctx) {
      const email = str(ctx, 'email');
      if (email === undefined) throw new UsageError('--email is required');
      const config = ctx.config();
      const request = newUserRequest({
        uid: ctx.positionals[0]!,
        email,
        name: str(ctx, 'name') ?? '',
        labels: str(ctx, 'labels') ?? '',
        admin: flag(ctx, 'admin') ?? false,
        password: flag(ctx, 'password-stdin') ? await readPassword(ctx) : null,
      });
      const user = await withDatabase(config, (database) => createUserAs(database, cliActor(), request));
      ctx.io.out(
        `created user ${user.uid}${user.admin ? ' (admin)' : ''}${user.labels.length ? ` with labels ${user.labels.join(',')}` : ''}`,
      );
      return 0;
    },
  },
  {
    name: ['user', 'set'],
    usage: 'user set UID [--email E] [--name N] [--labels L] [--admin|--no-admin] [--password-stdin|--no-password]',
    summary: 'change a user',
    help: `Changes the given fields of a user; others stay as they are.
Options:
  --email E, --name N, --labels L    new values (--labels replaces all labels; --labels "" removes them)
  --admin / --no-admin               grant or take the admin flag
  --password-stdin                   set the password from standard input
  --no-password                      remove the password (single sign-on only from then on)`,
    positionals: ['UID'],
    options: {
      email: { type: 'string' },
      name: { type: 'string' },
      labels: { type: 'string' },
      admin: { type: 'boolean' },
      'password-stdin': { type: 'boolean' },
      password: { type: 'boolean' },
    },
    configMode: 'data',
    async run(ctx) {
      if (flag(ctx, 'password-stdin') && flag(ctx, 'password') === false)
        throw new UsageError('give --password-stdin or --no-password, not both');
      if (flag(ctx, 'password') === true) throw new UsageError('passwords are read with --password-stdin, never from the command line');
      const body: Record<string, unknown> = {};
      for (const key of ['email', 'name', 'labels'] as const) if (str(ctx, key) !== undefined) body[key] = str(ctx, key);
      if (flag(ctx, 'admin') !== undefined) body.admin = flag(ctx, 'admin');
      if (flag(ctx, 'password') === false) body.password = null;
      const config = ctx.config();
      if (flag(ctx, 'password-stdin')) body.password = await readPassword(ctx);
      if (Object.keys(body).length === 0) throw new UsageError('nothing to change; see svc user set --help');
      const change = userChangeRequest(body);
      const user = await withDatabase(config, (database) => updateUserAs(database, cliActor(), ctx.positionals[0]!, change));
      ctx.io.out(`changed user ${user.uid}`);
      return 0;
    },
  },
  {
    name: ['user', 'remove'],
    usage: 'user remove UID',
    summary: 'remove a user, its sessions and tokens',
    help: 'Removes a user with its sessions and tokens at once. The uid stays reserved forever.',
    positionals: ['UID'],
    options: {},
    configMode: 'data',
    async run(ctx) {
      const accounts = await withDatabase(ctx.config(), (database) => adminRemoveUser(database, cliActor(), ctx.positionals[0]!));
      ctx.io.out(`removed user ${ctx.positionals[0]} (the uid stays reserved)`);
      // The command line does not read the session secret, so it cannot open the tokens: svc serve revokes them.
      if (accounts.length > 0)
        ctx.io.out(
          `deleted the user's connections to ${[...new Set(accounts.map((a) => a.upstream))].join(', ')}; svc serve revokes them at those servers within a minute`,
        );
      return 0;
    },
  },
  {
    name: ['user', 'list'],
    usage: 'user list [--json]',
    summary: 'list users',
    help: 'Lists users. --json prints an array of {uid, email, name, labels, admin, has_password, created_at}.',
    positionals: [],
    options: { json: { type: 'boolean' } },
    configMode: 'data',
    async run(ctx) {
      const users = await withDatabase(ctx.config(), ({ db }) => listUsers(db));
      if (flag(ctx, 'json')) {
        ctx.io.out(
          JSON.stringify(
            users.map((u) => userJson(u)),
            null,
            2,
          ),
        );
        return 0;
      }
      if (users.length === 0) ctx.io.out('no users');
      for (const u of users) {
        ctx.io.out(
          `${u.uid}\t${u.email}\t${u.admin ? 'admin' : '-'}\t${u.hasPassword ? 'password' : 'no password'}\t${u.labels.join(',') || '(no labels)'}`,
        );
      }
      return 0;
    },
  },
];

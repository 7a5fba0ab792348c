// svc keys rotate (CONTRACT §6.1).
import { type Command, withDatabase, cliActor } from './command.ts';
import { UsageError } from './errors.ts';
import { rotateSigningKeyAs } from '../admin/keys.ts';
import { newSigningKey } from '../upstream/identity.ts';

export const keyCommands: Command[] = [
  {
    name: ['keys', 'rotate'],
    usage: 'keys rotate',
    summary: 'a new identity-assertion signing key',
    help: 'Makes a new key to sign the identity assertions svc sends upstreams (identity = jwt) and retires the one\nin use; the retired key stays in /.well-known/jwks.json for 24 hours. Reads the session secret, which seals the key.',
    positionals: [],
    options: {},
    configMode: 'serve',
    async run(ctx) {
      const config = ctx.config();
      if (!config.auth.session) throw new UsageError('svc keys rotate needs [auth] session: its secret seals the signing key');
      const key = await newSigningKey(config.auth.session.secret);
      await withDatabase(config, (database) => rotateSigningKeyAs(database, cliActor(), key));
      ctx.io.out(`signing key ${key.kid} signs from now on; the previous one stays published for 24 hours`);
      return 0;
    },
  },
];

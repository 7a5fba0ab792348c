// `npm start`: a working svc in one step for a newcomer. Keeps everything in a git-ignored data folder
// (data/, or $SVC_DATA_DIR), so running it again keeps what the first run created.
//   PORT            port to listen on (default 8080)
//   SVC_DATA_DIR    where the config and database live (default ./data)
//   SVC_SESSION_SECRET  session secret; without it one is generated for this run
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { randomBytes } from 'node:crypto';
import { loadConfig, ConfigError, type Config } from '../src/config/load.ts';
import { openDatabase } from '../src/db/open.ts';
import { createUser, findUser } from '../src/store/users.ts';
import { createToken } from '../src/store/tokens.ts';
import { readMarkdownDir } from '../src/requests/markdown-dir.ts';
import { putItems } from '../src/store/items.ts';
import { tokenRequest } from '../src/requests/tokens.ts';
import { hashPassword } from '../src/auth/passwords.ts';
import { startServer } from '../src/server.ts';
import { createLogger } from '../src/log.ts';
import { mcpClientConfig } from '../src/mcp/client-config.ts';

const root = resolve(import.meta.dirname, '..');
const dataDir = resolve(process.env.SVC_DATA_DIR ?? join(root, 'data'));
const port = process.env.PORT ?? '8080';
const configPath = join(dataDir, 'svc.ini');
const say = (line = '') => process.stdout.write(`${line}\n`);

mkdirSync(dataDir, { recursive: true, mode: 0o700 });
if (!existsSync(configPath)) {
  const example = readFileSync(join(root, 'svc.ini.example'), 'utf8');
  writeFileSync(configPath, example.replace(/^database = .*$/m, `database = file:${join(dataDir, 'svc.db')}`), { mode: 0o600 });
  say(`svc: wrote ${configPath} from svc.ini.example`);
}
// The listen address comes from PORT on every run; the file on disk keeps its own.
const configText = readFileSync(configPath, 'utf8')
  .replace(/^listen = .*$/m, `listen = 127.0.0.1:${port}`)
  .replace(/^base_url = .*$/m, `base_url = http://127.0.0.1:${port}`);

const env = { ...process.env };
if (!env.SVC_SESSION_SECRET) {
  env.SVC_SESSION_SECRET = randomBytes(48).toString('base64url');
  say('svc: warning: SVC_SESSION_SECRET is not set; using a secret made for this run, so sign-ins end when it stops.');
}

let config: Config;
try {
  config = loadConfig(configText, env, { mode: 'serve' });
} catch (e) {
  if (e instanceof ConfigError) for (const p of e.problems) process.stderr.write(`${p}\n`);
  process.exit(78);
}

const database = await openDatabase(config.server.database, config.server.databaseToken);
await database.migrate();
let token: string | null = null;
let password: string | null = null;
if (!(await findUser(database.db, 'admin'))) {
  password = randomBytes(12).toString('base64url');
  const passwordHash = await hashPassword(password);
  token = await database.write(async (tx) => {
    const admin = await createUser(tx, {
      uid: 'admin',
      email: 'admin@example.com',
      name: 'Administrator',
      labels: ['eng', 'finance'],
      admin: true,
      passwordHash,
    });
    const request = tokenRequest({ name: 'quickstart', ttl: undefined, labels: null, scopes: undefined });
    return (await createToken(tx, admin.id, request)).token;
  });
}
const examples = readMarkdownDir(join(root, 'examples', 'items'));
const imported = await database.write((tx) => putItems(tx, examples));
database.close();

const running = await startServer(config, createLogger());
const base = config.server.baseUrl;
say();
say(`svc is running at ${base}/  (${imported.length} example items; data in ${dataDir})`);
if (password) {
  say(`Sign in as "admin" with password: ${password}`);
  say('This password is shown once. Change it later with:');
} else {
  say('The admin user exists from an earlier run. Reset its password with:');
}
say(`  npm run -s svc -- user set admin --password-stdin --config ${configPath}`);
say();
if (config.auth.oauth) {
  say(`Clients that connect by URL alone (claude.ai, ChatGPT, Claude Code, VS Code): ${base}/oauth/mcp`);
  say('  they send you to sign in here and ask for your consent.');
  say();
}
say('MCP client configuration with a token (Claude Code, VS Code, Cursor style):');
say(mcpClientConfig(base, token ?? '<create a token on the token page>'));
if (token) say('(that token is shown once; manage tokens on the token page)');
say();
say('Stop with Ctrl-C.');

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => void running.stop().then(() => process.exit(0)));
}

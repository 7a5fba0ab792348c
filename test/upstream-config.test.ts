// [upstream NAME] sections (CONTRACT §6.1): what a good section becomes, and a refusal naming the key for every
// way a section can be wrong, through loadConfig and through `svc check` / `svc serve` as processes.
import { test, describe, before, after } from 'node:test';
import { createHash } from 'node:crypto';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { loadConfig, ConfigError, type Config } from '../src/config/load.ts';
import { splitCommand } from '../src/config/upstream.ts';
import { listening } from './helpers/wait.ts';
import { createWorkspace, type Workspace } from './helpers/workspace.ts';

const BASE = `[server]
listen = 127.0.0.1:8080
base_url = http://127.0.0.1:8080
database = file:svc.db
[auth]
session
    cookie_name svc_session
    ttl 24h
    secret_env S
token
    enabled true
`;
const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
const ENV = { S: 'x'.repeat(32), TRACKER_TOKEN: 'tracker-service-credential' };

function load(upstreams: string, env: Record<string, string> = ENV, mode: 'serve' | 'data' = 'serve'): Config {
  return loadConfig(`${BASE}${upstreams}`, env, { mode });
}

function problems(upstreams: string, env: Record<string, string> = ENV): string[] {
  try {
    load(upstreams, env);
  } catch (e) {
    if (e instanceof ConfigError) return e.problems.map((p) => p.replace(/^svc: config: /, ''));
    throw e;
  }
  assert.fail('expected a configuration error');
}

/** The one problem a section gives, which must start with `key`. */
function refused(section: string, key: string, env?: Record<string, string>): string {
  const found = problems(section, env);
  assert.equal(found.length, 1, `one problem: ${JSON.stringify(found)}`);
  assert.ok(found[0]!.startsWith(key), `"${found[0]}" names ${key}`);
  return found[0]!;
}

describe('[upstream NAME]', () => {
  test('an HTTP and a stdio upstream with every key become frozen, typed values', () => {
    const config = load(`
[upstream tracker]
url = https://tracker.internal/mcp   ; the issue tracker
labels = eng, ops
review = auto
tools = create_issue search_issues
token_env = TRACKER_TOKEN
identity = jwt
timeout = 10s
refresh = 2m
rate = 120/m
expose = tools resources

[upstream files]
command = npx -y "@modelcontextprotocol/server-filesystem" '/srv/my docs'
env.ROOT_DIR = /srv/docs   ; stdio only
env.MODE = read-only
isolation = user
`);
    assert.equal(config.upstreams.length, 2);
    const [tracker, files] = config.upstreams;
    assert.deepEqual(tracker, {
      name: 'tracker',
      transport: { kind: 'http', url: 'https://tracker.internal/mcp' },
      server: sha256(JSON.stringify(['url', 'https://tracker.internal/mcp'])),
      labels: ['eng', 'ops'],
      review: 'auto',
      tools: ['create_issue', 'search_issues'],
      token: 'tracker-service-credential',
      identity: 'jwt',
      protocol: 'auto',
      expose: { tools: true, prompts: false, resources: true },
      timeoutMs: 10_000,
      refreshMs: 120_000,
      rate: { calls: 120, perSeconds: 60 },
      oauth: null,
    });
    assert.deepEqual(files, {
      name: 'files',
      transport: {
        kind: 'stdio',
        command: 'npx',
        args: ['-y', '@modelcontextprotocol/server-filesystem', '/srv/my docs'],
        env: { ROOT_DIR: '/srv/docs', MODE: 'read-only' },
        isolation: 'user',
        writable: [],
      },
      server: sha256(JSON.stringify(['command', 'npx', '-y', '@modelcontextprotocol/server-filesystem', '/srv/my docs'])),
      labels: [],
      review: 'admin',
      tools: null,
      token: null,
      identity: 'none',
      protocol: 'auto',
      expose: { tools: true, prompts: true, resources: true },
      timeoutMs: 30_000,
      refreshMs: 300_000,
      rate: null,
      oauth: null,
    });
    assert.ok(Object.isFrozen(files!.transport));
    assert.deepEqual(load('').upstreams, [], 'no section: no upstream');
  });

  test('the data commands check the section without reading token_env', () => {
    const [tracker] = load(
      '[upstream tracker]\nurl = https://t.internal/mcp\ntoken_env = UNSET_HERE\n',
      { S: 'x'.repeat(32) },
      'data',
    ).upstreams;
    assert.equal(tracker!.token, null);
  });

  test('names: a-z 0-9 and -, starting with a letter, at most 32; never twice; never unnamed', () => {
    for (const bad of ['Tracker', '1tracker', 'tr_acker', 'a'.repeat(33), 'tracker.x']) {
      refused(`[upstream ${bad}]\nurl = https://t.internal/mcp\n`, `[upstream ${bad.slice(0, 40)}]`);
    }
    assert.equal(load(`[upstream ${'a'.repeat(32)}]\nurl = https://t.internal/mcp\n`).upstreams.length, 1);
    refused('[upstream]\nurl = https://t.internal/mcp\n', '[upstream]');
    refused('[upstream t]\nurl = https://a.internal/mcp\n[upstream t]\nurl = https://b.internal/mcp\n', 'upstream t: section given twice');
  });

  test('url and command: exactly one', () => {
    refused('[upstream t]\nlabels = eng\n', 'upstream.t: give exactly one of url');
    refused('[upstream t]\nurl = https://t.internal/mcp\ncommand = fs-mcp\n', 'upstream.t: give exactly one of url');
  });

  test('url: a URL, http(s) only, no credentials in it, plain http only on loopback or with insecure_http', () => {
    refused('[upstream t]\nurl = not a url\n', 'upstream.t.url:');
    refused('[upstream t]\nurl = ftp://t.internal/mcp\n', 'upstream.t.url:');
    refused('[upstream t]\nurl = https://user:pw@t.internal/mcp\n', 'upstream.t.url:');
    const clear = refused('[upstream t]\nurl = http://t.internal/mcp\n', 'upstream.t.url:');
    assert.match(clear, /insecure_http = true/);
    assert.equal(load('[upstream t]\nurl = http://t.internal/mcp\ninsecure_http = true\n').upstreams.length, 1);
    for (const host of ['127.0.0.1:9000', 'localhost:9000', '[::1]:9000']) {
      assert.equal(load(`[upstream t]\nurl = http://${host}/mcp\n`).upstreams.length, 1, host);
    }
    refused('[upstream t]\nurl = http://127.0.0.1:9/mcp\ninsecure_http = maybe\n', 'upstream.t.insecure_http:');
    refused('[upstream t]\ncommand = fs-mcp\ninsecure_http = true\n', 'upstream.t.insecure_http:');
  });

  test('command: split like a shell without expansion; an unclosed quote is refused', () => {
    assert.deepEqual(splitCommand(`a  "b c" 'd "e"' f''g ""`), ['a', 'b c', 'd "e"', 'fg', '']);
    assert.deepEqual(splitCommand('fs-mcp $HOME `x`'), ['fs-mcp', '$HOME', '`x`']);
    refused('[upstream t]\ncommand = fs-mcp "/srv/docs\n', 'upstream.t.command:');
  });

  test('command and env.* are read as written: a ; or # inside a word or in quotes is kept, one after a space is a comment', () => {
    const [t] = load(`[upstream t]
command = sh -c "echo a; echo b #1" --x=a;b#c   ; the comment
env.GREETING = "hello; world # all"
env.PLAIN = a;b # a comment
env.QUOTED = 'it''s'
`).upstreams;
    assert.deepEqual(t!.transport, {
      kind: 'stdio',
      command: 'sh',
      args: ['-c', 'echo a; echo b #1', '--x=a;b#c'],
      env: { GREETING: 'hello; world # all', PLAIN: 'a;b', QUOTED: "'it''s'" },
      isolation: 'shared',
      writable: [],
    });
    assert.notEqual(
      load('[upstream t]\ncommand = server-a\n').upstreams[0]!.server,
      load('[upstream t]\ncommand = server-b\n').upstreams[0]!.server,
      'another command is another server',
    );
  });

  test('auth = oauth: a url upstream, with its client, secret and scopes; never token_env; needs the session', () => {
    const [code] = load(
      '[upstream code]\nurl = https://code.internal/mcp\nauth = oauth\noauth_client_id = svc-prod\noauth_client_secret_env = CODE_SECRET\noauth_scopes = repo  read:org repo\n',
      { ...ENV, CODE_SECRET: 'the-client-secret' },
    ).upstreams;
    assert.deepEqual(code!.oauth, {
      clientId: 'svc-prod',
      clientSecret: 'the-client-secret',
      scopes: ['repo', 'read:org'],
      privateNetwork: false,
    });
    const [bare] = load('[upstream code]\nurl = https://code.internal/mcp\nauth = oauth\n').upstreams;
    assert.deepEqual(bare!.oauth, { clientId: null, clientSecret: null, scopes: [], privateNetwork: false }, 'svc registers itself');
    assert.equal(load('[upstream code]\nurl = https://code.internal/mcp\nauth = none\n').upstreams[0]!.oauth, null);
    refused('[upstream t]\nurl = https://t.internal/mcp\nauth = basic\n', 'upstream.t.auth:');
    refused('[upstream t]\ncommand = fs-mcp\nauth = oauth\n', 'upstream.t.auth:');
    refused('[upstream t]\nurl = https://t.internal/mcp\nauth = oauth\ntoken_env = TRACKER_TOKEN\n', 'upstream.t.token_env:');
    refused('[upstream t]\nurl = https://t.internal/mcp\noauth_client_id = x\n', 'upstream.t.oauth_client_id:');
    refused('[upstream t]\nurl = https://t.internal/mcp\noauth_scopes = repo\n', 'upstream.t.oauth_scopes:');
    refused(
      '[upstream t]\nurl = https://t.internal/mcp\nauth = oauth\noauth_client_secret_env = S\n',
      'upstream.t.oauth_client_secret_env:',
    );
    refused('[upstream t]\nurl = https://t.internal/mcp\nauth = oauth\noauth_client_id = a b\n', 'upstream.t.oauth_client_id:');
    refused('[upstream t]\nurl = https://t.internal/mcp\nauth = oauth\noauth_scopes = répo\n', 'upstream.t.oauth_scopes:');
    refused(
      '[upstream t]\nurl = https://t.internal/mcp\nauth = oauth\noauth_client_id = x\noauth_client_secret_env = UNSET_SECRET\n',
      'upstream.t.oauth_client_secret_env: environment variable UNSET_SECRET is not set',
    );
    const noSession = (() => {
      try {
        loadConfig(
          '[server]\nlisten = 127.0.0.1:8080\nbase_url = http://127.0.0.1:8080\ndatabase = file:svc.db\n[auth]\ntoken\n    enabled true\n[upstream t]\nurl = https://t.internal/mcp\nauth = oauth\n',
          ENV,
          { mode: 'serve' },
        );
        return [];
      } catch (e) {
        return (e as ConfigError).problems;
      }
    })();
    assert.ok(
      noSession.some((p) => p.includes('upstream.t.auth is oauth')),
      noSession.join('\n'),
    );
  });

  test('env.* and isolation: stdio only, with valid names and values', () => {
    refused('[upstream t]\nurl = https://t.internal/mcp\nenv.A = 1\n', 'upstream.t.env.*:');
    refused('[upstream t]\nurl = https://t.internal/mcp\nisolation = user\n', 'upstream.t.isolation:');
    refused('[upstream t]\ncommand = fs-mcp\nenv.1A = x\n', 'upstream.t.env.1A:');
    refused('[upstream t]\ncommand = fs-mcp\nisolation = everyone\n', 'upstream.t.isolation:');
  });

  test('labels, review, tools, identity: each value checked', () => {
    refused('[upstream t]\nurl = https://t.internal/mcp\nlabels = Eng!\n', 'upstream.t.labels:');
    refused('[upstream t]\nurl = https://t.internal/mcp\nreview = none\n', 'upstream.t.review:');
    refused('[upstream t]\nurl = https://t.internal/mcp\ntools = ok bad/name\n', 'upstream.t.tools:');
    refused('[upstream t]\nurl = https://t.internal/mcp\nidentity = bearer\n', 'upstream.t.identity:');
  });

  test('expose: tools, prompts and resources (all three by default), by spaces or commas; an unknown word or none refused', () => {
    const expose = (value: string) => load(`[upstream t]\nurl = https://t.internal/mcp\nexpose = ${value}\n`).upstreams[0]!.expose;
    assert.deepEqual(load('[upstream t]\nurl = https://t.internal/mcp\n').upstreams[0]!.expose, {
      tools: true,
      prompts: true,
      resources: true,
    });
    assert.deepEqual(expose('tools'), { tools: true, prompts: false, resources: false });
    assert.deepEqual(expose('prompts'), { tools: false, prompts: true, resources: false });
    assert.deepEqual(expose('resources'), { tools: false, prompts: false, resources: true });
    assert.deepEqual(expose('resources,tools  prompts'), { tools: true, prompts: true, resources: true });
    assert.deepEqual(expose('prompts, prompts'), { tools: false, prompts: true, resources: false });
    for (const [value, word] of [
      ['tools apps', 'apps'],
      ['Tools', 'Tools'],
      ['tool', 'tool'],
      ['tools/prompts', 'tools/prompts'],
    ] as const) {
      const problem = refused(`[upstream t]\nurl = https://t.internal/mcp\nexpose = ${value}\n`, 'upstream.t.expose:');
      assert.match(problem, new RegExp(`"${word}" is not one of tools, prompts, resources`));
    }
    for (const empty of ['', ' , '])
      assert.match(
        refused(`[upstream t]\nurl = https://t.internal/mcp\nexpose = ${empty}\n`, 'upstream.t.expose:'),
        /name at least one of tools, prompts, resources/,
      );
    refused('[upstream t]\nurl = https://t.internal/mcp\nexpose\n', 'upstream.t.expose:');
  });

  test('token_env: a variable name that is set; its value is never in a message', () => {
    const unset = refused('[upstream t]\nurl = https://t.internal/mcp\ntoken_env = NOT_SET\n', 'upstream.t.token_env:');
    assert.match(unset, /NOT_SET is not set/);
    refused('[upstream t]\nurl = https://t.internal/mcp\ntoken_env = not-a-name\n', 'upstream.t.token_env:');
    const empty = refused('[upstream t]\nurl = https://t.internal/mcp\ntoken_env = T\n', 'upstream.t.token_env:', { ...ENV, T: '' });
    assert.doesNotMatch(empty, /tracker-service-credential/);
  });

  test('timeout, refresh and rate: durations and calls per s, m or h', () => {
    refused('[upstream t]\nurl = https://t.internal/mcp\ntimeout = 0s\n', 'upstream.t.timeout:');
    refused('[upstream t]\nurl = https://t.internal/mcp\ntimeout = soon\n', 'upstream.t.timeout:');
    refused('[upstream t]\nurl = https://t.internal/mcp\nrefresh = 1.5m\n', 'upstream.t.refresh:');
    for (const bad of ['120', '0/m', '10/d', 'many/m', '-1/s'])
      refused(`[upstream t]\nurl = https://t.internal/mcp\nrate = ${bad}\n`, 'upstream.t.rate:');
    assert.deepEqual(load('[upstream t]\nurl = https://t.internal/mcp\nrate = 5/s\n').upstreams[0]!.rate, { calls: 5, perSeconds: 1 });
    assert.deepEqual(load('[upstream t]\nurl = https://t.internal/mcp\nrate = 100/h\n').upstreams[0]!.rate, {
      calls: 100,
      perSeconds: 3600,
    });
  });

  test('identity = jwt needs a session secret, which seals the signing key', () => {
    const tokenOnly = BASE.replace(/session\n( {4}.*\n)+/, '');
    const found = (() => {
      try {
        loadConfig(`${tokenOnly}[upstream t]\nurl = https://t.internal/mcp\nidentity = jwt\n`, ENV, { mode: 'serve' });
      } catch (e) {
        if (e instanceof ConfigError) return e.problems;
      }
      return [];
    })();
    for (const key of ['cookie_name', 'ttl', 'secret_env']) {
      assert.ok(found.includes(`svc: config: auth.session.${key}: required when upstream.t.identity is jwt`), JSON.stringify(found));
    }
    assert.ok(
      load('[upstream t]\nurl = https://t.internal/mcp\nidentity = jwt\n').auth.session!.secret.length > 0,
      'with [auth] session: read',
    );
  });

  test('unknown and repeated keys are named with the section', () => {
    const unknown = refused('[upstream t]\nurl = https://t.internal/mcp\nheaders = x\n', 'upstream.t.headers: unknown key');
    assert.match(unknown, /\[upstream t\] takes url, command, .*env\.\*/);
    refused('[upstream t]\nurl = https://t.internal/mcp\nlabels = a\nlabels = b\n', 'upstream.t.labels: given twice');
  });
});

describe('svc check and svc serve with [upstream NAME]', () => {
  let ws: Workspace;
  before(async () => {
    ws = await createWorkspace();
  });
  after(() => ws.remove());

  test('a bad section is exit 78 with every problem named, and nothing listens; a good one checks', async () => {
    const good = readFileSync(ws.configPath, 'utf8');
    writeFileSync(
      ws.configPath,
      `${good}\n[upstream tracker]\nurl = http://tracker.internal/mcp\ntoken_env = TRACKER_TOKEN\nrate = lots\n[upstream files]\ncommand = fs-mcp\nisolation = nobody\n`,
    );
    for (const command of ['check', 'serve']) {
      const r = await ws.svc([command]);
      assert.equal(r.code, 78, `${command}: ${r.stderr}`);
      for (const key of ['upstream.tracker.url', 'upstream.tracker.token_env', 'upstream.tracker.rate', 'upstream.files.isolation']) {
        assert.match(r.stderr, new RegExp(`^svc: config: ${key.replaceAll('.', '\\.')}: `, 'm'), `${command} names ${key}`);
      }
      assert.equal(await listening(ws.port), false);
    }
    writeFileSync(ws.configPath, `${good}\n[upstream tracker]\nurl = http://127.0.0.1:9/mcp\ntoken_env = TRACKER_TOKEN\n`);
    const ok = await ws.svc(['check'], { env: { TRACKER_TOKEN: 'the service credential' } });
    assert.equal(ok.code, 0, ok.stderr);
    assert.doesNotMatch(ok.stdout + ok.stderr, /the service credential/);
  });
});

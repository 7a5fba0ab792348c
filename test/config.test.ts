import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { loadConfig, ConfigError, type Config } from '../src/config/load.ts';
import { parseDuration } from '../src/domain/duration.ts';
import { parseTree } from '../src/config/tree.ts';

const SECRET = 'x'.repeat(32);
const SERVER = '[server]\nlisten = 127.0.0.1:8080\nbase_url = http://127.0.0.1:8080\ndatabase = file:svc.db\n';
const ENV = { S: SECRET, O: 'oidc-client-secret', P: 'proxy-shared-secret-value' };

function load(auth: string, env: Record<string, string> = ENV, server = SERVER): Config {
  return loadConfig(`${server}\n[auth]\n${auth}`, env, { mode: 'serve' });
}

function problems(auth: string, env: Record<string, string> = ENV, server = SERVER): string[] {
  try {
    load(auth, env, server);
  } catch (e) {
    if (e instanceof ConfigError) return [...e.problems];
    throw e;
  }
  assert.fail('expected a configuration error');
}

const SESSION = 'session\n    cookie_name svc_session\n    ttl 24h\n    secret_env S\n';
const FULL_OIDC =
  'oidc\n    enabled true\n    issuer https://idp.example.com\n    client_id svc\n    client_secret_env O\n    redirect_url http://127.0.0.1:8080/oidc/callback\n';
const FULL_HEADER =
  'header\n    enabled true\n    user_header X-User\n    email_header X-Email\n    secret_header X-Secret\n    shared_secret_env P\n    trusted_proxy 127.0.0.1\n';

describe('durations', () => {
  test('accepts a positive integer with s, m, h or d', () => {
    assert.equal(parseDuration('90s'), 90);
    assert.equal(parseDuration('5m'), 300);
    assert.equal(parseDuration('24h'), 86400);
    assert.equal(parseDuration('90d'), 90 * 86400);
  });
  test('rejects everything else', () => {
    for (const bad of ['0h', '-1h', '1x', 'h', '', '1.5h', '1 h', '01h', '24', '1H', '1hh']) {
      assert.equal(parseDuration(bad), null, bad);
    }
  });
});

describe('the [auth] tree', () => {
  const lines = (text: string) => text.split('\n').map((t, i) => ({ text: t, line: i + 1 }));
  test('nests by indentation and skips comments', () => {
    const { roots, problems } = parseTree(lines('a\n  b 1\n  # note\n  c\n    d two words\ne'));
    assert.deepEqual(problems, []);
    assert.equal(roots.length, 2);
    assert.equal(roots[0]!.children[1]!.children[0]!.value, 'two words');
  });
  test('reports indentation between two levels and tab/space mixes', () => {
    assert.match(parseTree(lines('a\n    b\n  c')).problems[0]!.message, /does not match/);
    assert.match(parseTree(lines('a\n  b\n\tc')).problems[0]!.message, /does not match|mixes/);
  });
});

describe('svc.ini', () => {
  test('a complete file gives a frozen, typed config', () => {
    const config = load(
      `${SESSION}local\n    enabled true\ntoken\n    enabled true\n${FULL_OIDC}${FULL_HEADER}groups\n    enabled true\n    map\n        idp-eng eng, ops\n`,
    );
    assert.equal(config.server.port, 8080);
    assert.equal(config.auth.session!.ttlSeconds, 86400);
    assert.equal(config.auth.session!.secret.toString(), SECRET);
    assert.equal(config.auth.oidc!.uidClaim, 'preferred_username');
    assert.equal(config.auth.header!.userHeader, 'x-user');
    assert.deepEqual(config.auth.groups!.map.get('idp-eng'), ['eng', 'ops']);
    assert.ok(Object.isFrozen(config) && Object.isFrozen(config.auth) && Object.isFrozen(config.auth.session));
    assert.throws(() => {
      (config.server as { port: number }).port = 1;
    });
  });

  test('the example file is valid', async () => {
    const { readFileSync } = await import('node:fs');
    const text = readFileSync(new URL('../svc.ini.example', import.meta.url), 'utf8');
    const config = loadConfig(text, { SVC_SESSION_SECRET: SECRET }, { mode: 'serve' });
    assert.equal(config.auth.local, true);
    assert.equal(config.auth.token, true);
  });

  test('oidc and header enabled but empty: every missing field of both in one run', () => {
    const found = problems(
      `${SESSION}oidc\n    enabled true\n    issuer\n    client_id\n    client_secret_env\n    redirect_url\nheader\n    enabled true\n    user_header\n    email_header\n    secret_header\n    shared_secret_env\n    trusted_proxy\n`,
    );
    for (const key of ['issuer', 'client_id', 'client_secret_env', 'redirect_url']) {
      assert.ok(found.includes(`svc: config: auth.oidc.${key}: required when oidc is enabled`), key);
    }
    for (const key of ['user_header', 'email_header', 'secret_header', 'shared_secret_env', 'trusted_proxy']) {
      assert.ok(found.includes(`svc: config: auth.header.${key}: required when header is enabled`), key);
    }
    assert.equal(found.length, 9, found.join('\n'));
  });

  test('each required oidc field alone', () => {
    for (const key of ['issuer', 'client_id', 'client_secret_env', 'redirect_url']) {
      const auth = SESSION + FULL_OIDC.replace(new RegExp(`    ${key} .*\\n`), '');
      assert.deepEqual(problems(auth), [`svc: config: auth.oidc.${key}: required when oidc is enabled`]);
    }
  });

  test('each required header field alone', () => {
    for (const key of ['user_header', 'email_header', 'secret_header', 'shared_secret_env', 'trusted_proxy']) {
      const auth = FULL_HEADER.replace(new RegExp(`    ${key} .*\\n`), '');
      assert.deepEqual(problems(auth), [`svc: config: auth.header.${key}: required when header is enabled`]);
    }
  });

  test('each required session field alone, when local is enabled', () => {
    for (const key of ['cookie_name', 'ttl', 'secret_env']) {
      const auth = `${SESSION.replace(new RegExp(`    ${key} .*\\n`), '')}local\n    enabled true\n`;
      assert.deepEqual(problems(auth), [`svc: config: auth.session.${key}: required when local or oidc is enabled`]);
    }
  });

  test('groups needs a map line; no channel at all is an error', () => {
    assert.deepEqual(problems('token\n    enabled true\ngroups\n    enabled true\n'), [
      'svc: config: auth.groups.map: required when groups is enabled: at least one "idp-group labels" line',
    ]);
    assert.match(problems('local\n    enabled false\n')[0]!, /no channel is enabled/);
  });

  test('secrets: unset, empty, and a session secret under 32 bytes', () => {
    const auth = `${SESSION}local\n    enabled true\n`;
    assert.deepEqual(problems(auth, {}), ['svc: config: auth.session.secret_env: environment variable S is not set']);
    assert.deepEqual(problems(auth, { S: '' }), ['svc: config: auth.session.secret_env: environment variable S is not set']);
    const short = problems(auth, { S: 'y'.repeat(31) });
    assert.equal(short.length, 1);
    assert.match(short[0]!, /^svc: config: auth.session.secret_env: the secret in S is 31 bytes; it must be at least 32/);
    assert.ok(!short[0]!.includes('yyyy'), 'the secret itself is never printed');
  });

  test('malformed trees and values are each reported with their path', () => {
    const found = problems(
      `${[
        'session value-here',
        '    cookie_name svc_session',
        '    ttl 1x',
        '    ttl 2h',
        '    secret_env S',
        'local',
        '    enabled yes',
        '    enabled',
        '        nested true',
        'token',
        '    enabled true',
        '    colour blue',
        'tokens',
        '    enabled true',
      ].join('\n')}\n`,
    );
    const expected = [
      /^svc: config: auth.session: takes no value/,
      /^svc: config: auth.session.ttl: given twice/,
      /^svc: config: auth.session.ttl: "1x" is not a duration/,
      /^svc: config: auth.local.enabled: given twice/,
      /^svc: config: auth.local.enabled: "yes" is not true or false/,
      /^svc: config: auth.token.colour: unknown key/,
      /^svc: config: auth.tokens: unknown key/,
    ];
    for (const re of expected)
      assert.ok(
        found.some((p) => re.test(p)),
        `${re} in\n${found.join('\n')}`,
      );
  });

  test('a value given a subtree, unknown sections and server keys, duplicates', () => {
    const found = problems(
      'token\n    enabled\n        true\n',
      ENV,
      '[server]\nlisten = 127.0.0.1:8080\nlisten = 127.0.0.1:9090\nbase_url = ftp://x\ndatabase = postgres://db\nport = 1\n[extra]\na = 1\n',
    );
    const expected = [
      /^svc: config: auth.token.enabled: takes a value, not indented lines/,
      /^svc: config: server.listen: given twice/,
      /^svc: config: server.base_url: "ftp:\/\/x" is not an http/,
      /^svc: config: server.database: "postgres:\/\/db" is not a libSQL URL/,
      /^svc: config: server.port: unknown key/,
      /^svc: config: extra: unknown section/,
    ];
    for (const re of expected)
      assert.ok(
        found.some((p) => re.test(p)),
        `${re} in\n${found.join('\n')}`,
      );
  });

  test('oidc redirect_url must end in /oidc/callback; labels and proxies are checked', () => {
    const found = problems(
      SESSION +
        FULL_OIDC.replace('/oidc/callback', '/callback') +
        '    default_acl Eng\n' +
        FULL_HEADER.replace('trusted_proxy 127.0.0.1', 'trusted_proxy proxy.local'),
    );
    assert.ok(
      found.some((p) => p.startsWith('svc: config: auth.oidc.redirect_url: ')),
      found.join('\n'),
    );
    assert.ok(
      found.some((p) => p.startsWith('svc: config: auth.oidc.default_acl: invalid label "Eng"')),
      found.join('\n'),
    );
    assert.ok(found.some((p) => p.startsWith('svc: config: auth.header.trusted_proxy: "proxy.local" is not an IP address')));
  });

  test('connection limits: defaults, given values, and every bad value named', () => {
    const TOKEN_ONLY = 'token\n    enabled true\n';
    assert.deepEqual(
      { ...load(TOKEN_ONLY).server.connections },
      { max: 1000, perAddress: 100, headersTimeoutMs: 10_000, bodyIdleMs: 10_000 },
    );
    const given = load(
      TOKEN_ONLY,
      ENV,
      `${SERVER}max_connections = 400\nmax_connections_per_address = 7\nheader_timeout = 5s\nbody_idle_timeout = 1m\n`,
    );
    assert.deepEqual({ ...given.server.connections }, { max: 400, perAddress: 7, headersTimeoutMs: 5000, bodyIdleMs: 60_000 });
    assert.equal(
      load(TOKEN_ONLY, ENV, `${SERVER}max_connections = 50\n`).server.connections.perAddress,
      5,
      'a tenth of a smaller limit by default',
    );
    const bad = problems(
      TOKEN_ONLY,
      ENV,
      `${SERVER}max_connections = 0\nmax_connections_per_address = many\nheader_timeout = 10\nbody_idle_timeout = 2m\n`,
    );
    assert.deepEqual(bad, [
      'svc: config: server.max_connections: "0" is not a whole number from 1 to 100000',
      'svc: config: server.max_connections_per_address: "many" is not a whole number from 1 to 100000',
      'svc: config: server.header_timeout: "10" is not a duration; a duration is a positive whole number followed by s, m, h or d, such as 90d',
      'svc: config: server.body_idle_timeout: "2m" is longer than a whole request may take (60s)',
    ]);
    assert.deepEqual(problems(TOKEN_ONLY, ENV, `${SERVER}max_connections = 10\nmax_connections_per_address = 11\n`), [
      'svc: config: server.max_connections_per_address: 11 is more than max_connections (10); one address would need no share',
    ]);
    assert.match(
      problems(TOKEN_ONLY, ENV, `${SERVER}max_connections = 1.5\n`)[0]!,
      /server\.max_connections: "1\.5" is not a whole number/,
    );
  });

  test("a relative file: database is resolved against the configuration file's folder; others are kept", () => {
    const withDb = (db: string) =>
      loadConfig(`${SERVER.replace('file:svc.db', db)}\n[auth]\ntoken\n    enabled true\n`, {}, { mode: 'serve', baseDir: '/srv/svc' });
    assert.equal(withDb('file:data/svc.db').server.database, 'file:/srv/svc/data/svc.db');
    assert.equal(withDb('file:../svc.db').server.database, 'file:/srv/svc.db');
    assert.equal(withDb('file:/var/lib/svc.db').server.database, 'file:/var/lib/svc.db');
    assert.equal(withDb('file:///var/lib/svc.db').server.database, 'file:///var/lib/svc.db');
    assert.equal(withDb('libsql://db.example.com').server.database, 'libsql://db.example.com');
  });

  test('plain http://, ws:// or tls=0 to another machine needs insecure_database = true; loopback and TLS do not', () => {
    const withDb = (db: string, extra = '') =>
      `${SERVER.replace('database = file:svc.db', `database = ${db}`)}${extra}\n[auth]\ntoken\n    enabled true\n`;
    const loads = (text: string) => loadConfig(text, {}, { mode: 'serve' });
    for (const db of [
      'http://db.internal:8080',
      'ws://10.0.0.5:8080',
      'http://user:pw@db.example.com',
      'http://[2001:db8::1]:8080',
      'libsql://db.example.com:8080?tls=0',
      'wss://db.example.com?tls=0',
    ]) {
      assert.throws(
        () => loads(withDb(db)),
        (e: unknown) =>
          e instanceof ConfigError &&
          e.problems.length === 1 &&
          /^svc: config: server\.database: (http:\/\/|ws:\/\/|tls=0) to another machine .* clear text; .*insecure_database = true/.test(
            e.problems[0]!,
          ) &&
          !e.problems[0]!.includes('pw'),
        db,
      );
      assert.equal(loads(withDb(db, 'insecure_database = true\n')).server.database, db);
    }
    for (const db of [
      'http://127.0.0.1:8080',
      'ws://localhost:8080',
      'http://[::1]:8080',
      'https://db.example.com',
      'wss://db.example.com',
      'libsql://db.example.com',
      'libsql://127.0.0.1:8080?tls=0',
    ])
      assert.equal(loads(withDb(db)).server.database, db);
    assert.match(
      problems('token\n    enabled true\n', ENV, `${SERVER}insecure_database = maybe\n`)[0]!,
      /server\.insecure_database: "maybe" is not true or false/,
    );
  });

  test('oauth enabled with the token channel off is an error naming both: every token it issued would be refused', () => {
    const found = problems(`${SESSION}local\n    enabled true\ntoken\n    enabled false\noauth\n    enabled true\n`);
    assert.deepEqual(found, [
      'svc: config: auth.oauth.enabled: OAuth issues svc bearer tokens, which auth.token.enabled false refuses; enable token, or turn oauth off',
    ]);
    assert.equal(problems(`${SESSION}local\n    enabled true\noauth\n    enabled true\n`).length, 1, 'token left out is off too');
    assert.ok(load(`${SESSION}local\n    enabled true\ntoken\n    enabled true\noauth\n    enabled true\n`).auth.oauth);
  });

  test('data mode checks the file but does not need the session or single sign-on secrets', () => {
    const text = `${SERVER}\n[auth]\n${SESSION}local\n    enabled true\n${FULL_OIDC}`;
    assert.throws(() => loadConfig(text, {}, { mode: 'serve' }), ConfigError);
    const config = loadConfig(text, {}, { mode: 'data', baseDir: '/etc/svc' });
    assert.equal(config.server.database, 'file:/etc/svc/svc.db');
    assert.throws(() => loadConfig(text.replace('ttl 24h', 'ttl forever'), {}, { mode: 'data' }), ConfigError);
  });

  test('oauth enterprise: a trusted issuer with defaults, and every problem of the block listed', () => {
    const base = `${SESSION}local\n    enabled true\ntoken\n    enabled true\noauth\n    enabled true\n    enterprise\n`;
    const ok = load(`${base}        issuer https://idp.example.com\n        jit true\n        default_acl staff, eng\n`).auth.oauth!
      .enterprise!;
    assert.deepEqual(ok, {
      issuer: 'https://idp.example.com',
      audience: 'http://127.0.0.1:8080',
      jit: true,
      defaultAcl: ['eng', 'staff'],
      subjectClaim: 'sub',
      uidClaim: null,
    });
    // Only a uid_claim set in this block vouches for a pre-provisioned user: never a default, nor oidc's, even for the
    // same provider (an assertion could otherwise link an admin by a claim its user may edit).
    const oidc = (issuer: string) =>
      `${SESSION}local\n    enabled true\ntoken\n    enabled true\noidc\n    enabled true\n    issuer ${issuer}\n    client_id svc\n    client_secret_env O\n    redirect_url http://127.0.0.1:8080/oidc/callback\n    uid_claim employee_id\noauth\n    enabled true\n    enterprise\n        issuer https://idp.example.com\n`;
    assert.equal(load(oidc('https://idp.example.com')).auth.oauth!.enterprise!.uidClaim, null);
    assert.equal(load(oidc('https://other.example.com')).auth.oauth!.enterprise!.uidClaim, null);
    assert.equal(load(`${oidc('https://idp.example.com')}        uid_claim upn\n`).auth.oauth!.enterprise!.uidClaim, 'upn');
    assert.equal(
      load(`${SESSION}local\n    enabled true\ntoken\n    enabled true\noauth\n    enabled true\n`).auth.oauth!.enterprise,
      null,
    );
    const found = problems(
      `${base}        audience not a url\n        jit maybe\n        default_acl Bad!\n        tenant acme\n        subject_claim\n            nested x\n`,
    );
    for (const expected of [
      'svc: config: auth.oauth.enterprise.issuer: required when oauth enterprise is configured',
      'svc: config: auth.oauth.enterprise.audience: "not a url" is not an http(s) URL',
      'svc: config: auth.oauth.enterprise.jit: "maybe" is not true or false',
      'svc: config: auth.oauth.enterprise.tenant: unknown key (line',
      'svc: config: auth.oauth.enterprise.subject_claim: takes a value, not indented lines below it',
      'svc: config: auth.oauth.enterprise.default_acl: invalid label',
    ]) {
      assert.ok(
        found.some((p) => p.startsWith(expected)),
        `${expected}\n${found.join('\n')}`,
      );
    }
    assert.ok(
      problems(`${base}        issuer http://idp.example.com\n`).some((p) => p.includes('auth.oauth.enterprise.issuer: must be https://')),
    );
    assert.ok(
      problems(
        `${SESSION}local\n    enabled true\ntoken\n    enabled true\noauth\n    enterprise yes\n        issuer https://idp.example.com\n`,
      ).some((p) => p.includes('auth.oauth.enterprise: takes no value')),
    );
    assert.ok(
      problems(`${SESSION}local\n    enabled true\noauth\n    enterprise\n        issuer https://idp.example.com\n`).some((p) =>
        p.includes('auth.oauth.enterprise: takes effect only with oauth enabled'),
      ),
    );
  });

  test('plain http issuers only on loopback: any 127.0.0.0/8 address, [::1] or localhost', () => {
    const withIssuer = (issuer: string) => `${SESSION}local\n    enabled true\n${FULL_OIDC.replace('https://idp.example.com', issuer)}`;
    for (const issuer of ['http://127.0.0.1:9000', 'http://127.0.0.5:9000', 'http://[::1]:9000', 'http://localhost:9000']) {
      assert.equal(load(withIssuer(issuer)).auth.oidc!.issuer, issuer);
    }
    for (const issuer of [
      'http://128.0.0.1',
      'http://127.0.0.1.example.com',
      'http://localhost.example.com',
      'http://[::2]',
      'http://0.0.0.0',
      'http://idp.example.com',
    ]) {
      assert.deepEqual(
        problems(withIssuer(issuer)),
        ['svc: config: auth.oidc.issuer: must be https:// (plain http is allowed only for a provider on loopback)'],
        issuer,
      );
    }
  });
});

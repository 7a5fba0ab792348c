// Where an `auth = oauth` upstream's metadata may send svc (issue 46, item 8): the upstream names its authorization
// server, so for an upstream that is not on this machine svc sends nothing to a loopback, private, link-local or other
// non-internet address unless `oauth_private_network = true`, judged at each connection (a name that resolves there
// is refused as it is connected to, and again at the next connection); plain http only for an upstream on loopback,
// to loopback; redirects are not followed.
//
// No network beyond loopback may be used: the "non-local" upstream is `code.test`, and every name the test uses is
// answered by the test's own dns.lookup. Whatever svc does, no packet leaves loopback: a
// connection this process makes to any other address (an address in a URL, or what a name resolved to) is sent to
// the trap, a listener on 127.0.0.1, instead, and recorded in `escaped`; the trap counts every connection it gets.
// The names a refusal is tried with carry the trap's port, so a connection that should not have happened lands
// there and is counted.
import { test, describe, before, after, mock } from 'node:test';
import assert from 'node:assert/strict';
import dns from 'node:dns';
import net, { isIP, type LookupFunction } from 'node:net';
import { createServer as createHttpServer, type Server } from 'node:http';
import { loadConfig } from '../src/config/load.ts';
import { addressScope } from '../src/domain/addresses.ts';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { Browser } from './helpers/http.ts';
import { DEFAULT_AUTH, freePort } from './helpers/workspace.ts';

const isLoopback = (address: string) => addressScope(address) === 'loopback';

/** The test's names: each answers its addresses in turn, the last one from then on. */
const names = new Map<string, string[]>();
const realLookup = dns.lookup;

function testLookup(hostname: string, options: unknown, callback?: unknown): void {
  const done = (typeof options === 'function' ? options : callback) as (...args: unknown[]) => void;
  const answers = names.get(hostname);
  if (answers === undefined) {
    Reflect.apply(
      realLookup,
      dns,
      [hostname, options, callback].filter((x) => x !== undefined),
    );
    return;
  }
  const address = answers.length > 1 ? answers.shift()! : answers[0]!;
  const family = isIP(address);
  const all = typeof options === 'object' && options !== null && (options as dns.LookupOptions).all === true;
  process.nextTick(() => (all ? done(null, [{ address, family }]) : done(null, address, family)));
}

describe('an auth = oauth upstream names its authorization server: where svc may go', () => {
  let svc: TestServer;
  let upstream: Server;
  let trap: net.Server;
  let trapPort: number;
  let trapped = 0;
  const escaped: string[] = [];
  /** the authorization server the upstream's metadata names */
  let named = '';

  /** Any connection of this process to an address outside loopback goes to the trap instead, and is recorded. */
  const keepOnLoopback = (options: { host?: string; port?: number; lookup?: LookupFunction }) => {
    const host = options.host ?? 'localhost';
    if (isIP(host) !== 0) {
      if (!isLoopback(host)) {
        escaped.push(host);
        options.host = '127.0.0.1';
        options.port = trapPort;
      }
      return;
    }
    const lookup: LookupFunction = options.lookup ?? dns.lookup;
    const kept = (address: string) => {
      if (isLoopback(address)) return address;
      escaped.push(address);
      return '127.0.0.1';
    };
    options.lookup = (hostname, lookupOptions, callback) =>
      lookup(hostname, lookupOptions, (error, address, family) => {
        if (error) return callback(error, address, family);
        if (Array.isArray(address))
          return callback(
            null,
            address.map((a) => kept(a.address)).map((k) => ({ address: k, family: isIP(k) })),
          );
        const k = kept(address);
        return callback(null, k, isIP(k));
      });
  };

  before(async () => {
    trap = net.createServer((socket) => {
      trapped++;
      socket.destroy();
    });
    await new Promise<void>((r) => trap.listen(0, '127.0.0.1', r));
    trapPort = (trap.address() as net.AddressInfo).port;
    mock.method(dns, 'lookup', testLookup);
    const connect = net.Socket.prototype.connect;
    // Fail closed: every TCP connection is looked at (a socket file, `path`, is not TCP); a form this test does not
    // know is refused rather than let through.
    mock.method(net.Socket.prototype, 'connect', function (this: net.Socket, ...args: unknown[]) {
      const first = args[0];
      const options = (Array.isArray(first) ? first[0] : first) as { host?: string; port?: number; path?: unknown } | null;
      if (typeof options !== 'object' || options === null) throw new Error('the test keeps on loopback only connections given options');
      if (typeof options.path !== 'string') keepOnLoopback(options);
      return Reflect.apply(connect, this, args);
    });
    // The upstream: its protected-resource metadata names `named`, whatever name it was reached by.
    const upPort = await freePort();
    upstream = createHttpServer((req, res) => {
      if (req.url !== '/.well-known/oauth-protected-resource/mcp') return void res.writeHead(401).end();
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ resource: `http://${req.headers.host}/mcp`, authorization_servers: [named] }));
    });
    await new Promise<void>((r) => upstream.listen(upPort, '127.0.0.1', r));
    for (const [name, address] of [
      ['code.test', '127.0.0.1'],
      ['as-loopback.test', '127.0.0.1'],
      ['as-private.test', '10.0.0.1'],
      ['as-metadata.test', '169.254.169.254'],
      ['as-cgnat.test', '100.64.0.1'],
      ['as-v6.test', 'fd00::1'],
      ['as-public.test', '1.1.1.1'],
    ])
      names.set(name!, [address!]);
    svc = await startTestServer({
      auth: `${DEFAULT_AUTH}
[upstream code]
url = http://code.test:${upPort}/mcp
insecure_http = true
auth = oauth

[upstream open]
url = http://code.test:${upPort}/mcp
insecure_http = true
auth = oauth
oauth_private_network = true

[upstream local]
url = http://127.0.0.1:${upPort}/mcp
auth = oauth
`,
    });
    await svc.addUser({ uid: 'alice', email: 'alice@example.com', password: 'alice password 1', labels: '' });
  });
  after(async () => {
    await svc?.stop();
    mock.restoreAll();
    await new Promise<void>((r) => (upstream ? upstream.close(() => r()) : r()));
    await new Promise<void>((r) => (trap ? trap.close(() => r()) : r()));
  });

  /** Connect to `name` with the upstream naming `server`: the answer's status and text, and what reached the trap. */
  const connect = async (name: string, server: string) => {
    named = server;
    [trapped, escaped.length] = [0, 0];
    const browser = new Browser(svc.url);
    assert.equal((await browser.login('alice', 'alice password 1')).status, 303);
    const res = await browser.request(`/upstreams/${name}/connect`, { headers: { accept: 'text/html' } });
    return { status: res.status, text: await res.text(), trapped, escaped: [...escaped] };
  };

  test('the address rule: only internet addresses are public', () => {
    const cases: [string, string][] = [
      ['8.8.8.8', 'public'],
      ['172.32.0.1', 'public'],
      ['100.128.0.1', 'public'],
      ['2606:4700::1111', 'public'],
      ['::ffff:8.8.8.8', 'public'],
      ['127.0.0.1', 'loopback'],
      ['127.9.9.9', 'loopback'],
      ['::1', 'loopback'],
      ['::ffff:127.0.0.1', 'loopback'],
      ['::ffff:7f00:1', 'loopback'],
      ['10.1.2.3', 'private'],
      ['172.16.0.1', 'private'],
      ['172.31.255.255', 'private'],
      ['192.168.1.1', 'private'],
      ['100.64.0.1', 'private'],
      ['100.127.255.255', 'private'],
      ['fd12:3456::1', 'private'],
      ['fc00::1', 'private'],
      ['64:ff9b::10.0.0.1', 'private'],
      ['2002:a00:1::1', 'private'],
      ['169.254.169.254', 'link-local'],
      ['::ffff:169.254.169.254', 'link-local'],
      ['fe80::1', 'link-local'],
      ['fe80::1%eth0', 'link-local'],
      ['0.0.0.0', 'unspecified'],
      ['::', 'unspecified'],
      ['192.0.2.1', 'reserved'],
      ['203.0.113.5', 'reserved'],
      ['224.0.0.1', 'reserved'],
      ['255.255.255.255', 'reserved'],
      ['2001:db8::1', 'reserved'],
      ['ff02::1', 'reserved'],
      ['fec0::1', 'reserved'],
      ['::7f00:1', 'reserved'],
      ['not an address', 'reserved'],
    ];
    for (const [address, scope] of cases) assert.equal(addressScope(address), scope, address);
  });

  test('oauth_private_network: true or false, only with auth = oauth', () => {
    const base = `[server]\nlisten = 127.0.0.1:8080\ndatabase = file:svc.db\n[auth]${DEFAULT_AUTH}`;
    const env = { SVC_SESSION_SECRET: 'x'.repeat(32) };
    const load = (section: string) => loadConfig(`${base}[upstream t]\nurl = https://t.internal/mcp\n${section}`, env, { mode: 'serve' });
    assert.equal(load('auth = oauth\noauth_private_network = true\n').upstreams[0]!.oauth!.privateNetwork, true);
    assert.equal(load('auth = oauth\n').upstreams[0]!.oauth!.privateNetwork, false);
    assert.throws(() => load('oauth_private_network = true\n'), /upstream\.t\.oauth_private_network: only with auth = oauth/);
    assert.throws(
      () => load('auth = oauth\noauth_private_network = maybe\n'),
      /upstream\.t\.oauth_private_network: "maybe" is not true or false/,
    );
  });

  test('an upstream that is not on this machine: plain http to its authorization server is refused, even on loopback', async () => {
    for (const name of ['code', 'open']) {
      const answer = await connect(name, `http://127.0.0.1:${trapPort}`);
      assert.deepEqual([answer.trapped, answer.escaped], [0, []], `nothing was sent there (${name})`);
      assert.equal(answer.status, 503, answer.text);
      assert.match(answer.text, /is not https \(plain http only on this machine, for an upstream on this machine\)/);
    }
  });

  test('its authorization server at a private, loopback or link-local address, written in the URL: refused before anything is sent', async () => {
    for (const [server, words] of [
      ['https://10.0.0.1/', '10.0.0.1, a private network address'],
      [`https://10.0.0.1:${trapPort}/`, '10.0.0.1, a private network address'],
      [`https://127.0.0.1:${trapPort}/`, '127.0.0.1, an address of this machine'],
      [`https://[::1]:${trapPort}/`, '::1, an address of this machine'],
      [`https://169.254.169.254:${trapPort}/`, '169.254.169.254, a link-local address'],
      [`https://100.64.0.1:${trapPort}/`, '100.64.0.1, a private network address'],
      [`https://[fd00::1]:${trapPort}/`, 'fd00::1, a private network address'],
      [`https://0.0.0.0:${trapPort}/`, '0.0.0.0, an unspecified address'],
    ]) {
      const answer = await connect('code', server!);
      assert.deepEqual([answer.trapped, answer.escaped], [0, []], `nothing was sent to ${server}`);
      assert.equal(answer.status, 503, answer.text);
      assert.ok(answer.text.includes(words!), `${server}: ${answer.text}`);
      assert.ok(answer.text.includes('set oauth_private_network = true in [upstream code]'), answer.text);
    }
  });

  test('a name that resolves to such an address is refused as it is connected to; a public one is connected to', async () => {
    for (const [host, address] of [
      ['as-loopback.test', '127.0.0.1'],
      ['as-private.test', '10.0.0.1'],
      ['as-metadata.test', '169.254.169.254'],
      ['as-cgnat.test', '100.64.0.1'],
      ['as-v6.test', 'fd00::1'],
    ]) {
      const answer = await connect('code', `https://${host}:${trapPort}`);
      assert.deepEqual([answer.trapped, answer.escaped], [0, []], `nothing was sent to ${host}`);
      assert.equal(answer.status, 503, answer.text);
      assert.ok(answer.text.includes(`is at ${address}, `), answer.text);
      assert.ok(answer.text.includes('set oauth_private_network = true in [upstream code]'), answer.text);
    }
    // A public address is where an authorization server should be: svc connects (and the trap takes it).
    const answer = await connect('code', `https://as-public.test:${trapPort}`);
    assert.match(answer.text, /publishes no metadata/);
    assert.ok(answer.trapped > 0 && answer.escaped.every((a) => a === '1.1.1.1') && answer.escaped.length > 0, JSON.stringify(answer));
  });

  test('a name that resolves to a public address first and a private one next is refused at the connection that would go there', async () => {
    // Discovery asks twice (RFC 8414, then OpenID): the first connection goes to the public address, the second is refused.
    names.set('as-rebinding.test', ['1.1.1.1', '10.0.0.1']);
    const answer = await connect('code', `https://as-rebinding.test:${trapPort}`);
    assert.equal(answer.status, 503, answer.text);
    assert.ok(answer.text.includes('is at 10.0.0.1, a private network address'), answer.text);
    assert.deepEqual([answer.trapped, answer.escaped], [1, ['1.1.1.1']], 'one connection, to the public address only');
  });

  test('oauth_private_network = true: its authorization server may be on a private network or this machine (https)', async () => {
    let answer = await connect('open', `https://as-loopback.test:${trapPort}`);
    assert.match(answer.text, /publishes no metadata/);
    assert.ok(answer.trapped > 0, 'svc connected to the name on loopback');
    assert.deepEqual(answer.escaped, []);
    answer = await connect('open', `https://10.0.0.1:${trapPort}/`);
    assert.match(answer.text, /publishes no metadata/);
    assert.ok(answer.trapped > 0 && answer.escaped.length > 0 && answer.escaped.every((a) => a === '10.0.0.1'), JSON.stringify(answer));
  });

  test('an upstream on loopback: plain http to a loopback authorization server, and a redirect is not followed', async () => {
    const heard: string[] = [];
    const redirecting = createHttpServer((req, res) => {
      heard.push(`${req.method} ${req.url}`);
      res.writeHead(302, { location: `http://127.0.0.1:${trapPort}${req.url}` }).end();
    });
    await new Promise<void>((r) => redirecting.listen(0, '127.0.0.1', r));
    try {
      const answer = await connect('local', `http://127.0.0.1:${(redirecting.address() as net.AddressInfo).port}`);
      assert.equal(answer.status, 503, answer.text);
      assert.match(answer.text, /publishes no metadata/);
      assert.deepEqual(heard, ['GET /.well-known/oauth-authorization-server', 'GET /.well-known/openid-configuration']);
      assert.deepEqual([answer.trapped, answer.escaped], [0, []], 'the redirect was not followed');
    } finally {
      await new Promise<void>((r) => redirecting.close(() => r()));
    }
  });

  test('an authorization server whose metadata is over 1 MiB is not read', async () => {
    const large = createHttpServer((_req, res) => {
      const base = `http://127.0.0.1:${(large.address() as net.AddressInfo).port}`;
      res.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          issuer: base,
          authorization_endpoint: `${base}/auth`,
          token_endpoint: `${base}/token`,
          registration_endpoint: `${base}/reg`,
          padding: 'x'.repeat(2 * 1024 * 1024),
        }),
      );
    });
    await new Promise<void>((r) => large.listen(0, '127.0.0.1', r));
    try {
      const answer = await connect('local', `http://127.0.0.1:${(large.address() as net.AddressInfo).port}`);
      assert.equal(answer.status, 503, answer.text);
      assert.match(answer.text, /publishes no metadata/);
    } finally {
      await new Promise<void>((r) => large.close(() => r()));
    }
  });
});

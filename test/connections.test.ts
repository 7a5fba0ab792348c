// Connections as a resource clients share, tried by slow and greedy clients: the share of one client address (an
// IPv6 client counted by its /64), the client address behind trusted proxies, the ceiling on connections waiting
// for their request, and the deadlines on headers and bodies.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { startTestServer } from './helpers/server.ts';
import { rawRequest } from './helpers/http.ts';
import { clientAddress, addressMatcher, limitAddress } from '../src/domain/addresses.ts';
import { holdWriteLock } from './helpers/installation.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('the client address behind trusted proxies', () => {
  test("the right-most X-Forwarded-For entry that is not a trusted proxy; other peers' headers are ignored", () => {
    const trusted = addressMatcher(['10.0.0.0/8', '127.0.0.1']);
    assert.equal(clientAddress('127.0.0.1', '203.0.113.9', trusted), '203.0.113.9');
    assert.equal(
      clientAddress('127.0.0.1', '6.6.6.6, 203.0.113.9, 10.1.2.3', trusted),
      '203.0.113.9',
      'the client cannot choose its address',
    );
    assert.equal(clientAddress('::ffff:10.0.0.7', '203.0.113.9', trusted), '203.0.113.9');
    assert.equal(clientAddress('198.51.100.4', '203.0.113.9', trusted), '198.51.100.4', "an untrusted peer's header is ignored");
    assert.equal(clientAddress('127.0.0.1', null, trusted), '127.0.0.1');
    assert.equal(clientAddress('127.0.0.1', 'unknown, 10.0.0.1', trusted), '10.0.0.1', 'garbage stops at the proxy that added it');
    assert.equal(clientAddress('127.0.0.1', '10.0.0.1, 10.0.0.2', trusted), '10.0.0.1');
  });

  test('a matcher answers the same when asked again, past what it remembers, and with no entries trusts no one', () => {
    const trusted = addressMatcher(['10.0.0.0/8', '2001:db8::/32']);
    const expect = (a: string) => a.startsWith('10.') || a.startsWith('::ffff:10.') || a.startsWith('2001:db8:');
    const addresses: string[] = [];
    for (let i = 0; i < 6000; i++) {
      const n = `${(i >> 8) & 255}.${i & 255}`;
      addresses.push(`10.0.${n}`, `11.0.${n}`, `::ffff:10.9.${n}`, `2001:db8::${i.toString(16)}`, `2001:db9::${i.toString(16)}`);
    }
    for (const round of [1, 2]) {
      for (const a of addresses) assert.equal(trusted(a), expect(a), `round ${round}: ${a}`);
    }
    assert.equal(trusted('not an address'), false);
    assert.equal(trusted('not an address'), false);
    const none = addressMatcher([]);
    for (const a of ['127.0.0.1', '::1', '10.0.0.1']) assert.equal(none(a), false);
  });
});

describe('per-address limits count an IPv6 client by its /64', () => {
  test('IPv4 as it is; every spelling of an IPv6 address of one /64 the same, another /64 apart', () => {
    assert.equal(limitAddress('203.0.113.9'), '203.0.113.9');
    for (const mapped of ['::ffff:203.0.113.9', '::FFFF:203.0.113.9', '::ffff:cb00:7109', '0:0:0:0:0:ffff:203.0.113.9'])
      assert.equal(limitAddress(mapped), '203.0.113.9', `an IPv4-mapped peer is its IPv4 address: ${mapped}`);
    const one = limitAddress('2001:db8:0:7::1');
    assert.equal(one, '2001:db8:0:7::/64');
    for (const same of [
      '2001:db8:0:7:ffff:ffff:ffff:ffff',
      '2001:0DB8:0000:0007:0:0:0:2',
      '2001:db8:0:7:1:2:3.4.5.6',
      '2001:db8:0:7::9%eth0',
    ])
      assert.equal(limitAddress(same), one, same);
    for (const other of ['2001:db8:0:8::1', '2001:db8::7:0:0:1', '2001:db9:0:7::1']) assert.notEqual(limitAddress(other), one, other);
  });
});

describe('connection limits', () => {
  test('a client sending one header byte at a time is cut off, and others are served meanwhile', async () => {
    const s = await startTestServer({ serverOptions: { limits: { headersTimeoutMs: 1000, checkEveryMs: 200 } } });
    try {
      const header = `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ${'a'.repeat(100)}`;
      let i = 0;
      let isCut = false;
      const cut = new Promise<void>((resolve) => {
        const socket = connect(s.ws.port, '127.0.0.1');
        const drip = setInterval(() => {
          if (i < header.length && !socket.destroyed) socket.write(header[i++]!);
        }, 150);
        socket.on('error', () => undefined);
        socket.on('close', () => {
          clearInterval(drip);
          isCut = true;
          resolve();
        });
      });
      // The drip takes over 20 s; Node's default header timeout (60 s) would let it finish and be answered.
      let served = 0;
      await untilTrue(
        async () => {
          if ((await fetch(`${s.url}/healthz`)).status === 200) served++;
          return isCut;
        },
        'the slow client to be cut off',
        60_000,
      );
      await cut;
      assert.ok(served > 5, `others were served meanwhile (${served})`);
      assert.ok(
        i > 1 && i < header.length,
        `cut after ${i} of ${header.length} header bytes: by the header timeout, not at once and not after the header was complete`,
      );
    } finally {
      await s.stop();
    }
  });
});

/** A raw socket from a given loopback address; `closed` settles when the server (or anyone) ends it. */
function slowClient(
  port: number,
  localAddress: string,
  send: string,
): { closed: Promise<void>; written: Promise<void>; isOpen(): boolean; socket: Socket } {
  let wrote: () => void = () => undefined;
  const written = new Promise<void>((resolve) => (wrote = resolve));
  const socket = connect({ port, host: '127.0.0.1', localAddress }, () => socket.write(send, () => wrote()));
  socket.on('error', () => undefined);
  socket.on('data', () => undefined);
  let open = true;
  const closed = new Promise<void>((resolve) =>
    socket.on('close', () => {
      open = false;
      resolve();
    }),
  );
  return { closed, written, isOpen: () => open, socket };
}

async function untilTrue(check: () => boolean | Promise<boolean>, what: string, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    assert.ok(Date.now() < deadline, `timed out waiting until ${what}`);
    await sleep(25);
  }
}

describe('one client address cannot take every connection', () => {
  // The body's first byte with the headers, or (bodyStart '') the headers alone: the body never starts.
  const stalledLogin = (port: number, extra = '', bodyStart = 'u') =>
    `POST /login HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nOrigin: http://127.0.0.1:${port}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n${extra}\r\n${bodyStart}`;

  test('300 stalled POST /login bodies from 127.0.0.2 (half never start theirs): it keeps its share only, 127.0.0.3 and .4 are served, and the stalled ones are cut', async () => {
    const s = await startTestServer({
      serverExtra: 'max_connections = 250\nmax_connections_per_address = 25\nheader_timeout = 5s\nbody_idle_timeout = 5s\n',
      serverOptions: { limits: { checkEveryMs: 200 } },
    });
    const attack: ReturnType<typeof slowClient>[] = [];
    try {
      await s.addUser({ uid: 'pat', email: 'pat@example.com', password: 'pat password 1' });
      for (let i = 0; i < 300; i++) attack.push(slowClient(s.ws.port, '127.0.0.2', stalledLogin(s.ws.port, '', i % 2 === 0 ? 'u' : '')));
      // Past its share, the address's connections are closed as they are accepted.
      await untilTrue(() => attack.filter((a) => a.isOpen()).length <= 25, "at most 25 of 127.0.0.2's connections stay");
      const held = attack.filter((a) => a.isOpen()).length;
      assert.ok(held > 0, 'the address keeps its share while it stalls');

      const health = await rawRequest(s.url, ['GET /healthz HTTP/1.1'], { localAddress: '127.0.0.3' });
      assert.equal(health.status, 200);
      const body = new URLSearchParams({ username: 'pat', password: 'pat password 1' }).toString();
      const login = await rawRequest(
        s.url,
        ['POST /login HTTP/1.1', `Origin: ${s.url}`, 'Content-Type: application/x-www-form-urlencoded'],
        { localAddress: '127.0.0.4', body },
      );
      assert.equal(login.status, 303, 'another client signs in meanwhile');
      assert.ok(
        attack.some((a) => a.isOpen()),
        'and that was while the stalled connections were held',
      );

      // Node alone would wait 60 s (its request timeout) for each stalled body; the body deadline cuts them.
      await untilTrue(() => attack.every((a) => !a.isOpen()), 'every stalled connection is cut, long before 60 s', 30_000);
      // The share is free again: the same address is served once its stalled connections are gone.
      assert.equal((await rawRequest(s.url, ['GET /healthz HTTP/1.1'], { localAddress: '127.0.0.2' })).status, 200);
    } finally {
      for (const a of attack) a.socket.destroy();
      await s.stop();
    }
  });

  test('a connection that sends nothing, or stalls in its headers, is cut at header_timeout', async () => {
    const s = await startTestServer({ serverExtra: 'header_timeout = 1s\n', serverOptions: { limits: { checkEveryMs: 200 } } });
    try {
      const silent = slowClient(s.ws.port, '127.0.0.5', '');
      const partial = slowClient(s.ws.port, '127.0.0.5', 'GET /healthz HTTP/1.1\r\nHost: x\r\n');
      await untilTrue(() => !silent.isOpen() && !partial.isOpen(), 'both are cut, long before the 10 s default', 8_000);
    } finally {
      await s.stop();
    }
  });

  test('1,000 slow connections from ten addresses (each within its share) leave /healthz answering', async () => {
    // The defaults: max_connections 1,000, 100 for one address, headers within 10 s.
    const s = await startTestServer();
    const attack: ReturnType<typeof slowClient>[] = [];
    try {
      for (let a = 0; a < 10; a++)
        for (let i = 0; i < 100; i++) attack.push(slowClient(s.ws.port, `127.0.1.${a + 1}`, 'GET /healthz HTTP/1.1\r\nHost: x\r\n'));
      await Promise.all(attack.map((a) => Promise.race([a.written, a.closed])));
      // Well before their 10 s header deadline: the waiting ones beyond half of the slots were cut as others came.
      await untilTrue(() => attack.filter((a) => a.isOpen()).length <= 500, 'at most half of the slots wait for a request', 3000);
      for (let i = 0; i < 5; i++) {
        const health = await rawRequest(s.url, ['GET /healthz HTTP/1.1'], { localAddress: '127.0.0.3' });
        assert.equal(health.status, 200, `served while the slow connections are held (${i})`);
      }
      const held = attack.filter((a) => a.isOpen()).length;
      assert.ok(held >= 400, `the slow ones keep half of the slots until their header deadline (${held} held)`);
    } finally {
      for (const a of attack) a.socket.destroy();
      await s.stop();
    }
  });

  test('a request being answered is not waiting: slow connections arriving meanwhile never cut it', async () => {
    // Two may wait (half of four). The GET takes a second to answer (/readyz waits for a write lock held elsewhere).
    const s = await startTestServer({ serverExtra: 'max_connections = 4\nmax_connections_per_address = 4\n' });
    const bare: ReturnType<typeof slowClient>[] = [];
    const lock = await holdWriteLock(s.ws.dbUrl.slice('file:'.length));
    try {
      const answered = rawRequest(s.url, ['GET /readyz HTTP/1.1'], { localAddress: '127.0.0.2' });
      await sleep(300);
      for (const address of ['127.0.0.3', '127.0.0.4']) bare.push(slowClient(s.ws.port, address, ''));
      await Promise.all(bare.map((b) => Promise.race([b.written, b.closed])));
      assert.equal((await answered).status, 503, 'answered (the database is locked), not cut');
      assert.ok(
        bare.every((b) => b.isOpen()),
        'two waiting connections are within the ceiling',
      );
    } finally {
      await lock.release();
      for (const b of bare) b.socket.destroy();
      await s.stop();
    }
  });

  test('idle kept-alive connections count as waiting: they cannot hold every slot beside silent ones', async () => {
    // At most 20 connections, 10 of them waiting, 10 for one address.
    const s = await startTestServer({ serverExtra: 'max_connections = 20\nmax_connections_per_address = 10\n' });
    const attack: ReturnType<typeof slowClient>[] = [];
    try {
      // Ten ask for /healthz once and stay open between requests; ten more say nothing.
      for (let i = 0; i < 10; i++) attack.push(slowClient(s.ws.port, `127.0.1.${1 + (i % 2)}`, 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n'));
      await Promise.all(attack.map((a) => Promise.race([a.written, a.closed])));
      await sleep(300);
      for (let i = 0; i < 10; i++) attack.push(slowClient(s.ws.port, `127.0.1.${3 + (i % 2)}`, ''));
      await Promise.all(attack.map((a) => Promise.race([a.written, a.closed])));
      await untilTrue(() => attack.filter((a) => a.isOpen()).length <= 10, 'the attack keeps at most the waiting half', 3000);
      assert.equal((await rawRequest(s.url, ['GET /healthz HTTP/1.1'], { localAddress: '127.0.0.2' })).status, 200);
    } finally {
      for (const a of attack) a.socket.destroy();
      await s.stop();
    }
  });

  test('1,000 stalled requests forwarded for addresses of one IPv6 /64 hold one share, and /healthz answers', async () => {
    const s = await startTestServer({ serverExtra: 'trusted_proxies = 127.0.0.9\n' });
    const attack: ReturnType<typeof slowClient>[] = [];
    const forwarded = (n: number) => `X-Forwarded-For: 2001:db8:0:7::${n.toString(16)}\r\n`;
    try {
      for (let n = 1; n <= 1000; n++) attack.push(slowClient(s.ws.port, '127.0.0.9', stalledLogin(s.ws.port, forwarded(n))));
      await Promise.all(attack.map((a) => Promise.race([a.written, a.closed])));
      // Past its share (100), the /64's requests are answered 429 and their connections closed.
      await untilTrue(() => attack.filter((a) => a.isOpen()).length <= 100, "at most the /64's share of 100 stays");
      assert.equal((await rawRequest(s.url, ['GET /healthz HTTP/1.1'], { localAddress: '127.0.0.3' })).status, 200);
      const sameNet = await rawRequest(s.url, ['GET /healthz HTTP/1.1', 'X-Forwarded-For: 2001:db8:0:7:abcd::1'], {
        localAddress: '127.0.0.9',
      });
      assert.equal(sameNet.status, 429, 'another address of the same /64 is over the share');
      const otherNet = await rawRequest(s.url, ['GET /healthz HTTP/1.1', 'X-Forwarded-For: 2001:db8:0:8::1'], {
        localAddress: '127.0.0.9',
      });
      assert.equal(otherNet.status, 200, 'another /64 is served');
      assert.ok(
        attack.some((a) => a.isOpen()),
        'while the share is held',
      );
    } finally {
      for (const a of attack) a.socket.destroy();
      await s.stop();
    }
  });

  test("behind a trusted proxy the share is the forwarded client's, never the proxy's own", async () => {
    const s = await startTestServer({
      serverExtra: 'trusted_proxies = 127.0.0.9\nmax_connections_per_address = 3\nbody_idle_timeout = 5s\n',
      serverOptions: { limits: { checkEveryMs: 200 } },
    });
    const held: ReturnType<typeof slowClient>[] = [];
    try {
      // Three stalled requests forwarded for 203.0.113.7 hold its share (the proxy itself opens more than three).
      for (let i = 0; i < 3; i++)
        held.push(slowClient(s.ws.port, '127.0.0.9', stalledLogin(s.ws.port, 'X-Forwarded-For: 203.0.113.7\r\n')));
      await Promise.all(held.map((h) => h.written));
      // A request of the proxy's own, answered after the stalled ones were sent, so they are in before the probes.
      assert.equal((await rawRequest(s.url, ['GET /healthz HTTP/1.1'], { localAddress: '127.0.0.9' })).status, 200);
      await untilTrue(
        async () =>
          (await rawRequest(s.url, ['GET /healthz HTTP/1.1', 'X-Forwarded-For: 203.0.113.7'], { localAddress: '127.0.0.9' })).status ===
          429,
        'its fourth request is refused',
      );
      const refused = await rawRequest(s.url, ['GET /healthz HTTP/1.1', 'X-Forwarded-For: 203.0.113.7'], { localAddress: '127.0.0.9' });
      assert.equal(refused.status, 429);
      assert.equal(JSON.parse(refused.body).error, 'too_many_requests');
      // Other clients of the same proxy, and the proxy's own requests, are served.
      assert.equal(
        (await rawRequest(s.url, ['GET /healthz HTTP/1.1', 'X-Forwarded-For: 203.0.113.8'], { localAddress: '127.0.0.9' })).status,
        200,
      );
      assert.equal((await rawRequest(s.url, ['GET /healthz HTTP/1.1'], { localAddress: '127.0.0.9' })).status, 200);
      // A forged X-Forwarded-For from an untrusted peer counts against that peer, not the address it names.
      assert.equal(
        (await rawRequest(s.url, ['GET /healthz HTTP/1.1', 'X-Forwarded-For: 203.0.113.7'], { localAddress: '127.0.0.6' })).status,
        200,
      );
      await untilTrue(() => held.every((h) => !h.isOpen()), 'the stalled forwarded requests are cut', 30_000);
      await untilTrue(
        async () =>
          (await rawRequest(s.url, ['GET /healthz HTTP/1.1', 'X-Forwarded-For: 203.0.113.7'], { localAddress: '127.0.0.9' })).status ===
          200,
        'its share is free again',
      );
    } finally {
      for (const h of held) h.socket.destroy();
      await s.stop();
    }
  });
});

// The fetch an HTTP upstream's transport uses (src/upstream/http-fetch.ts), against a real HTTP server on loopback:
// an answer over 10 MiB is cut off, a redirect is not followed, a body-less status has no body, an abort ends the
// request, and a long-lived signal does not collect a listener per request.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { getEventListeners } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { ANSWER_MAX, AnswerTooLarge, upstreamFetch } from '../src/upstream/http-fetch.ts';

describe('the upstream fetch', () => {
  let server: http.Server;
  let base = '';
  const seen: { method: string; headers: http.IncomingHttpHeaders; body: string }[] = [];

  before(async () => {
    server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (d) => {
        body += d;
      });
      req.on('end', () => {
        seen.push({ method: req.method ?? '', headers: req.headers, body });
        if (req.url === '/big' || req.url === '/big-events') {
          res.writeHead(200, { 'content-type': req.url === '/big' ? 'application/json' : 'text/event-stream' });
          const chunk = Buffer.alloc(1024 * 1024, 'a');
          for (let i = 0; i < 12; i++) res.write(chunk);
          res.end();
        } else if (req.url === '/moved') {
          res.writeHead(302, { location: '/elsewhere' }).end();
        } else if (req.url === '/empty') {
          res.writeHead(204).end();
        } else if (req.url === '/cut') {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.write('{"half":');
          setTimeout(() => res.socket?.destroy(), 20);
        } else if (req.url === '/bom') {
          res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' });
          res.end(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"with":"a byte-order mark"}')]));
        } else if (req.url === '/events') {
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          res.write('data: 1\n\n');
          setTimeout(() => res.end('data: 2\n\n'), 200);
        } else if (req.url === '/slow') {
          setTimeout(() => res.end('late'), 5_000).unref();
        } else {
          res.writeHead(200, { 'content-type': 'application/json', 'x-two': ['a', 'b'] });
          res.end(JSON.stringify({ echo: body }));
        }
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => {
    server.closeAllConnections();
    server.close();
  });

  test('sends the method, headers and body, and gives the status, headers and body back', async () => {
    const { fetch, close } = upstreamFetch(() => assert.fail('not oversized'));
    const r = await fetch(`${base}/echo`, { method: 'POST', headers: { 'x-one': '1' }, body: 'héllo' });
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('x-two'), 'a, b');
    assert.deepEqual(await r.json(), { echo: 'héllo' });
    const last = seen.at(-1)!;
    assert.equal(last.method, 'POST');
    assert.equal(last.headers['x-one'], '1');
    assert.equal(last.headers['content-length'], String(Buffer.byteLength('héllo')));
    close();
  });

  test('a JSON answer is read once; one cut off midway fails; an event stream arrives as it is written', async () => {
    const { fetch, close } = upstreamFetch(() => assert.fail('not oversized'));
    const r = await fetch(`${base}/echo`, { method: 'POST', body: 'once' });
    assert.equal(r.ok, true);
    assert.equal(r.headers.get('content-type'), 'application/json');
    assert.equal(await r.text(), JSON.stringify({ echo: 'once' }));
    assert.equal(r.bodyUsed, true);
    await assert.rejects(r.text(), TypeError);
    const marked = await fetch(`${base}/bom`, { method: 'POST', body: '{}' });
    assert.deepEqual(await marked.json(), { with: 'a byte-order mark' }, 'read as a Response reads it');
    const streamed = await fetch(`${base}/echo`, { method: 'POST', body: 'stream' });
    assert.equal(await new Response(streamed.body).text(), JSON.stringify({ echo: 'stream' }));
    await assert.rejects(
      async () => (await fetch(`${base}/cut`, { method: 'POST', body: '{}' })).text(),
      Error,
      'a cut answer is not taken for a whole one',
    );
    const events = await fetch(`${base}/events`, { method: 'POST', body: '{}' });
    const reader = events.body!.getReader();
    const first = Buffer.from((await reader.read()).value!).toString();
    assert.equal(first, 'data: 1\n\n', 'the first event before the answer ends');
    let rest = '';
    for (let c = await reader.read(); !c.done; c = await reader.read()) rest += Buffer.from(c.value).toString();
    assert.equal(rest, 'data: 2\n\n');
    close();
  });

  test('an answer over 10 MiB is cut off and told', async () => {
    let told = 0;
    const { fetch, close } = upstreamFetch(() => told++);
    const r = await fetch(`${base}/big`, { method: 'POST', body: '{}' });
    await assert.rejects(r.arrayBuffer(), (e: unknown) => e instanceof AnswerTooLarge);
    assert.equal(told, 1);
    // An event stream is read as it arrives, and cut off the same way.
    const events = await fetch(`${base}/big-events`, { method: 'POST', body: '{}' });
    await assert.rejects(events.arrayBuffer(), (e: unknown) => e instanceof AnswerTooLarge);
    assert.equal(told, 2);
    assert.ok(ANSWER_MAX < 12 * 1024 * 1024);
    close();
  });

  test('a redirect comes back as it is, not followed; 204 has no body', async () => {
    const { fetch, close } = upstreamFetch(() => undefined);
    const before = seen.length;
    const r = await fetch(`${base}/moved`, { method: 'POST', body: '{}' });
    assert.equal(r.status, 302);
    assert.equal(r.headers.get('location'), '/elsewhere');
    assert.equal(seen.length, before + 1, 'only the first request was made');
    const empty = await fetch(`${base}/empty`, { method: 'POST', body: '{}' });
    assert.equal(empty.status, 204);
    assert.equal(empty.body, null);
    close();
  });

  test('an abort ends a request waiting for its answer', async () => {
    const { fetch, close } = upstreamFetch(() => undefined);
    const controller = new AbortController();
    const pending = fetch(`${base}/slow`, { method: 'POST', body: '{}', signal: controller.signal });
    setTimeout(() => controller.abort(new Error('stop')), 50);
    await assert.rejects(pending);
    assert.equal(getEventListeners(controller.signal, 'abort').length, 0);
    close();
  });

  test('one long-lived signal keeps no listener per request', async () => {
    const { fetch, close } = upstreamFetch(() => undefined);
    const controller = new AbortController();
    const warnings: string[] = [];
    const warned = (w: Error) => warnings.push(w.name);
    process.on('warning', warned);
    await Promise.all(
      Array.from({ length: 200 }, async () => {
        const r = await fetch(`${base}/echo`, { method: 'POST', body: 'x', signal: controller.signal });
        await r.text();
      }),
    );
    // Each request's listener is gone once its request has closed.
    await new Promise((r) => setImmediate(r));
    assert.equal(getEventListeners(controller.signal, 'abort').length, 0);
    process.off('warning', warned);
    assert.deepEqual(warnings, [], '200 calls in flight on one signal are not a leak');
    close();
  });
});

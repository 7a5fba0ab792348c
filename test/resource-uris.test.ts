// An upstream's resource URIs under svc's one endpoint (CONTRACT §6.3): `NAME+U`, `ui://NAME+REST` for apps; every
// URI in what svc passes on is mapped, and only what svc mapped is unmapped, exactly back.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import {
  mapUri,
  unmapUri,
  mapTemplate,
  unmapTemplate,
  mapContent,
  mapToolResult,
  mapReadResult,
  mapPromptResult,
  mapToolMeta,
  mapResource,
  mapResourceTemplate,
} from '../src/domain/resource-uris.ts';
import { UPSTREAM_NAME } from '../src/config/upstream.ts';

/** Freezes a value all the way down, so any write to the input throws (ESM is strict). */
function frozen<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const v of Object.values(value)) frozen(v);
    Object.freeze(value);
  }
  return value;
}

const NAMES = ['everything', 'a', 'a1', 'my-docs', 'a'.repeat(32)];
const URIS = [
  'demo://doc/1',
  'demo://doc/{id}',
  'file:///srv/a%20b%2Bc.txt',
  'https://h.example/p?q=a+b&r=%2B#frag',
  'a+b://x+y',
  '+',
  '++x',
  'x',
  ' ',
  'ui://app/view.html',
  'ui://a+b',
  'ui://+',
  'ui://x/{id}',
  'ui:/x',
  'ui:x',
  'UI://X',
  'svc://items/a',
  'other+demo://x',
  'ui://other+x',
  'everything+',
  'démo://é/\u{1f600}',
  'a\u0000b',
  `demo://${'x'.repeat(100_000)}`,
];

describe('mapUri and unmapUri', () => {
  test('NAME+U, and ui://NAME+REST for an app, as the contract writes them', () => {
    assert.equal(mapUri('everything', 'demo://doc/1'), 'everything+demo://doc/1');
    assert.equal(mapTemplate('everything', 'demo://doc/{id}'), 'everything+demo://doc/{id}');
    assert.equal(mapUri('everything', 'ui://app/view.html'), 'ui://everything+app/view.html');
    assert.equal(mapUri('everything', 'UI://X'), 'everything+UI://X');
    assert.equal(mapUri('everything', 'a%2Bb+c'), 'everything+a%2Bb+c');
  });

  test('every URI of every upstream name comes back exactly, percent-encoding and + included', () => {
    for (const name of NAMES)
      for (const uri of URIS) {
        const mapped = mapUri(name, uri);
        assert.deepEqual(unmapUri(mapped), { upstream: name, uri }, mapped.slice(0, 80));
        assert.deepEqual(unmapTemplate(mapTemplate(name, uri)), { upstream: name, uri });
      }
  });

  test('an upstream cannot point at svc’s own items or at another upstream’s resources', () => {
    assert.deepEqual(unmapUri(mapUri('evil', 'svc://items/secret')), { upstream: 'evil', uri: 'svc://items/secret' });
    assert.deepEqual(unmapUri(mapUri('evil', 'other+demo://x')), { upstream: 'evil', uri: 'other+demo://x' });
    assert.deepEqual(unmapUri(mapUri('evil', 'ui://other+x')), { upstream: 'evil', uri: 'ui://other+x' });
  });

  test('anything svc did not map is refused', () => {
    for (const bad of [
      'everything+',
      'ui://everything+',
      'Everything+demo://x',
      'svc://items/a',
      'svc://items/a+b',
      'a_b+demo://x',
      `${'a'.repeat(33)}+demo://x`,
      'ui://+x',
      'ui://Everything+x',
      'ui://a_b+x',
      'everything+ui://x',
      'UI://everything+x',
      'demo://doc/1',
      '',
      '+',
      '+demo://x',
      '1a+x',
      '-a+x',
      ' everything+x',
      'ui:// everything+x',
      'ui://',
      'ui://everything',
    ])
      assert.equal(unmapUri(bad), null, JSON.stringify(bad));
    assert.deepEqual(unmapUri(`${'a'.repeat(32)}+demo://x`), { upstream: 'a'.repeat(32), uri: 'demo://x' });
  });

  test('an upstream name is exactly what [upstream NAME] accepts', () => {
    for (const name of ['a', 'z9', 'a-', 'a--b', 'a'.repeat(32), 'a'.repeat(33), 'A', '9a', '-a', 'a_b', 'a.b', 'é', ''])
      assert.equal(unmapUri(`${name}+demo://x`) !== null, UPSTREAM_NAME.test(name), JSON.stringify(name));
  });

  test('whatever is unmapped maps back to exactly the input', () => {
    const pieces = ['', 'ui://', 'UI://', 'ui:/', 'everything', 'Everything', 'a_b', '+', '++', 'x', 'svc://items/', '{id}', '%2B'];
    let accepted = 0;
    for (const a of pieces)
      for (const b of pieces)
        for (const c of pieces)
          for (const d of pieces) {
            const input = a + b + c + d;
            const found = unmapUri(input);
            if (found === null) continue;
            accepted++;
            assert.ok(UPSTREAM_NAME.test(found.upstream), input);
            assert.equal(mapUri(found.upstream, found.uri), input);
          }
    // Both kinds were met: ui://everything+x and everything+ui:/x, say.
    assert.ok(accepted > 100, `${accepted} accepted`);
  });
});

describe('the URIs inside what svc passes on', () => {
  const M = (u: string) => mapUri('up', u);

  test('content blocks: a resource_link’s uri and an embedded resource’s uri; nothing else', () => {
    const content = frozen([
      { type: 'text', text: 'see demo://doc/1', uri: 'demo://not-a-link' },
      { type: 'image', data: 'AA==', mimeType: 'image/png' },
      { type: 'resource_link', uri: 'demo://doc/1', name: 'doc', _meta: { uri: 'demo://meta' } },
      { type: 'resource', resource: { uri: 'ui://app/x', mimeType: 'text/html', text: '<p>' }, annotations: { priority: 1 } },
      { type: 'resource', resource: { uri: 'demo://blob', blob: 'AA==' } },
    ]);
    assert.deepEqual(mapContent('up', content), [
      content[0],
      content[1],
      { type: 'resource_link', uri: M('demo://doc/1'), name: 'doc', _meta: { uri: 'demo://meta' } },
      // Embedded bytes were never reviewed: even a ui:// one passes as data (up+ui://…), never as the app ui://up+….
      { type: 'resource', resource: { uri: 'up+ui://app/x', mimeType: 'text/html', text: '<p>' }, annotations: { priority: 1 } },
      { type: 'resource', resource: { uri: M('demo://blob'), blob: 'AA==' } },
    ]);
    // A link to an app is a pointer, read back through the app's pin: it keeps the app's form.
    assert.deepEqual(mapContent('up', frozen({ type: 'resource_link', uri: 'ui://app/x' })), {
      type: 'resource_link',
      uri: 'ui://up+app/x',
    });
    assert.equal((content[2] as { uri: string }).uri, 'demo://doc/1');
    // A prompt message holds one block, not a list.
    assert.deepEqual(mapContent('up', frozen({ type: 'resource_link', uri: 'demo://x' })), { type: 'resource_link', uri: M('demo://x') });
  });

  test('a tool result: its content, never its structuredContent', () => {
    const result = frozen({
      content: [{ type: 'resource_link', uri: 'demo://a', name: 'a' }],
      structuredContent: { uri: 'demo://a' },
      isError: false,
    });
    assert.deepEqual(mapToolResult('up', result), {
      content: [{ type: 'resource_link', uri: M('demo://a'), name: 'a' }],
      structuredContent: { uri: 'demo://a' },
      isError: false,
    });
  });

  test('a resources/read result: each contents[].uri, ui:// ones as data', () => {
    const result = frozen({
      contents: [
        { uri: 'demo://a', text: 'a' },
        { uri: 'ui://app', mimeType: 'text/html', blob: 'AA==' },
      ],
      _meta: { x: 1 },
    });
    assert.deepEqual(mapReadResult('up', result), {
      contents: [
        { uri: M('demo://a'), text: 'a' },
        // Not an app's pinned read: its contents pass as data, never under the app's URI.
        { uri: 'up+ui://app', mimeType: 'text/html', blob: 'AA==' },
      ],
      _meta: { x: 1 },
    });
  });

  test('a prompts/get result: the content of each message, a block or a list', () => {
    const result = frozen({
      description: 'demo://d',
      messages: [
        { role: 'user', content: { type: 'resource', resource: { uri: 'demo://a', text: 'a' } } },
        { role: 'assistant', content: { type: 'text', text: 'demo://a' } },
        { role: 'user', content: [{ type: 'resource_link', uri: 'demo://b', name: 'b' }] },
      ],
    });
    assert.deepEqual(mapPromptResult('up', result), {
      description: 'demo://d',
      messages: [
        { role: 'user', content: { type: 'resource', resource: { uri: M('demo://a'), text: 'a' } } },
        { role: 'assistant', content: { type: 'text', text: 'demo://a' } },
        { role: 'user', content: [{ type: 'resource_link', uri: M('demo://b'), name: 'b' }] },
      ],
    });
  });

  test('a tool definition: _meta.ui.resourceUri and the older _meta["ui/resourceUri"], and nothing else in _meta', () => {
    const tool = frozen({
      name: 'show',
      inputSchema: { type: 'object' },
      _meta: { ui: { resourceUri: 'ui://app/view', visibility: ['model'] }, 'ui/resourceUri': 'ui://app/old', other: 'ui://app/keep' },
    });
    assert.deepEqual(mapToolMeta('up', tool), {
      name: 'show',
      inputSchema: { type: 'object' },
      _meta: {
        ui: { resourceUri: 'ui://up+app/view', visibility: ['model'] },
        'ui/resourceUri': 'ui://up+app/old',
        other: 'ui://app/keep',
      },
    });
    assert.deepEqual(mapToolMeta('up', frozen({ _meta: { 'ui/resourceUri': 'ui://a' } })), { _meta: { 'ui/resourceUri': 'ui://up+a' } });
    const plain = frozen({ name: 'plain', inputSchema: { type: 'object' } });
    assert.equal(mapToolMeta('up', plain), plain);
  });

  test('a resource list entry’s uri and a template’s uriTemplate', () => {
    const resource = frozen({ uri: 'demo://doc/1', name: 'doc', _meta: { ui: { csp: {} } } });
    assert.deepEqual(mapResource('up', resource), { uri: 'up+demo://doc/1', name: 'doc', _meta: { ui: { csp: {} } } });
    const template = frozen({ uriTemplate: 'demo://doc/{id}', name: 'doc', uri: 'demo://not-this' });
    assert.deepEqual(mapResourceTemplate('up', template), { uriTemplate: 'up+demo://doc/{id}', name: 'doc', uri: 'demo://not-this' });
  });

  test('hostile shapes pass as they are, without a throw or a write', () => {
    const odd = [
      null,
      undefined,
      42,
      'demo://x',
      true,
      [],
      [null, 1, 'x', [], {}],
      { type: 'resource_link' },
      { type: 'resource_link', uri: 5 },
      { type: 'resource_link', uri: ['demo://x'] },
      { type: 'resource_link', uri: null },
      { type: 'RESOURCE_LINK', uri: 'demo://x' },
      { type: 'resource', resource: null },
      { type: 'resource', resource: [] },
      { type: 'resource', resource: ['demo://x'] },
      { type: 'resource', resource: { uri: {} } },
      { type: 'resource', resource: 'demo://x' },
      { type: 'resource', uri: 'demo://x' },
      { uri: 'demo://x' },
      { content: 'demo://x' },
      { content: null },
      { contents: { uri: 'demo://x' } },
      { contents: [null, 1, [], { uri: 7 }, [{ uri: 'demo://x' }]] },
      { messages: { content: { type: 'resource_link', uri: 'demo://x' } } },
      { messages: [null, 'x', [], { content: null }, { role: 'user' }] },
      { _meta: null },
      { _meta: [] },
      { _meta: 'ui://x' },
      { _meta: { ui: null } },
      { _meta: { ui: [] } },
      { _meta: { ui: 'ui://x' } },
      { _meta: { ui: { resourceUri: 5 } } },
      { _meta: { ui: { resourceUri: ['ui://x'] } }, 'ui/resourceUri': 5 },
      { _meta: { 'ui/resourceUri': { uri: 'ui://x' } } },
      { uriTemplate: 5 },
      { uriTemplate: null, uri: 3 },
    ];
    const fns = [mapContent, mapToolResult, mapReadResult, mapPromptResult, mapToolMeta, mapResource, mapResourceTemplate];
    for (const value of odd) {
      const copy = structuredClone(value);
      for (const fn of fns) {
        // mapResource maps the one { uri } here that is a string where it belongs; everything else is untouched.
        if (fn === mapResource && (value as { uri?: unknown } | null)?.uri === 'demo://x') continue;
        assert.deepEqual(fn('up', frozen(value)), copy, `${fn.name} ${JSON.stringify(value)}`);
      }
    }
  });

  test('a __proto__ key from JSON stays a plain key and changes no prototype', () => {
    const block = JSON.parse('{"type":"resource_link","uri":"demo://x","__proto__":{"polluted":1}}') as Record<string, unknown>;
    const mapped = mapContent('up', [block])[0] as Record<string, unknown>;
    assert.equal(mapped.uri, 'up+demo://x');
    assert.equal(Object.getPrototypeOf(mapped), Object.prototype);
    assert.equal(mapped.polluted, undefined);
    assert.deepEqual(Object.getOwnPropertyDescriptor(mapped, '__proto__')?.value, { polluted: 1 });
  });
});

import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseLabels, formatLabels, LabelError } from '../src/domain/labels.ts';
import { visible } from '../src/domain/visibility.ts';
import { deriveUid, uidCandidates, isValidUid } from '../src/domain/uid.ts';
import { openDatabase } from '../src/db/open.ts';
import { putItem, fetchVisible, searchVisible, listVisible } from '../src/store/items.ts';

describe('ACL label strings', () => {
  test('canonical: unique, sorted, comma-separated; commas and/or whitespace separate', () => {
    assert.deepEqual(parseLabels('finance, eng  eng,ops\tx:y'), ['eng', 'finance', 'ops', 'x:y']);
    assert.equal(formatLabels(parseLabels(' b a,,a ')), 'a,b');
    assert.deepEqual(parseLabels(''), []);
    assert.deepEqual(parseLabels(['b', 'a']), ['a', 'b']);
  });
  test('rejects anything else with a message naming the label', () => {
    for (const bad of ['Eng', '-eng', '_x', 'a/b', 'é', 'x'.repeat(65), 'a;b']) {
      assert.throws(() => parseLabels(bad), (e: unknown) => e instanceof LabelError && /invalid label/.test((e as Error).message), bad);
    }
    assert.throws(() => parseLabels([1 as unknown as string]), LabelError);
    assert.deepEqual(parseLabels('x'.repeat(64)), ['x'.repeat(64)]);
  });
});

describe('uids', () => {
  test('valid characters and length', () => {
    assert.ok(isValidUid('a.b_c@d-e'));
    assert.ok(!isValidUid('a b') && !isValidUid('') && !isValidUid('x'.repeat(65)) && !isValidUid('a/b'));
  });
  test('derived from the claim, else the lowercased, cleaned email local part; suffixes stay within 64', () => {
    assert.equal(deriveUid('Alice', 'x@y.z'), 'Alice');
    assert.equal(deriveUid(undefined, 'John.Smith+tag@corp.example'), 'john.smith-tag');
    assert.equal(deriveUid('has space', 'Ann Lee@x.y'), 'ann-lee');
    const it = uidCandidates('x'.repeat(64));
    assert.equal(it.next().value, 'x'.repeat(64));
    assert.equal(it.next().value, 'x'.repeat(62) + '-2');
  });
});

const USERS = [[], ['eng'], ['finance'], ['eng', 'finance'], ['eng', 'finance', 'leadership', 'oncall']];
const ITEMS: Record<string, string[]> = {
  open: [],
  eng: ['eng'],
  fin: ['finance'],
  both: ['eng', 'finance'],
  three: ['eng', 'finance', 'leadership'],
};

describe('visibility', () => {
  test('the rule: every item label among the user labels; unlabelled items are open to all', () => {
    assert.equal(visible([], []), true);
    assert.equal(visible(['eng'], []), false);
    assert.equal(visible(['eng'], ['eng', 'x']), true);
    assert.equal(visible(['eng', 'finance'], ['eng']), false);
  });

  for (const forceClient of [false, true]) {
    test(`the SQL predicate agrees with visible() for every user/item pair (${forceClient ? '@libsql/client' : 'embedded'} driver)`, async () => {
      const dir = mkdtempSync(join(tmpdir(), 'svc-vis-'));
      const database = await openDatabase(`file:${join(dir, 'v.db')}`, null, { forceClient });
      try {
        await database.migrate();
        for (const [id, labels] of Object.entries(ITEMS)) {
          await database.write((tx) => putItem(tx, id, { title: `doc ${id}`, text: `shared word plus ${id}`, labels }));
        }
        for (const user of USERS) {
          const expected = Object.keys(ITEMS).filter((id) => visible(ITEMS[id]!, user)).sort();
          const fetched = [];
          for (const id of Object.keys(ITEMS)) if (await fetchVisible(database.db, id, user)) fetched.push(id);
          const searched = (await searchVisible(database.db, 'shared word', user, 50)).map((h) => h.id).sort();
          const listed = (await listVisible(database.db, user, undefined, 50)).items.map((i) => i.id).sort();
          assert.deepEqual(fetched.sort(), expected, `fetch for [${user}]`);
          assert.deepEqual(searched, expected, `search for [${user}]`);
          assert.deepEqual(listed, expected, `list for [${user}]`);
        }
        // Relabelling an item changes who sees it at once (item_labels follow items.labels).
        await database.write((tx) => putItem(tx, 'open', { title: 'doc open', text: 'shared word', labels: 'oncall' }));
        assert.equal(await fetchVisible(database.db, 'open', ['eng']), null);
        assert.ok(await fetchVisible(database.db, 'open', ['oncall']));
      } finally {
        database.close();
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }
});

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
import { DRIVERS, openFresh } from './helpers/drivers.ts';
import { itemRecord } from './helpers/records.ts';

describe('ACL label strings', () => {
  test('canonical: unique, sorted, comma-separated; commas and/or whitespace separate', () => {
    assert.deepEqual(parseLabels('finance, eng  eng,ops\tx:y'), ['eng', 'finance', 'ops', 'x:y']);
    assert.equal(formatLabels(parseLabels(' b a,,a ')), 'a,b');
    assert.deepEqual(parseLabels(''), []);
    assert.deepEqual(parseLabels(['b', 'a']), ['a', 'b']);
  });
  test('rejects anything else with a message naming the label', () => {
    for (const bad of ['Eng', '-eng', '_x', 'a/b', 'é', 'x'.repeat(65), 'a;b']) {
      assert.throws(
        () => parseLabels(bad),
        (e: unknown) => e instanceof LabelError && /invalid label/.test((e as Error).message),
        bad,
      );
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
    assert.equal(it.next().value, `${'x'.repeat(62)}-2`);
  });
});

const USERS = [[], ['eng'], ['finance'], ['eng', 'finance'], ['eng', 'finance', 'leadership', 'oncall']];
/** Per user: no restriction, a subset of their labels, a label they lack (alone and beside theirs), an empty intersection. */
const RESTRICTIONS = (user: string[]): (string[] | null)[] => [
  null,
  user.slice(0, 1),
  ['leadership'],
  [...user.slice(0, 1), 'leadership'],
  ['nobody-has-this'],
  [],
];
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

  test('a token restriction narrows and never widens: labels the owner lacks grant nothing', () => {
    assert.equal(visible(['eng'], ['eng', 'finance'], ['finance']), false);
    assert.equal(visible(['finance'], ['eng', 'finance'], ['finance']), true);
    assert.equal(visible(['leadership'], ['eng'], ['leadership']), false);
    assert.equal(visible([], ['eng'], []), true, 'unrestricted items stay visible');
    for (const user of USERS) {
      for (const restriction of RESTRICTIONS(user)) {
        for (const labels of Object.values(ITEMS)) {
          if (visible(labels, user, restriction)) assert.ok(visible(labels, user), 'never more than the owner');
        }
      }
    }
  });

  for (const driver of DRIVERS) {
    test(`the SQL predicate agrees with visible() for every user/item pair (${driver} driver)`, async () => {
      const { database, close } = await openFresh(driver);
      try {
        await database.migrate();
        for (const [id, labels] of Object.entries(ITEMS)) {
          await database.write((tx) => putItem(tx, id, itemRecord({ title: `doc ${id}`, text: `shared word plus ${id}`, labels })));
        }
        for (const user of USERS) {
          for (const restriction of RESTRICTIONS(user)) {
            const access = { labels: user, restriction };
            const who = `[${user}] restricted to ${restriction === null ? 'nothing' : `[${restriction}]`}`;
            const expected = Object.keys(ITEMS)
              .filter((id) => visible(ITEMS[id]!, user, restriction))
              .sort();
            const fetched = [];
            for (const id of Object.keys(ITEMS)) if (await fetchVisible(database.db, id, access)) fetched.push(id);
            const searched = (await searchVisible(database.db, 'shared word', access, 50)).map((h) => h.id).sort();
            const listed = (await listVisible(database.db, access, null, 50)).items.map((i) => i.id).sort();
            assert.deepEqual(fetched.sort(), expected, `fetch for ${who}`);
            assert.deepEqual(searched, expected, `search for ${who}`);
            assert.deepEqual(listed, expected, `list for ${who}`);
          }
        }
        // Relabelling an item changes who sees it at once (item_labels follow items.labels).
        await database.write((tx) => putItem(tx, 'open', itemRecord({ title: 'doc open', text: 'shared word', labels: 'oncall' })));
        assert.equal(await fetchVisible(database.db, 'open', { labels: ['eng'], restriction: null }), null);
        assert.ok(await fetchVisible(database.db, 'open', { labels: ['oncall'], restriction: null }));
      } finally {
        await close();
      }
    });
  }
});

describe('search past the rank window', () => {
  test('a common term ranks the newest matches; results stay visible ones, and a caller who sees few gets them all', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-window-'));
    const database = await openDatabase(`file:${join(dir, 'svc.db')}`, null);
    try {
      await database.migrate();
      // Oldest first: two items for team a, then 28 for team b; every one holds the common word.
      const ids = [...['a0', 'a1'], ...Array.from({ length: 28 }, (_, i) => `b${i}`)];
      await database.write(async (tx) => {
        for (const id of ids)
          await putItem(tx, id, itemRecord({ title: id, text: `needle ${id}`, labels: id.startsWith('a') ? 'a' : 'b' }));
      });
      const search = (labels: string[], limit: number, window: number) =>
        searchVisible(database.db, 'needle', { labels, restriction: null }, limit, window);
      const newest = ids.slice(-5);
      const both = (await search(['a', 'b'], 3, 5)).map((h) => h.id);
      assert.equal(both.length, 3);
      for (const id of both) assert.ok(newest.includes(id), `${id} is among the newest five matches`);
      // Team a sees none of the newest five: the whole ranking answers, with exactly what a may read.
      assert.deepEqual((await search(['a'], 3, 5)).map((h) => h.id).sort(), ['a0', 'a1']);
      assert.deepEqual(await search([], 3, 5), [], 'nothing for a caller who may read nothing');
      // Below the window nothing changes: every visible match is ranked.
      assert.equal((await search(['a', 'b'], 50, 100)).length, 30);
    } finally {
      database.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

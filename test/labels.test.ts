import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { parseLabels, formatLabels, LabelError } from '../src/domain/labels.ts';
import { visible } from '../src/domain/visibility.ts';
import { deriveUid, uidCandidates, isValidUid } from '../src/domain/uid.ts';
import { sql, type SQL } from 'drizzle-orm';
import { putItem, putItems, removeItem, fetchVisible, listVisible } from '../src/store/items.ts';
import { searchVisible } from '../src/store/search.ts';
import { indexUnindexedItems } from '../src/jobs/search-index.ts';
import { silentLogger } from '../src/log.ts';
import type { Database } from '../src/db/open.ts';
import { DRIVERS, openFresh, readCounter } from './helpers/drivers.ts';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDatabase } from '../src/db/open.ts';
import { applyMigrations, loadMigrations } from '../src/db/migrations.ts';
import { ROOT } from './helpers/workspace.ts';
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
            const searched = (await searchVisible(database.db, 'shared word', access, 50, TESTER)).map((h) => h.id).sort();
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

/** What does not add up between the items and their search index (empty: all of it does). */
async function indexProblems(database: Database): Promise<string[]> {
  const [c] = await database.db.all<Record<string, number>>(sql`SELECT
    (SELECT count(*) FROM items) AS items,
    (SELECT count(*) FROM search_docs) AS docs,
    (SELECT count(*) FROM search_pending) AS pending,
    (SELECT count(*) FROM search_pending p JOIN search_docs d ON d.item_seq = p.item_seq) AS both,
    (SELECT coalesce(sum(docs), 0) FROM search_sets) AS setDocs,
    (SELECT coalesce(sum(length), 0) FROM search_sets) AS setWords,
    (SELECT coalesce(sum(length), 0) FROM search_docs) AS docWords,
    (SELECT count(*) FROM search_postings) AS postings,
    (SELECT coalesce(sum(json_array_length(terms)), 0) FROM search_docs) AS docTerms,
    (SELECT coalesce(sum(docs), 0) FROM search_terms) AS termDocs,
    (SELECT count(*) FROM search_postings p WHERE NOT EXISTS
      (SELECT 1 FROM search_docs d WHERE d.item_seq = p.item_seq AND d.set_id = p.set_id)) AS orphans,
    (SELECT count(*) FROM search_docs d JOIN items i ON i.seq = d.item_seq
      JOIN search_sets s ON s.id = d.set_id WHERE s.labels <> i.labels) AS wrongSet,
    (SELECT count(*) FROM search_sets WHERE docs <= 0) + (SELECT count(*) FROM search_terms WHERE docs <= 0) AS empty,
    (SELECT count(*) FROM search_docs d WHERE NOT EXISTS (SELECT 1 FROM items i WHERE i.seq = d.item_seq)) AS ghosts,
    (SELECT count(*) FROM search_docs d JOIN items i ON i.seq = d.item_seq WHERE d.item_id IS NOT i.id) AS wrongId`);
  const n = { ...c! } as Record<string, number> & { items: number; docs: number; pending: number };
  const problems: string[] = [];
  if (n.docs !== n.items) problems.push(`${n.docs} indexed of ${n.items} items`);
  if (n.docs + n.pending !== n.items) problems.push(`${n.items - n.docs - n.pending} items neither indexed nor waiting`);
  if (n.both) problems.push(`${n.both} items indexed and waiting`);
  if (n.setDocs !== n.docs) problems.push(`label sets count ${n.setDocs} items, ${n.docs} indexed`);
  if (n.setWords !== n.docWords) problems.push(`label sets count ${n.setWords} words, items ${n.docWords}`);
  if (n.postings !== n.docTerms) problems.push(`${n.postings} postings for ${n.docTerms} indexed words`);
  if (n.termDocs !== n.postings) problems.push(`word counts add to ${n.termDocs}, postings ${n.postings}`);
  if (n.orphans) problems.push(`${n.orphans} postings of no indexed item`);
  if (n.wrongSet) problems.push(`${n.wrongSet} items indexed under other labels`);
  if (n.empty) problems.push(`${n.empty} empty label sets or word counts`);
  if (n.ghosts) problems.push(`${n.ghosts} indexed items that are gone`);
  if (n.wrongId) problems.push(`${n.wrongId} items indexed under another id`);
  return problems;
}

/** Who the searches here are for. */
const TESTER = { user: 1, credential: 'test' };

/** An error whose message, or its cause's (the query builder wraps the driver's), matches. */
const saying = (message: RegExp) => (e: unknown) => {
  const cause = (e as { cause?: { message?: string } }).cause?.message ?? '';
  return message.test(`${(e as Error).message} ${cause}`);
};

for (const driver of DRIVERS) {
  describe(`search ranks every visible match, by what the caller may see (${driver} driver)`, () => {
    const search = (database: Database, query: string, labels: string[], limit = 10) =>
      searchVisible(database.db, query, { labels, restriction: null }, limit, TESTER).then((hits) => hits.map((h) => h.id));
    const put = (database: Database, id: string, text: string, labels = '') =>
      database.write((tx) => putItem(tx, id, itemRecord({ title: id, text, labels })));

    test('an old strong match outranks newer weak ones, however many', async () => {
      const { database, close } = await openFresh(driver);
      try {
        await database.migrate();
        await put(database, 'old-strong', 'needle needle needle needle in a short memo');
        await database.write(async (tx) => {
          for (let i = 0; i < 60; i++)
            await putItem(
              tx,
              `new-weak-${i}`,
              itemRecord({ title: `memo ${i}`, text: `${'filler words '.repeat(40)} needle once`, labels: '' }),
            );
        });
        const hits = await search(database, 'needle', [], 5);
        assert.equal(hits[0], 'old-strong');
        assert.equal(hits.length, 5);
        assert.equal((await search(database, 'needle', [], 100)).length, 61, 'every match is returned when the limit allows');
      } finally {
        await close();
      }
    });

    test('the statistics are those of what the caller may see: hidden documents change no visible ranking', async () => {
      const { database, close } = await openFresh(driver);
      try {
        await database.migrate();
        // Among what "eng" sees, alpha is rare and beta common, so x (alpha thrice) ranks above y (beta thrice).
        await put(database, 'x', 'alpha alpha alpha beta pad pad', 'eng');
        await put(database, 'y', 'alpha beta beta beta pad pad', 'eng');
        for (let i = 0; i < 10; i++) await put(database, `beta-${i}`, 'beta and other words', 'eng');
        assert.deepEqual(await search(database, 'alpha beta', ['eng']), ['x', 'y']);
        // Forty hidden documents full of alpha would make alpha the common word if they counted.
        await database.write(async (tx) => {
          for (let i = 0; i < 40; i++)
            await putItem(tx, `vault-${i}`, itemRecord({ title: 'vault', text: 'alpha alpha beta', labels: 'vault' }));
        });
        assert.deepEqual(await search(database, 'alpha beta', ['eng']), ['x', 'y'], 'hidden documents do not move it');
        assert.deepEqual((await search(database, 'alpha beta', ['eng', 'vault'], 100)).length, 42);
        assert.deepEqual(await search(database, 'alpha', []), [], 'nothing for a caller who may read none of it');
        assert.deepEqual(await indexProblems(database), []);
      } finally {
        await close();
      }
    });

    test('replacing, relabelling and removing an item keep the index exact', async () => {
      const { database, close } = await openFresh(driver);
      try {
        await database.migrate();
        await put(database, 'doc', 'Café crème, first version');
        assert.deepEqual(await search(database, 'CAFE', []), ['doc'], 'folded: case and accents');
        await put(database, 'doc', 'second version only');
        assert.deepEqual(await search(database, 'cafe', []), [], 'the old words are gone');
        assert.deepEqual(await search(database, 'second', []), ['doc']);
        await put(database, 'doc', 'second version only', 'hr');
        assert.deepEqual(await search(database, 'second', ['eng']), [], 'relabelled: hidden from who lacks the label');
        assert.deepEqual(await search(database, 'second', ['hr']), ['doc']);
        await database.write((tx) => removeItem(tx, 'doc'));
        assert.deepEqual(await search(database, 'second', ['hr']), []);
        const left = await database.db.all<{ n: number }>(
          sql`SELECT (SELECT count(*) FROM search_postings) + (SELECT count(*) FROM search_docs) + (SELECT count(*) FROM search_sets) AS n`,
        );
        assert.equal(left[0]!.n, 0, 'no posting, document or label set is left behind');
        assert.deepEqual(await indexProblems(database), []);
      } finally {
        await close();
      }
    });

    test('an import indexes its items together: a replaced item, and one written twice, are found as they end', async () => {
      const { database, close } = await openFresh(driver);
      try {
        await database.migrate();
        await put(database, 'kept', 'old words', 'eng');
        await database.write((tx) =>
          putItems(tx, [
            { id: 'kept', input: itemRecord({ title: 'kept', text: 'new words', labels: 'eng' }) },
            { id: 'twice', input: itemRecord({ title: 'twice', text: 'first draft', labels: '' }) },
            { id: 'twice', input: itemRecord({ title: 'twice', text: 'final text', labels: 'hr' }) },
            { id: 'same', input: itemRecord({ title: 'same', text: 'final text', labels: '' }) },
            { id: 'same', input: itemRecord({ title: 'same', text: 'final text', labels: '' }) },
          ]),
        );
        assert.deepEqual(await search(database, 'old', ['eng', 'hr']), []);
        assert.deepEqual(await search(database, 'new', ['eng']), ['kept']);
        assert.deepEqual(await search(database, 'draft', ['eng', 'hr']), []);
        assert.deepEqual((await search(database, 'final', ['hr'])).sort(), ['same', 'twice']);
        assert.deepEqual(await search(database, 'final', []), ['same']);
        const [counts] = await database.db.all<{ docs: number; items: number; inSets: number }>(
          sql`SELECT (SELECT count(*) FROM search_docs) AS docs, (SELECT count(*) FROM items) AS items,
                (SELECT sum(docs) FROM search_sets) AS inSets`,
        );
        assert.deepEqual({ ...counts }, { docs: 3, items: 3, inSets: 3 });
        assert.deepEqual(await indexProblems(database), []);
      } finally {
        await close();
      }
    });

    test('items written without the index (by an older svc) are indexed by the job svc starts', async () => {
      const { database, close } = await openFresh(driver);
      try {
        await database.migrate();
        await put(database, 'indexed', 'common word');
        await database.write(async (tx) => {
          await tx.run(
            sql`INSERT INTO items (id, title, text, labels, created_at, updated_at) VALUES ('older', 'older', 'common word', '', 0, 0)`,
          );
        });
        assert.deepEqual(await search(database, 'common', []), ['indexed']);
        assert.equal(await indexUnindexedItems(database, silentLogger), 1);
        assert.deepEqual((await search(database, 'common', [])).sort(), ['indexed', 'older']);
        assert.equal(await indexUnindexedItems(database, silentLogger), 0);
        assert.deepEqual(await indexProblems(database), []);
      } finally {
        await close();
      }
    });

    test('writers other than svc (an older svc, plain SQL) cannot leave a posting behind', async () => {
      const { database, close } = await openFresh(driver);
      try {
        await database.migrate();
        await put(database, 'memo', 'merger with acme', 'eng');
        await put(database, 'weekly', 'merger notes', 'eng');
        const raw = (statement: SQL) =>
          database.write(async (tx) => {
            await tx.run(statement);
          });
        // Relabelled behind svc's back: the memo's postings under eng go with it, so eng's ranking no longer holds it.
        await raw(sql`UPDATE items SET labels = 'vault' WHERE id = 'memo'`);
        assert.deepEqual(await search(database, 'merger', ['eng'], 1), ['weekly']);
        assert.deepEqual(await search(database, 'acme', ['eng']), []);
        assert.deepEqual(await indexProblems(database), ['1 indexed of 2 items'], 'not indexed, and nothing stale');
        // It is indexed again as it now is: by the job, or when svc writes it.
        assert.equal(await indexUnindexedItems(database, silentLogger), 1);
        assert.deepEqual(await search(database, 'merger acme', ['vault']), ['memo']);
        await raw(sql`UPDATE items SET text = 'nothing left' WHERE id = 'memo'`);
        await raw(sql`DELETE FROM items WHERE id = 'weekly'`);
        assert.deepEqual(await search(database, 'merger', ['eng', 'vault']), []);
        await put(database, 'memo', 'nothing left', 'vault');
        assert.deepEqual(await search(database, 'nothing', ['vault']), ['memo'], 'written again by svc, with no key clash');
        assert.deepEqual(await indexProblems(database), []);
        // REPLACE deletes the old row without the delete triggers: the foreign key's cascade removes its index rows.
        await put(database, 'pub', 'zebra stripes');
        await raw(
          sql`REPLACE INTO items (id, title, text, labels, created_at, updated_at) VALUES ('pub', 'pub', 'price list', 'board', 0, 0)`,
        );
        assert.deepEqual(await search(database, 'zebra', []), []);
        assert.deepEqual(await search(database, 'zebra', ['board']), []);
        assert.deepEqual(await indexProblems(database), ['1 indexed of 2 items'], 'not indexed, and nothing stale');
        await indexUnindexedItems(database, silentLogger);
        assert.deepEqual(await search(database, 'price', ['board']), ['pub']);
        assert.deepEqual(await indexProblems(database), []);
        // Renamed behind svc's back: indexed again under its new id.
        await raw(sql`UPDATE items SET id = 'pub-renamed' WHERE id = 'pub'`);
        await indexUnindexedItems(database, silentLogger);
        assert.deepEqual(await search(database, 'price', ['board']), ['pub-renamed']);
        assert.deepEqual(await indexProblems(database), []);
      } finally {
        await close();
      }
    });

    test('label sets made, emptied and made again between searches are seen at once', async () => {
      const { database, close } = await openFresh(driver);
      try {
        await database.migrate();
        await put(database, 'a', 'kiwi', 'eng');
        assert.deepEqual(await search(database, 'kiwi', ['eng', 'hr']), ['a']);
        await put(database, 'b', 'kiwi kiwi', 'hr');
        await put(database, 'c', 'kiwi', 'eng,hr');
        assert.deepEqual(await search(database, 'kiwi', ['eng', 'hr']), ['b', 'c', 'a'], 'sets made after the last search');
        assert.deepEqual(await search(database, 'kiwi', ['hr']), ['b']);
        await database.write((tx) => removeItem(tx, 'b'));
        assert.deepEqual(await search(database, 'kiwi', ['eng', 'hr']), ['c', 'a'], 'the hr set went');
        await put(database, 'b', 'kiwi kiwi', 'hr');
        assert.deepEqual(await search(database, 'kiwi', ['hr']), ['b'], 'made again, under a new id');
        await put(database, 'c', 'kiwi', 'finance');
        assert.deepEqual(await search(database, 'kiwi', ['eng', 'hr']), ['b', 'a'], 'relabelled into a set eng and hr cannot see');
        assert.deepEqual(await search(database, 'kiwi', ['finance']), ['c']);
        assert.deepEqual(await indexProblems(database), []);
      } finally {
        await close();
      }
    });

    test('labels that are not text, and a changed seq, are refused whoever writes them', async () => {
      const { database, close } = await openFresh(driver);
      try {
        await database.migrate();
        await put(database, 'memo', 'layoffs planned', 'hr');
        const raw = (statement: SQL) =>
          database.write(async (tx) => {
            await tx.run(statement);
          });
        // The seq keys the item's labels: were it changed, the memo would have none, and be readable by everyone.
        await assert.rejects(raw(sql`UPDATE items SET seq = seq + 1000 WHERE id = 'memo'`), saying(/items\.seq cannot change/));
        // Labels as bytes would make a label set no search can read.
        await assert.rejects(
          raw(sql`INSERT INTO items (id, title, text, labels, created_at, updated_at) VALUES ('b', 'b', 'layoffs', X'6872', 0, 0)`),
          saying(/items\.labels must be text/),
        );
        await assert.rejects(raw(sql`UPDATE items SET labels = X'6872' WHERE id = 'memo'`), saying(/items\.labels must be text/));
        assert.equal(await fetchVisible(database.db, 'memo', { labels: [], restriction: null }), null);
        assert.deepEqual(await search(database, 'layoffs', ['hr']), ['memo']);
        assert.deepEqual(await search(database, 'layoffs', []), []);
        assert.deepEqual(await indexProblems(database), []);
      } finally {
        await close();
      }
    });

    test('indexing in the background lets the event loop turn between batches', async () => {
      const { database, close } = await openFresh(driver);
      try {
        await database.migrate();
        // 400 items of ~1 KB, as an older svc wrote them: batches of 16, 32, 64, … items, or fewer where slow.
        await database.write(async (tx) => {
          await tx.run(sql`
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 400)
            INSERT INTO items (id, title, text, labels, created_at, updated_at)
            SELECT 'old-' || i, 'old ' || i, replace(printf('%.1000c', 'x'), 'x', 'word' || (i % 7) || ' '), '', 0, 0 FROM n`);
        });
        let turns = 0;
        let ticking = true;
        const tick = () => {
          if (!ticking) return;
          turns++;
          setImmediate(tick);
        };
        setImmediate(tick);
        assert.equal(await indexUnindexedItems(database, silentLogger), 400);
        ticking = false;
        assert.ok(turns >= 5, `the event loop turned ${turns} times while 400 items were indexed`);
        assert.equal((await search(database, 'word3', [], 100)).length, 57);
        assert.deepEqual(await indexProblems(database), []);
      } finally {
        await close();
      }
    });
  });
}

describe('which label sets a search may read', () => {
  test('a set made is read once; the newest set going makes no search read every set again', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-sets-'));
    const counter = readCounter();
    const database = await openDatabase(`file:${join(dir, 'svc.db')}`, null, { events: counter.events });
    try {
      await database.migrate();
      const put = (id: string, labels: string) => database.write((tx) => putItem(tx, id, itemRecord({ title: id, text: 'kiwi', labels })));
      await put('open', '');
      for (let i = 0; i < 20; i++) await put(`hidden-${i}`, `vault,x${i}`);
      const statements = async () => {
        const before = counter.reads;
        assert.deepEqual(
          (await searchVisible(database.db, 'kiwi', { labels: [], restriction: null }, 10, TESTER)).map((h) => h.id),
          ['open'],
        );
        return counter.reads - before;
      };
      await statements();
      const quiet = await statements();
      await put('hidden-new', 'vault,y');
      assert.equal(await statements(), quiet + 1, 'the set made since is read, once');
      assert.equal(await statements(), quiet);
      await database.write((tx) => removeItem(tx, 'hidden-new'));
      assert.equal(await statements(), quiet, 'no set is read again when the newest goes');
    } finally {
      database.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('a REPLACE and a changed seq by the sqlite3 shell (foreign keys off)', () => {
  test('leave no index row behind, and cannot move an item out from under its labels', async () => {
    const { database, close } = await openFresh('embedded');
    try {
      await database.migrate();
      const put = (id: string, text: string, labels = '') =>
        database.write((tx) => putItem(tx, id, itemRecord({ title: id, text, labels })));
      const search = (query: string, labels: string[], limit = 10) =>
        searchVisible(database.db, query, { labels, restriction: null }, limit, TESTER).then((hits) => hits.map((h) => h.id));
      const shell = (statement: string) =>
        execFileSync('sqlite3', ['-bail', database.location, statement], { encoding: 'utf8', stdio: 'pipe' });
      assert.equal(shell('PRAGMA foreign_keys;').trim(), '0', "the shell's default");
      await put('doc', 'zebra stripes');
      await put('other', 'zebra crossing');
      shell(`REPLACE INTO items (id, title, text, labels, created_at, updated_at) VALUES ('doc', 'doc', 'price list', 'board', 0, 0);`);
      assert.deepEqual(await search('zebra', [], 1), ['other'], "the old version's rows take no place in the ranking");
      assert.deepEqual(await indexProblems(database), ['1 indexed of 2 items'], 'not indexed yet, and nothing stale');
      await indexUnindexedItems(database, silentLogger);
      assert.deepEqual(await search('price', ['board']), ['doc']);
      assert.deepEqual(await indexProblems(database), []);
      await put('memo', 'layoffs planned', 'hr');
      assert.throws(() => shell(`UPDATE items SET seq = seq + 1000 WHERE id = 'memo';`), /items\.seq cannot change/);
      assert.equal(await fetchVisible(database.db, 'memo', { labels: [], restriction: null }), null, 'still hidden from who lacks hr');
    } finally {
      await close();
    }
  });
});

describe('upgrading a database whose items an older svc or plain SQL wrote', () => {
  test('labels stored as bytes become text, keep their ACL and are indexed', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-upgrade-'));
    try {
      const all = loadMigrations((path) => readFileSync(join(ROOT, 'drizzle', path), 'utf8'));
      const index = all.findIndex((m) => m.tag.endsWith('_search_postings'));
      assert.ok(index > 0);
      const database = await openDatabase(`file:${join(dir, 'svc.db')}`, null);
      try {
        await database.write(async (tx) => {
          await applyMigrations(tx, all.slice(0, index));
          await tx.run(
            sql`INSERT INTO items (id, title, text, labels, created_at, updated_at) VALUES ('memo', 'memo', 'layoffs planned', X'6872', 0, 0)`,
          );
          await tx.run(
            sql`INSERT INTO items (id, title, text, labels, created_at, updated_at) VALUES ('note', 'note', 'layoffs rumoured', '', 0, 0)`,
          );
        });
        await database.migrate();
        const [row] = await database.db.all<{ kind: string }>(sql`SELECT typeof(labels) AS kind FROM items WHERE id = 'memo'`);
        assert.equal(row!.kind, 'text');
        assert.equal(await fetchVisible(database.db, 'memo', { labels: [], restriction: null }), null);
        assert.equal(await indexUnindexedItems(database, silentLogger), 2);
        const search = (labels: string[]) =>
          searchVisible(database.db, 'layoffs', { labels, restriction: null }, 10, TESTER).then((hits) => hits.map((h) => h.id).sort());
        assert.deepEqual(await search([]), ['note']);
        assert.deepEqual(await search(['hr']), ['memo', 'note']);
        assert.deepEqual(await indexProblems(database), []);
      } finally {
        database.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

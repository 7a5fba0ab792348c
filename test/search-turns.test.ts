// Broad searches are ranked a slice at a time, taking turns (store/search-turns.ts): the answer is the one a single
// statement gives, callers are served round robin, one caller has at most two broad searches under way, a search
// too broad to rank is refused before it starts, and other requests are answered while a broad search goes on.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { putItem, putItems } from '../src/store/items.ts';
import { searchVisible, type SearchLimits } from '../src/store/search.ts';
import { SearchTurns, type SearchCaller, type Turns } from '../src/store/search-turns.ts';
import { AppError } from '../src/domain/errors.ts';
import type { Database } from '../src/db/open.ts';
import { DRIVERS, openFresh } from './helpers/drivers.ts';
import { itemRecord } from './helpers/records.ts';
import { startTestServer, type TestServer } from './helpers/server.ts';

/** One statement, whatever the search: the ranking every sliced one must equal. */
const WHOLE: SearchLimits = { slice: 1e12, slices: 1e12 };
/** A slice of 7 postings of one word (1 for several): many statements, label sets grouped and cut by seq. */
const TINY: SearchLimits = { slice: 7, slices: 100_000 };

/** Who a search is for: `user`'s credential `credential`. */
const who = (user: number, credential = 'token') => ({ user, credential });

/** Turns that count what they gave, say when a user took one, and may run a step while a turn is held. */
class WatchedTurns extends SearchTurns {
  taken = 0;
  /** runs after each turn is given, before its statement */
  onTurn: ((taken: number) => Promise<void>) | null = null;
  readonly firstTurn = new Map<number, () => void>();
  private readonly admitted = new Map<number, number>();
  private readonly admissions: { user: number; count: number; resolve: () => void }[] = [];
  override run<T>(caller: SearchCaller, search: (turns: Turns) => Promise<T>) {
    return super.run(caller, (turns) => {
      const count = (this.admitted.get(caller.user) ?? 0) + 1;
      this.admitted.set(caller.user, count);
      for (const w of this.admissions.filter((w) => w.user === caller.user && w.count <= count)) w.resolve();
      return search({
        take: async () => {
          await turns.take();
          this.taken++;
          this.firstTurn.get(caller.user)?.();
          await this.onTurn?.(this.taken);
        },
        done: () => turns.done(),
      });
    });
  }
  /** Resolves once `count` searches of `user` have been admitted in all. */
  admittedOf(user: number, count: number): Promise<void> {
    if ((this.admitted.get(user) ?? 0) >= count) return Promise.resolve();
    return new Promise((resolve) => this.admissions.push({ user, count, resolve }));
  }
  /** Resolves when `user` next takes a turn. */
  nextTurnOf(user: number): Promise<void> {
    return new Promise((resolve) =>
      this.firstTurn.set(user, () => {
        this.firstTurn.delete(user);
        resolve();
      }),
    );
  }
}

const refusedFor = (what: RegExp) => (e: unknown) =>
  e instanceof AppError && e.code === 'too_many_requests' && e.retryAfter === 1 && what.test(e.message);

const everyone = { labels: ['a', 'b', 'c', 'vault'], restriction: null };
const notVault = { labels: ['a', 'b', 'c'], restriction: null };

/** 300 items over five label sets, one hidden from `notVault`; every one holds alpha, some beta, a few gamma. */
async function corpus(database: Database): Promise<void> {
  const sets = ['a', 'a', 'a', 'a', 'b', '', 'c', 'a,b', 'vault', 'a'];
  const docs = Array.from({ length: 300 }, (_, i) => {
    const words = ['alpha', ...Array(i % 4).fill('alpha'), ...(i % 3 === 0 ? ['beta'] : []), ...(i % 29 === 0 ? ['gamma'] : [])];
    const pad = Array.from({ length: (i * 7) % 23 }, (_, k) => `pad${k}`);
    return { id: `doc-${i}`, input: itemRecord({ title: `doc ${i}`, text: [...words, ...pad].join(' '), labels: sets[i % sets.length]! }) };
  });
  await database.write((tx) => putItems(tx, docs));
}

const ids = (hits: { id: string }[]) => hits.map((h) => h.id);

for (const driver of DRIVERS) {
  describe(`broad searches, a slice at a time (${driver} driver)`, () => {
    let database: Database;
    let close: () => Promise<void>;
    before(async () => {
      ({ database, close } = await openFresh(driver));
      await database.migrate();
      await corpus(database);
    });
    after(() => close());

    test('the answer is the one a single statement gives, for one word and several, any limit', async () => {
      for (const access of [
        everyone,
        notVault,
        { labels: ['a'], restriction: null },
        { labels: ['a', 'b', 'c'], restriction: ['b', 'c'] },
      ]) {
        for (const query of ['alpha', 'alpha beta', 'beta alpha gamma', 'gamma', 'beta']) {
          for (const limit of [1, 10, 50]) {
            const whole = new WatchedTurns();
            const tiny = new WatchedTurns();
            const one = ids(await searchVisible(database.db, query, access, limit, who(1), { limits: WHOLE, turns: whole }));
            const sliced = ids(await searchVisible(database.db, query, access, limit, who(1), { limits: TINY, turns: tiny }));
            const what = `${query} for [${access.labels}] restricted to ${access.restriction}, limit ${limit}`;
            assert.deepEqual(sliced, one, what);
            assert.equal(whole.taken, 0, `one statement takes no turn: ${what}`);
            if (query === 'alpha' && access === everyone) assert.ok(tiny.taken > 30, `${tiny.taken} turns for ${what}`);
          }
        }
      }
      // The hidden set holds alpha too: sliced or not, nothing of it comes back.
      const seen = ids(await searchVisible(database.db, 'alpha', notVault, 50, who(1), { limits: TINY, turns: new WatchedTurns() }));
      assert.equal(seen.length, 50);
      assert.ok(
        seen.every((id) => Number(id.slice(4)) % 10 !== 8),
        'no vault document',
      );
    });

    test('a search too broad to rank is refused before it starts; a narrow one is not', async () => {
      const limits = { slice: 7, slices: 10 };
      const turns = new WatchedTurns();
      await assert.rejects(
        searchVisible(database.db, 'alpha', everyone, 10, who(1), { limits, turns }),
        (e: unknown) =>
          e instanceof AppError && e.code === 'bad_request' && /too many of the documents you may read.*rarer word/.test(e.message),
      );
      assert.equal(turns.taken, 0, 'refused before any ranking');
      assert.deepEqual(
        ids(await searchVisible(database.db, 'gamma', everyone, 50, who(1), { limits, turns })).length,
        11,
        'gamma is in 11 documents: ten statements at most',
      );
      // What decides is what the caller may see: the team that sees only c reads few enough.
      assert.ok(
        (await searchVisible(database.db, 'alpha', { labels: ['c'], restriction: null }, 10, who(1), { limits, turns })).length > 0,
      );
    });

    test('callers take turns round robin: a short broad search started later ends first', async () => {
      const turns = new WatchedTurns();
      const order: string[] = [];
      const long = searchVisible(database.db, 'alpha', everyone, 10, who(1), { limits: TINY, turns }).then(() => order.push('long'));
      await turns.nextTurnOf(1);
      // The c set alone: 30 postings, five statements, against the long search's 43.
      const short = searchVisible(database.db, 'alpha', { labels: ['c'], restriction: null }, 10, who(2), { limits: TINY, turns }).then(
        () => order.push('short'),
      );
      await Promise.all([long, short]);
      assert.deepEqual(order, ['short', 'long']);
    });

    test('a credential has at most two broad searches under way, a user eight; others are not held by them', async () => {
      const turns = new WatchedTurns();
      const search = (user: number, credential = 'token') =>
        searchVisible(database.db, 'alpha', everyone, 10, who(user, credential), { limits: TINY, turns });
      const first = search(1);
      const second = search(1);
      // On a database server each search reads its label sets first, over the network: wait until both are under way.
      await turns.admittedOf(1, 2);
      await assert.rejects(search(1), refusedFor(/This token or session has 2 broad searches under way/));
      const other = await search(2);
      assert.equal(other.length, 10, 'another user is served meanwhile');
      assert.equal((await search(1, 'another token')).length, 10, "the same user's other credential is served meanwhile");
      const [a, b] = await Promise.all([first, second]);
      assert.deepEqual(ids(a), ids(other));
      assert.deepEqual(ids(b), ids(other));
      assert.equal((await search(1)).length, 10, 'once they ended, the credential may search again');
      // Per user: with four per user, a fifth over three credentials is refused.
      const few = new WatchedTurns({ perCredential: 2, perUser: 4 });
      const under = ['a', 'a', 'b', 'b'].map((c) =>
        searchVisible(database.db, 'alpha', everyone, 10, who(3, c), { limits: TINY, turns: few }),
      );
      await few.admittedOf(3, 4);
      await assert.rejects(
        searchVisible(database.db, 'alpha', everyone, 10, who(3, 'c'), { limits: TINY, turns: few }),
        refusedFor(/You have 4 broad searches under way already, over all your tokens and sessions/),
      );
      await Promise.all(under);
    });

    test('a broad search whose caller went stops at its next turn, and gives its place back', async () => {
      const turns = new WatchedTurns();
      const gone = new AbortController();
      turns.onTurn = async (taken) => {
        if (taken === 3) gone.abort();
      };
      await assert.rejects(
        searchVisible(database.db, 'alpha', everyone, 10, who(1), { limits: TINY, turns, signal: gone.signal }),
        /cancelled/,
      );
      assert.equal(turns.taken, 3, 'no turn after the caller went');
      turns.onTurn = null;
      const again = await Promise.all([1, 2].map(() => searchVisible(database.db, 'alpha', everyone, 10, who(1), { limits: TINY, turns })));
      assert.deepEqual(
        again.map((h) => h.length),
        [10, 10],
      );
    });
  });
}

for (const driver of DRIVERS) {
  describe(`broad searches while documents are written (${driver} driver)`, () => {
    test('a document moved to a later slice during a search counts once', async () => {
      const { database, close } = await openFresh(driver);
      try {
        await database.migrate();
        const put = (id: string, text: string, labels: string) =>
          database.write((tx) => putItem(tx, id, itemRecord({ title: id, text, labels })));
        // star is the best match and the first item of set a, ranked in its first slice; b's slices come after.
        await put('star', 'omega omega omega omega', 'a');
        for (let i = 0; i < 10; i++) await put(`a${i}`, `omega and more words ${i}`, 'a');
        for (let i = 0; i < 10; i++) await put(`b${i}`, `omega and other words ${i}`, 'b');
        const turns = new WatchedTurns();
        turns.onTurn = async (taken) => {
          if (taken === 2) await put('star', 'omega omega omega omega', 'b');
        };
        const hits = ids(
          await searchVisible(database.db, 'omega', { labels: ['a', 'b'], restriction: null }, 5, who(1), { limits: TINY, turns }),
        );
        assert.ok(turns.taken >= 3, `${turns.taken} turns`);
        assert.equal(hits.filter((id) => id === 'star').length, 1, JSON.stringify(hits));
        assert.equal(hits[0], 'star');
        assert.equal(new Set(hits).size, hits.length);
      } finally {
        await close();
      }
    });

    test('documents written into a set while it is ranked cannot keep the search going past its plan', async () => {
      const { database, close } = await openFresh(driver);
      try {
        await database.migrate();
        await database.write((tx) =>
          putItems(
            tx,
            Array.from({ length: 14 }, (_, i) => ({ id: `d${i}`, input: itemRecord({ title: `d${i}`, text: 'omega', labels: 'a' }) })),
          ),
        );
        // 14 postings, slices of 7: two statements planned. Each turn adds two more, for at most 200 turns.
        const turns = new WatchedTurns();
        let added = 0;
        turns.onTurn = async () => {
          if (added >= 400) return;
          await database.write((tx) =>
            putItems(
              tx,
              [0, 1].map((k) => ({ id: `new${added + k}`, input: itemRecord({ title: 'new', text: 'omega', labels: 'a' }) })),
            ),
          );
          added += 2;
        };
        await searchVisible(database.db, 'omega', { labels: ['a'], restriction: null }, 5, who(1), { limits: TINY, turns });
        assert.ok(turns.taken <= 2, `${turns.taken} statements for a plan of 2`);
      } finally {
        await close();
      }
    });
  });
}

type ToolResult = {
  isError?: boolean;
  content: { type: string; text: string }[];
  structuredContent?: { results?: unknown[]; uid?: string };
};

describe('broad searches through /mcp', () => {
  let s: TestServer;
  const clients: Client[] = [];
  const connect = async (token: string) => {
    const client = new Client({ name: 'svc-test', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${s.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }),
    );
    clients.push(client);
    return client;
  };
  const call = async (client: Client, name: string, args: Record<string, unknown> = {}) =>
    (await client.callTool({ name, arguments: args })) as ToolResult;
  // 32 words in every one of 4,000 documents: a search of all 32 is ranked in 13 statements by default.
  const WORDS = Array.from({ length: 32 }, (_, i) => `word${i}`);
  before(async () => {
    s = await startTestServer();
    const docs = Array.from({ length: 4000 }, (_, i) => ({
      id: `doc-${i}`,
      input: itemRecord({ title: `doc ${i}`, text: `${WORDS.join(' ')} ${i % 7 === 0 ? WORDS[3] : ''}`, labels: 'eng' }),
    }));
    await s.database.write((tx) => putItems(tx, docs));
  });
  after(async () => {
    for (const c of clients) await c.close();
    await s.stop();
  });

  test('a request sent while a broad search runs is answered before it ends', async () => {
    const alice = await connect(await s.tokenFor(await s.addUser({ uid: 'alice', email: 'alice@example.com', labels: 'eng' })));
    const bob = await connect(await s.tokenFor(await s.addUser({ uid: 'bob', email: 'bob@example.com' })));
    const order: string[] = [];
    const broad = call(alice, 'search', { query: WORDS.join(' '), limit: 5 }).then((r) => {
      order.push('search');
      return r;
    });
    await new Promise((r) => setTimeout(r, 20));
    const whoami = call(bob, 'whoami').then((r) => {
      order.push('whoami');
      return r;
    });
    const [found, me] = await Promise.all([broad, whoami]);
    assert.equal(found.isError, undefined, JSON.stringify(found.content));
    assert.equal(found.structuredContent?.results?.length, 5);
    assert.equal(me.structuredContent?.uid, 'bob');
    assert.deepEqual(order, ['whoami', 'search']);
  });

  test("a third broad search of one user at once is refused with what to do; another user's goes on", async () => {
    const carol = await connect(await s.tokenFor(await s.addUser({ uid: 'carol', email: 'carol@example.com', labels: 'eng' })));
    const dave = await connect(await s.tokenFor(await s.addUser({ uid: 'dave', email: 'dave@example.com', labels: 'eng' })));
    const query = { query: WORDS.join(' '), limit: 3 };
    const results = await Promise.all([
      call(carol, 'search', query),
      call(carol, 'search', query),
      call(carol, 'search', query),
      call(dave, 'search', query),
    ]);
    const refused = results.filter((r) => r.isError);
    assert.equal(refused.length, 1, JSON.stringify(results.map((r) => r.content)));
    assert.match(refused[0]!.content[0]!.text, /2 broad searches under way already: wait for one to finish/);
    assert.equal(results[3]!.isError, undefined, "dave's search is not refused");
    for (const r of results.filter((r) => !r.isError)) assert.equal(r.structuredContent?.results?.length, 3);
  });
});

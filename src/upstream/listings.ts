// An `auth = oauth` upstream lists each person their own tools (CONTRACT §6.1, "A person's upstream session is
// theirs"): svc keeps what each person's connection listed, and no person's listing decides another's. The tools
// recorded for the upstream are those some connected person's listing has (a tool is `gone` only when none has it),
// each recorded as its approved definition while anyone lists that, else as most people list it; a person is offered
// only the tools their own listing has, as they were approved (upstream/gateway.ts).
import type { Listing } from '../store/upstream-accounts.ts';
import type { FoundTool } from '../store/upstream-tools.ts';

/** A listing as svc stores it: each tool's fingerprint, null for a tool the listing holds (it is offered to no one). */
export function listingOf(found: readonly FoundTool[]): Listing {
  return Object.fromEntries(found.map((t) => [t.name, t.held === null ? t.fingerprint : null]));
}

/** The fingerprint a person's listing has for a tool; null when it does not list it, or holds it. */
export function listedFingerprint(listing: Listing | null | undefined, name: string): string | null {
  return listing && Object.hasOwn(listing, name) ? (listing[name] ?? null) : null;
}

/** A connected person's account, as choosing whose listings to take asks of it. */
export interface Listable {
  readonly connectedAt: number;
  readonly lastUsedAt: number | null;
  readonly listedAt: number | null;
}

/**
 * Whose connections to list in one discovery, at most `max`: those never listed first (the newest connection first:
 * who just connected), then half the room for the most recently used, the rest for those listed longest ago, so
 * every person's listing is taken again in turn. `more`: people never listed are left for another run.
 */
export function whomToList<A extends Listable>(live: readonly A[], max: number): { pick: A[]; more: boolean } {
  const never = live.filter((a) => a.listedAt === null).sort((a, b) => b.connectedAt - a.connectedAt);
  const pick = never.slice(0, max);
  const rest = live.filter((a) => a.listedAt !== null);
  const room = max - pick.length;
  const recent = [...rest].sort((a, b) => (b.lastUsedAt ?? b.connectedAt) - (a.lastUsedAt ?? a.connectedAt)).slice(0, Math.ceil(room / 2));
  const oldest = rest.filter((a) => !recent.includes(a)).sort((a, b) => a.listedAt! - b.listedAt!);
  pick.push(...recent, ...oldest.slice(0, room - recent.length));
  return { pick, more: never.length > max };
}

/** How many connected people's listings give a tool a fingerprint (null: hold it). */
export interface Vote {
  readonly name: string;
  readonly fingerprint: string | null;
  readonly people: number;
}

/** What discovery records of an `auth = oauth` upstream: definitions found, names whose row stays as it is, names left out. */
export interface Merged {
  readonly found: FoundTool[];
  readonly keep: Set<string>;
  readonly refused: number;
}

/**
 * Merges the connected people's listings (their `votes`) into what is recorded for the upstream. Every name some
 * listing has is recorded (the names most people list first, at most `max`), as one definition: the approved one
 * while anyone lists it (so another person's listing cannot turn it `changed` for those who list it as approved),
 * else the one most people list. A definition is recorded from this run's `fresh` listings; when none of them has
 * the chosen one, the row stays as it is (`keep`).
 */
export function mergeListings(
  votes: readonly Vote[],
  fresh: readonly (readonly FoundTool[])[],
  rows: ReadonlyMap<string, { fingerprint: string; approvedFingerprint: string | null }>,
  max: number,
): Merged {
  const byName = new Map<string, { people: number; fingerprints: Map<string, number> }>();
  for (const v of votes) {
    const name = byName.get(v.name) ?? { people: 0, fingerprints: new Map<string, number>() };
    name.people += v.people;
    if (v.fingerprint !== null) name.fingerprints.set(v.fingerprint, (name.fingerprints.get(v.fingerprint) ?? 0) + v.people);
    byName.set(v.name, name);
  }
  // Of this run's listings, the fingerprints listed of each name, and one definition of each: one not held where there is one.
  const listedNow = new Map<string, Set<string>>();
  const definitions = new Map<string, FoundTool>();
  for (const listing of fresh)
    for (const t of listing) {
      listedNow.set(t.name, (listedNow.get(t.name) ?? new Set()).add(t.fingerprint));
      const key = `${t.name}\n${t.fingerprint}`;
      if (!definitions.has(key) || (definitions.get(key)!.held !== null && t.held === null)) definitions.set(key, t);
    }
  const names = [...byName.entries()].sort(([a, x], [b, y]) => y.people - x.people || (a < b ? -1 : 1));
  const merged: Merged = { found: [], keep: new Set(), refused: Math.max(0, names.length - max) };
  for (const [name, { fingerprints }] of names.slice(0, max)) {
    const row = rows.get(name);
    const options = new Set(listedNow.get(name));
    if (row) options.add(row.fingerprint);
    // The approved one while anyone lists it; the one most people list; of those, the one recorded now (no flapping
    // between runs that listed different people); one listed in this run (where every listing holds it, so the row
    // says why); one not held.
    const rank = (f: string) => [
      f === row?.approvedFingerprint && fingerprints.has(f) ? 1 : 0,
      fingerprints.get(f) ?? 0,
      f === row?.fingerprint && fingerprints.has(f) ? 1 : 0,
      listedNow.get(name)?.has(f) ? 1 : 0,
      definitions.get(`${name}\n${f}`)?.held === null ? 1 : 0,
    ];
    const chosen = [...options].sort((a, b) => compareRanks(rank(b), rank(a)) || (a < b ? -1 : 1))[0];
    const definition = chosen === undefined ? undefined : definitions.get(`${name}\n${chosen}`);
    if (definition) merged.found.push(definition);
    else if (row) merged.keep.add(name);
  }
  return merged;
}

function compareRanks(a: readonly number[], b: readonly number[]): number {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return 0;
}

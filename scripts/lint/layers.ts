// biome.json's import rules, made from the two tables of docs/architecture.md: the layers (which folder of src/ may
// import which) and each library's home. `npm run layers` writes them; test/architecture.test.ts checks that
// biome.json is what the tables make.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = join(import.meta.dirname, '../..');
const DOC = 'docs/architecture.md';

export interface Tables {
  /** folder of src/ → the folders it may import */
  readonly layers: ReadonlyMap<string, readonly string[]>;
  /** library → the folders it may be imported from */
  readonly libraries: ReadonlyMap<string, readonly string[]>;
}

const names = (cell: string) => [...cell.matchAll(/`([^`]+?)\/?`/g)].map((m) => m[1]!);

export function readTables(doc = readFileSync(join(ROOT, DOC), 'utf8')): Tables {
  const layers = new Map<string, string[]>();
  const libraries = new Map<string, string[]>();
  for (const line of doc.split('\n')) {
    const layer = /^\| `([a-z-]+)\/` \|.*\| ([^|]+) \|$/.exec(line);
    if (layer) layers.set(layer[1]!, names(layer[2]!));
    const library = /^\| (`[^/|]+`(?:, `[^/|]+`)*) \| ([^|]+) \|$/.exec(line);
    if (library)
      for (const lib of names(library[1]!))
        libraries.set(
          lib,
          names(library[2]!).filter((n) => layers.has(n)),
        );
  }
  return { layers, libraries };
}

type Pattern = { group: string[]; message: string };

/** Patterns for a folder: `**\/x/**` matches x at any depth; auth is named relatively, since config/ has an auth/ too. */
const folderPatterns = (folder: string) => (folder === 'auth' ? [`../${folder}/**`, `../../${folder}/**`] : [`**/${folder}/**`]);

function patternsFor(folder: string, tables: Tables): Pattern[] {
  const allowed = tables.layers.get(folder)!;
  const forbidden = [...tables.layers.keys()].filter((f) => f !== folder && !allowed.includes(f));
  const patterns: Pattern[] = [];
  if (forbidden.length > 0) {
    patterns.push({
      group: forbidden.flatMap(folderPatterns),
      message: `${folder}/ may import only ${allowed.join(', ') || 'nothing else of svc'} (layers: ${DOC}).`,
    });
  }
  const leaf = allowed.length === 0;
  const roots = leaf ? ['server', 'cluster', 'main', 'log', 'version'] : folder === 'cli' ? ['main'] : ['server', 'cluster', 'main'];
  patterns.push({
    group: roots.flatMap((r) => [`../${r}.ts`, `../../${r}.ts`]),
    message: leaf
      ? `${folder}/ is a leaf: it imports nothing of svc (${DOC}).`
      : `${roots.map((r) => `${r}.ts`).join(' and ')} compose svc from the top; nothing below imports them (${DOC}).`,
  });
  if (allowed.includes('db') && folder !== 'store') {
    patterns.push({ group: ['**/db/schema.ts'], message: `queries live in store/: ${folder}/ calls a store function (${DOC}).` });
  }
  const libraries = [...tables.libraries].filter(([, homes]) => !homes.includes(folder)).map(([lib]) => lib);
  if (libraries.length > 0) {
    patterns.push({
      group: libraries.flatMap((l) => [l, `${l}/**`]),
      message: `${libraries.join(', ')}: each library has one home (${DOC}); ${folder}/ goes through it.`,
    });
  }
  return patterns;
}

/** The overrides biome.json must hold, one per folder of src/ in the table's order. */
export function overrides(tables: Tables): unknown[] {
  return [...tables.layers.keys()].map((folder) => ({
    includes: [`src/${folder}/**`],
    linter: { rules: { style: { noRestrictedImports: { level: 'error', options: { patterns: patternsFor(folder, tables) } } } } },
  }));
}

if (process.argv[1] === import.meta.filename) {
  const path = join(ROOT, 'biome.json');
  const config = JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
  config.overrides = overrides(readTables());
  writeFileSync(path, `${JSON.stringify(config, null, 2)}\n`);
  console.log(`biome.json: ${(config.overrides as unknown[]).length} folders from ${DOC}`);
}

// The rules of docs/architecture.md, checked: its layer table agrees with biome.json, Biome refuses an import across
// the layers and a write begun in the wrong folder (and lets the allowed ones through), no function in src/ is over
// 80 lines, and the store takes typed values only.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import ts from 'typescript';
import { overrides, readTables } from '../scripts/lint/layers.ts';

const ROOT = join(import.meta.dirname, '..');
const SRC = join(ROOT, 'src');
const run = promisify(execFile);

const srcFolders = () =>
  readdirSync(SRC)
    .filter((f) => statSync(join(SRC, f)).isDirectory())
    .sort();

describe('the layers', () => {
  test('every folder of src/ has its row in docs/architecture.md, and biome.json holds the rules its tables make', () => {
    const tables = readTables();
    assert.deepEqual([...tables.layers.keys()].sort(), srcFolders(), 'docs/architecture.md names every folder of src/');
    assert.ok(tables.layers.get('domain')!.length === 0 && tables.layers.get('http')!.includes('account'), 'the layer table was read');
    assert.deepEqual(tables.libraries.get('drizzle-orm'), ['db', 'store'], 'the library table was read');
    const config = JSON.parse(readFileSync(join(ROOT, 'biome.json'), 'utf8')) as { overrides: unknown };
    assert.deepEqual(config.overrides, overrides(tables), 'biome.json is out of date with docs/architecture.md: run npm run layers');
  });

  test('Biome refuses imports across the layers and writes begun outside actions, auth and jobs; it lets the allowed ones through', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-layers-'));
    try {
      const config = JSON.parse(readFileSync(join(ROOT, 'biome.json'), 'utf8')) as Record<string, unknown>;
      config.vcs = { enabled: false };
      config.files = { includes: ['src/**'] };
      writeFileSync(join(dir, 'biome.json'), JSON.stringify(config));
      cpSync(join(ROOT, 'scripts/lint'), join(dir, 'scripts/lint'), { recursive: true });
      const probes: Record<string, { code: string; refused: string | null }> = {
        'src/domain/up.ts': { code: "import { x } from '../store/users.ts';\nexport const y = x;\n", refused: 'domain/' },
        'src/domain/lib.ts': { code: "import { sql } from 'drizzle-orm';\nexport const y = sql;\n", refused: 'one home' },
        'src/http/routes/query.ts': {
          code: "import { users } from '../../db/schema.ts';\nexport const y = users;\n",
          refused: 'queries live in store/',
        },
        'src/store/up.ts': { code: "import { x } from '../auth/core.ts';\nexport const y = x;\n", refused: 'store/' },
        'src/config/auth/up.ts': { code: "import { x } from '../../auth/core.ts';\nexport const y = x;\n", refused: 'config/' },
        'src/config/own.ts': { code: "import { x } from './auth/oidc.ts';\nexport const y = x;\n", refused: null },
        'src/account/side.ts': { code: "import { x } from '../admin/actions.ts';\nexport const y = x;\n", refused: 'account/' },
        'src/mcp/http.ts': { code: "import { Hono } from 'hono';\nexport const y = Hono;\n", refused: 'one home' },
        'src/http/routes/compose.ts': { code: "import { x } from '../../server.ts';\nexport const y = x;\n", refused: 'compose' },
        'src/http/routes/write.ts': {
          code: 'declare const database: { write(f: (tx: unknown) => Promise<void>): Promise<void> };\nexport const f = () => database.write(async (tx) => void tx);\n',
          refused: 'A write begins',
        },
        'src/store/write.ts': {
          code: 'declare const s: { database: { write(f: unknown): Promise<void> } };\ndeclare const fn: unknown;\nexport const f = () => s.database.write(fn);\n',
          refused: 'A write begins',
        },
        'src/http/routes/ok.ts': {
          code: "import { a } from '../../store/users.ts';\nimport { b } from '../../account/actions.ts';\nimport { c } from '../policy.ts';\nexport const y = [a, b, c];\n",
          refused: null,
        },
        'src/cli/ok.ts': { code: "import { x } from '../server.ts';\nexport const y = x;\n", refused: null },
        'src/account/write.ts': {
          code: 'declare const database: { write(f: (tx: unknown) => Promise<void>): Promise<void> };\nexport const f = () => database.write(async (tx) => void tx);\n',
          refused: null,
        },
        'src/http/routes/stream.ts': { code: "export const f = () => process.stdout.write('a line');\n", refused: null },
      };
      for (const [path, { code }] of Object.entries(probes)) {
        mkdirSync(dirname(join(dir, path)), { recursive: true });
        writeFileSync(join(dir, path), code);
      }
      const biome = join(ROOT, 'node_modules/.bin/biome');
      const out = await run(biome, ['lint', '--reporter=json', 'src'], { cwd: dir }).catch((e: { stdout: string }) => e);
      const report = JSON.parse(out.stdout) as { diagnostics: { category: string; message: string; location: { path: string } }[] };
      const found = new Map<string, string[]>();
      for (const d of report.diagnostics)
        found.set(d.location.path, [...(found.get(d.location.path) ?? []), `${d.category}: ${d.message}`]);
      for (const [path, { refused }] of Object.entries(probes)) {
        const messages = found.get(path) ?? [];
        if (refused === null) assert.deepEqual(messages, [], `${path} is allowed`);
        else
          assert.ok(
            messages.some((m) => m.includes(refused)),
            `${path} is refused (mentioning "${refused}"); got ${JSON.stringify(messages)}`,
          );
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = join(dir, f);
    return statSync(p).isDirectory() ? sourceFiles(p) : /\.tsx?$/.test(f) ? [p] : [];
  });
}

function parsed(file: string): ts.SourceFile {
  const kind = file.endsWith('.tsx') ? ts.ScriptKind.TSX : ts.ScriptKind.TS;
  return ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true, kind);
}

function eachFunction(source: ts.SourceFile, visit: (fn: ts.FunctionLikeDeclaration) => void): void {
  const walk = (node: ts.Node): void => {
    if (ts.isFunctionDeclaration(node) || ts.isMethodDeclaration(node) || ts.isArrowFunction(node) || ts.isFunctionExpression(node))
      visit(node);
    ts.forEachChild(node, walk);
  };
  walk(source);
}

describe('the code', () => {
  test('no function in src/ is longer than 80 lines', () => {
    const long: string[] = [];
    for (const file of sourceFiles(SRC)) {
      const source = parsed(file);
      eachFunction(source, (fn) => {
        const first = source.getLineAndCharacterOfPosition(fn.getStart()).line;
        const lines = source.getLineAndCharacterOfPosition(fn.getEnd()).line - first + 1;
        if (lines > 80) long.push(`${file.slice(ROOT.length + 1)}:${first + 1} (${lines} lines)`);
      });
    }
    assert.deepEqual(long, []);
  });

  test('store/ takes typed values: no parameter of type unknown, no input checking (badRequest)', () => {
    const found: string[] = [];
    for (const file of sourceFiles(join(SRC, 'store'))) {
      const source = parsed(file);
      if (/\bbadRequest\b/.test(source.text)) found.push(`${file.slice(ROOT.length + 1)}: badRequest`);
      eachFunction(source, (fn) => {
        for (const p of fn.parameters) {
          if (p.type?.kind === ts.SyntaxKind.UnknownKeyword) found.push(`${file.slice(ROOT.length + 1)}: ${p.getText()}`);
        }
      });
    }
    assert.deepEqual(found, []);
  });
});

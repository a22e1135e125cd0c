import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

/**
 * Issue 14: the web index is an application of the public API. Every module of the web-index
 * layers reaches the framework only through the package's public entries (package.json
 * `exports`), and no framework module imports the web index (docs/ARCHITECTURE.md, "Layers").
 * Imports are read with TypeScript's `preProcessFile` (static imports, `export ... from`,
 * `import type`, dynamic `import()`), not by running anything.
 */
const src = fileURLToPath(new URL('../src/', import.meta.url));

/** Folders of the web index (the application). */
const WEB_INDEX = ['actors', 'topology', 'jobs', 'query', 'cli', 'replay'];
/** Folders and top-level modules of the framework. */
const FRAMEWORK = ['runtime', 'storage', 'checkpoint', 'operators', 'testing', 'cluster', 'index.ts', 'errors.ts'];
/** The public entries (src-relative) and their package specifiers. */
const ENTRIES: Readonly<Record<string, string>> = {
  'index.ts': 'shardflow',
  'storage/index.ts': 'shardflow/storage',
  'runtime/brokers/index.ts': 'shardflow/brokers',
  'testing/index.ts': 'shardflow/testing',
};
const PACKAGE_SPECIFIERS = new Set(Object.values(ENTRIES));

/** One import that breaks the rule, for the failure message. */
interface Violation {
  readonly file: string;
  readonly line: number;
  readonly specifier: string;
  readonly why: string;
}

function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((d) => {
    const p = join(dir, d.name);
    return d.isDirectory() ? tsFiles(p) : d.name.endsWith('.ts') ? [p] : [];
  });
}

/** The src-relative path (with `/`) a relative specifier of `file` names, `.js` read as `.ts`. */
function target(file: string, specifier: string): string {
  return relative(src, resolve(dirname(file), specifier)).split(sep).join('/').replace(/\.js$/, '.ts');
}

/** The layer of a src-relative path: its first segment. */
const layerOf = (path: string): string => path.split('/')[0]!;

/** Every import specifier of `text`, with its 1-based line. */
function importsOf(text: string): Array<{ specifier: string; line: number }> {
  const info = ts.preProcessFile(text, true, true);
  return info.importedFiles.map((f) => ({ specifier: f.fileName, line: text.slice(0, f.pos).split('\n').length }));
}

/**
 * What is wrong with the imports of one module at `file` (absolute, under src) holding `text`.
 * A web-index module may import other web-index modules, packages, and the framework only
 * through `ENTRIES` (by relative path or package name), nothing outside src/; a framework
 * module may import no web-index module (the native addon under native/ is its own).
 */
function check(file: string, text: string): Violation[] {
  const own = relative(src, file).split(sep).join('/');
  const web = WEB_INDEX.includes(layerOf(own));
  const out: Violation[] = [];
  for (const { specifier, line } of importsOf(text)) {
    const at = { file: `src/${own}`, line, specifier };
    if (!specifier.startsWith('.')) {
      if (!web && (specifier === 'shardflow' || specifier.startsWith('shardflow/'))) out.push({ ...at, why: 'the framework imports itself by relative path, not by package name' });
      else if (web && specifier.startsWith('shardflow/') && !PACKAGE_SPECIFIERS.has(specifier)) out.push({ ...at, why: `not a public entry (${[...PACKAGE_SPECIFIERS].join(', ')})` });
      continue;
    }
    const path = target(file, specifier);
    const layer = layerOf(path);
    if (path.startsWith('..')) {
      if (web) out.push({ ...at, why: 'reaches outside src/ (the native addon is the framework\'s)' });
    } else if (web && FRAMEWORK.includes(layer) && !(path in ENTRIES)) {
      out.push({ ...at, why: `reaches into the framework (src/${path}): import it from a public entry (${Object.keys(ENTRIES).map((e) => `src/${e}`).join(', ')})` });
    } else if (!web && WEB_INDEX.includes(layer)) {
      out.push({ ...at, why: `the framework imports the web index (src/${path})` });
    }
  }
  return out;
}

const format = (v: readonly Violation[]): string => v.map((x) => `${x.file}:${x.line} imports '${x.specifier}': ${x.why}`).join('\n');

test('every folder and top-level module of src/ is either framework or web index', () => {
  const top = readdirSync(src, { withFileTypes: true }).filter((d) => d.isDirectory() || d.name.endsWith('.ts')).map((d) => d.name);
  const unknown = top.filter((n) => !WEB_INDEX.includes(n) && !FRAMEWORK.includes(n));
  assert.deepEqual(unknown, [], `unclassified in src/: ${unknown.join(', ')} (add each to WEB_INDEX or FRAMEWORK in this test and to docs/ARCHITECTURE.md)`);
});

test('the web index imports the framework only through the public entries', () => {
  const files = WEB_INDEX.flatMap((d) => tsFiles(join(src, d)));
  assert.ok(files.length > 50, `found only ${files.length} web-index modules`);
  const violations = files.flatMap((f) => check(f, readFileSync(f, 'utf8')));
  assert.equal(violations.length, 0, `\n${format(violations)}`);
});

test('no framework module imports the web index', () => {
  const files = FRAMEWORK.flatMap((n) => (n.endsWith('.ts') ? [join(src, n)] : tsFiles(join(src, n))));
  assert.ok(files.length > 50, `found only ${files.length} framework modules`);
  const violations = files.flatMap((f) => check(f, readFileSync(f, 'utf8')));
  assert.equal(violations.length, 0, `\n${format(violations)}`);
});

test('the check names the file, line and import of each kind of violation', () => {
  const webFile = join(src, 'actors', 'indexer', 'example.ts');
  const frameworkFile = join(src, 'runtime', 'stream', 'example.ts');
  const web = check(
    webFile,
    [
      "import { Store } from '../../storage/index.js';", // an entry: allowed
      "import type { Broker } from '../../runtime/brokers/index.js';", // an entry: allowed
      "import { StreamOutbox } from 'shardflow';", // an entry by package name: allowed
      "import { Namespaces } from '../namespaces.js';", // the web index itself: allowed
      "import { topic } from '../../runtime/topics.js';",
      "export { hostOf } from '../../runtime/partitioner.js';",
      "import type { Store as S } from '../../storage/store.js';",
      "const m = await import('../../runtime/actor/system.js');",
      "import { InvalidArgumentError } from '../../errors.js';",
      "import { x } from 'shardflow/runtime/ids';",
    ].join('\n'),
  );
  assert.deepEqual(
    web.map((v) => [v.file, v.line, v.specifier]),
    [
      ['src/actors/indexer/example.ts', 5, '../../runtime/topics.js'],
      ['src/actors/indexer/example.ts', 6, '../../runtime/partitioner.js'],
      ['src/actors/indexer/example.ts', 7, '../../storage/store.js'],
      ['src/actors/indexer/example.ts', 8, '../../runtime/actor/system.js'],
      ['src/actors/indexer/example.ts', 9, '../../errors.js'],
      ['src/actors/indexer/example.ts', 10, 'shardflow/runtime/ids'],
    ],
  );
  const framework = check(frameworkFile, "import { ok } from './outbox.js';\nimport { Namespaces } from '../../actors/namespaces.js';\nimport { x } from 'shardflow';");
  assert.deepEqual(
    framework.map((v) => [v.file, v.line, v.specifier]),
    [
      ['src/runtime/stream/example.ts', 2, '../../actors/namespaces.js'],
      ['src/runtime/stream/example.ts', 3, 'shardflow'],
    ],
  );
  assert.match(format(framework), /src\/runtime\/stream\/example\.ts:2 imports '\.\.\/\.\.\/actors\/namespaces\.js': the framework imports the web index/);
});

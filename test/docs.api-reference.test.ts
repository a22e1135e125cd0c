import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The API reference in docs/api is generated from the docstrings of the four entry points
 * (typedoc.json, `npm run docs`) and committed. This regenerates it into a temp dir with
 * `--treatWarningsAsErrors` (a public type that names an unexported type, or a `{@link}` to
 * something the reference does not hold, fails here) and fails when the committed copy differs:
 * a docstring or an export changed without `npm run docs`.
 */
const root = fileURLToPath(new URL('..', import.meta.url));
const committed = join(root, 'docs', 'api');

/** Every file under `dir`, as paths relative to it, sorted. */
function files(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((d) => d.isFile())
    .map((d) => relative(dir, join(d.parentPath, d.name)))
    .sort();
}

test('docs/api is what `npm run docs` generates now, without TypeDoc warnings', { timeout: 300_000 }, () => {
  const out = mkdtempSync(join(tmpdir(), 'sf-api-docs-'));
  try {
    const typedoc = join(root, 'node_modules', 'typedoc', 'bin', 'typedoc');
    const r = spawnSync(process.execPath, [typedoc, '--out', out, '--treatWarningsAsErrors'], { cwd: root, encoding: 'utf8', timeout: 240_000 });
    assert.equal(r.status, 0, `TypeDoc failed (fix the docstrings or exports it names):\n${r.stdout}${r.stderr}`);
    const fresh = files(out);
    const have = files(committed);
    const stale = [
      ...fresh.filter((f) => !have.includes(f)).map((f) => `missing: docs/api/${f}`),
      ...have.filter((f) => !fresh.includes(f)).map((f) => `no longer generated: docs/api/${f}`),
      ...fresh.filter((f) => have.includes(f) && readFileSync(join(out, f), 'utf8') !== readFileSync(join(committed, f), 'utf8')).map((f) => `differs: docs/api/${f}`),
    ];
    assert.deepEqual(stale, [], `docs/api is stale: run \`npm run docs\` and commit docs/api\n  ${stale.slice(0, 20).join('\n  ')}`);
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { repoRoot } from './kit/datasets.js';

// Benchmarks that cannot rot: every benchmark in bench/ (each .ts file directly in it, found
// here as bench/run.mjs finds them, so a new one is covered without being listed) runs in
// smoke mode (`--smoke`: tiny inputs, the same code paths, seconds) through the runner, as
// `npm run -s bench -- NAME --smoke --json` does, and must exit 0 and print exactly one JSON
// line with the runner's fields and the fields its module declares (`resultFields`).
// Benchmarks that use Redis or Pulsar do when reachable; with SHARDFLOW_REQUIRE_BROKERS=1
// (CI) an unreachable one fails the benchmark, and no part of a result may be skipped.
// The time bound is hang detection only (a smoke run takes seconds), never a speed target.

const benchDir = join(repoRoot, 'bench');
const names = readdirSync(benchDir).filter((f) => f.endsWith('.ts')).map((f) => f.slice(0, -3)).sort();
// A benchmark whose smoke run needs longer (worker processes) exports its own `smokeHangMs`.
const HANG_MS = 90_000;

/** Runs `./bench/run.mjs args` from the repository root; killed (SIGTERM) after `hangMs`. */
function runBench(args: string[], hangMs: number): Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string; ms: number }> {
  const t0 = performance.now();
  return new Promise((resolve) => {
    execFile(join(benchDir, 'run.mjs'), args, { cwd: repoRoot, timeout: hangMs, maxBuffer: 64 * 2 ** 20 }, (err, stdout, stderr) => {
      const e = err as (Error & { code?: number | string; signal?: NodeJS.Signals | null }) | null;
      resolve({ code: e ? (typeof e.code === 'number' ? e.code : null) : 0, signal: e?.signal ?? null, stdout, stderr, ms: performance.now() - t0 });
    });
  });
}

/** Paths (`brokers.redis`) of the objects in `value` that carry a `skipped` reason. */
function skippedParts(value: unknown, path = ''): Array<{ path: string; reason: unknown }> {
  if (value === null || typeof value !== 'object') return [];
  const here = 'skipped' in value ? [{ path: path || '(result)', reason: (value as { skipped: unknown }).skipped }] : [];
  return here.concat(Object.entries(value).flatMap(([k, v]) => skippedParts(v, path ? `${path}.${k}` : k)));
}

test('bench/ holds benchmarks for the smoke runs to find', () => {
  assert.ok(names.length > 0, `no .ts file in ${benchDir}`);
});

for (const name of names) {
  const mod = (await import(join(benchDir, `${name}.ts`))) as { run?: unknown; resultFields?: unknown; smokeHangMs?: unknown };
  const hangMs = typeof mod.smokeHangMs === 'number' && mod.smokeHangMs > 0 ? mod.smokeHangMs : HANG_MS;
  test(`bench ${name} --smoke exits 0 and prints one JSON line with its fields`, { timeout: hangMs + 30_000 }, async (t) => {
    assert.equal(typeof mod.run, 'function', `bench/${name}.ts exports run(args)`);
    assert.ok(Array.isArray(mod.resultFields) && mod.resultFields.length > 0, `bench/${name}.ts exports resultFields, the top-level fields of its result line`);
    const fields = mod.resultFields as string[];

    const r = await runBench([name, '--smoke', '--json'], hangMs);
    assert.equal(r.signal, null, `killed by ${r.signal} after ${Math.round(r.ms)} ms (hung?); stderr: ${r.stderr.slice(-2000)}`);
    assert.equal(r.code, 0, `exit code ${r.code}; stderr: ${r.stderr.slice(-2000)}`);
    const lines = r.stdout.split('\n').filter((l) => l.trim() !== '');
    assert.equal(lines.length, 1, `exactly one line on stdout, got ${lines.length}: ${r.stdout.slice(0, 2000)}`);
    let result: Record<string, unknown>;
    try {
      result = JSON.parse(lines[0]!) as Record<string, unknown>;
    } catch (err) {
      assert.fail(`stdout is not JSON (${(err as Error).message}): ${lines[0]!.slice(0, 2000)}`);
    }
    assert.ok(result !== null && typeof result === 'object' && !Array.isArray(result), 'the line is one JSON object');
    assert.equal(result.name, name);
    assert.equal(typeof result.commit, 'string');
    assert.equal(result.mallocTuned, true, "run.mjs's shebang set the allocator thresholds");
    assert.equal(result.smoke, true, 'the benchmark ran in smoke mode and says so');
    const missing = fields.filter((f) => !(f in result) || result[f] === undefined);
    assert.deepEqual(missing, [], `fields of bench/${name}.ts missing from its line: ${lines[0]!.slice(0, 2000)}`);

    const skipped = skippedParts(result);
    if (process.env.SHARDFLOW_REQUIRE_BROKERS === '1') assert.deepEqual(skipped, [], 'nothing skipped with SHARDFLOW_REQUIRE_BROKERS=1');
    for (const s of skipped) t.diagnostic(`${name}: ${s.path} skipped: ${String(s.reason)}`);
    t.diagnostic(`${name}: ${Math.round(r.ms)} ms`);
  });
}

// `npm run demo -- --workers 3` (issue #15, laptop simulation): three worker processes and
// the job as a client print the same result as the one-process demo: the same page, link and
// backlink counts and top 10, and an L1 distance to the reference within 1e-6.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { resolve } from 'node:path';
import { test } from 'node:test';
import { REDIS_URL, skipWithoutRedis } from './kit/cluster.js';
import { repoRoot } from './kit/datasets.js';

/** The lines both runs must print alike: counts and the top 10. */
function summary(stdout: string): string[] {
  const lines = stdout.split('\n');
  const top = lines.indexOf('top 10 pages by score:');
  assert.ok(top >= 0, `a top 10 in: ${stdout.slice(-2000)}`);
  return [...lines.filter((l) => /^(pages fetched|links stored|backlinks stored):/.test(l)), ...lines.slice(top, top + 11)];
}

function l1(stdout: string): number {
  const m = /L1 distance to .*: (\S+)/.exec(stdout);
  assert.ok(m, `an L1 line in: ${stdout.slice(-2000)}`);
  return Number(m[1]);
}

test('demo --workers 3 prints the one-process demo\'s result', { timeout: 480_000 }, async (t) => {
  if (await skipWithoutRedis(t)) return;
  const run = (...args: string[]) => spawnSync(process.execPath, [resolve(repoRoot, 'bin/shardflow.mjs'), 'demo', '--partitions', '6', ...args], { cwd: repoRoot, encoding: 'utf8', timeout: 400_000 });
  const cluster = run('--workers', '3', '--cluster', REDIS_URL, '--broker', REDIS_URL);
  assert.equal(cluster.status, 0, cluster.stderr.slice(-3000));
  assert.match(cluster.stdout, /the 3 workers handed their partitions back and exited 0/);
  const one = run();
  assert.equal(one.status, 0, one.stderr.slice(-3000));
  assert.deepEqual(summary(cluster.stdout), summary(one.stdout));
  assert.ok(l1(cluster.stdout) <= 1e-6 && l1(one.stdout) <= 1e-6, `L1 ${l1(cluster.stdout)} (cluster), ${l1(one.stdout)} (one process)`);
});

test('demo --workers refuses what runs in one process only', async () => {
  const r = spawnSync(process.execPath, [resolve(repoRoot, 'bin/shardflow.mjs'), 'demo', '--workers', '2', '--chaos', '0.01'], { cwd: repoRoot, encoding: 'utf8', timeout: 60_000 });
  assert.equal(r.status, 2);
  assert.match(r.stderr, /--chaos runs in one process only/);
});

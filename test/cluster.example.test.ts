import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { REDIS_URL, skipWithoutRedis } from './kit/cluster.js';

/**
 * The laptop simulation as a user runs it: `npm run example -- click-counter --workers 3`
 * starts three `shardflow worker` processes over Redis Streams and produces from the example's
 * process; it prints the same counts as the one-process run of the same clicks (the producer's
 * first epoch seeds them) and checks them against the ground truth computed without shardflow.
 */
const root = fileURLToPath(new URL('..', import.meta.url));

function example(args: string[]): string {
  const r = spawnSync('npm', ['run', '-s', 'example', '--', 'click-counter', '--events', '2000', ...args], { cwd: root, encoding: 'utf8', timeout: 150_000 });
  assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

/** The result lines: the count line and the top hosts. */
const result = (out: string): string[] => out.split('\n').filter((l) => /^counted |^  site-/.test(l)).map((l) => l.replace(/; partition restarts: .*;/, ';'));

test('click-counter --workers 3 prints what one process prints, equal to the ground truth', { timeout: 200_000 }, async (t) => {
  if (await skipWithoutRedis(t)) return;
  const cluster = example(['--workers', '3', '--broker', REDIS_URL]);
  assert.match(cluster, /cluster click-counter-[0-9a-f]{8} \(Redis redis:\/\/.*\): w1 pid \d+ runs \d partitions; w2 .*; w3 /);
  assert.match(cluster, /the 3 workers handed their partitions back and exited 0/);
  assert.match(cluster, /sent 2000 clicks over redis:\/\/\S+ to 3 worker processes/);
  assert.match(cluster, /check: equal to the ground truth computed without shardflow/);
  const one = example([]);
  assert.equal(result(cluster).length, 6);
  assert.deepEqual(result(cluster), result(one), 'the same counts as one process');
});

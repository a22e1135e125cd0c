import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { tempDir } from './kit/datasets.js';

/**
 * examples/click-counter as CI runs it (`npm run example -- click-counter`): with
 * `--chaos 0.05` over the memory broker and over Redis, twice on one data dir, each run checks
 * its counts against a count without shardflow and exits 1 on a mismatch; the second run's
 * producer has epoch 2 and the counts hold both runs' events.
 */
const root = fileURLToPath(new URL('..', import.meta.url));
const redis = process.env.SHARDFLOW_REDIS_URL ?? 'redis://127.0.0.1:6379';

function example(args: string[]): string {
  const r = spawnSync('npm', ['run', '-s', 'example', '--', 'click-counter', ...args], { cwd: root, encoding: 'utf8', timeout: 300_000 });
  assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

test('click-counter under chaos, twice on one data dir: memory broker, then Redis', { timeout: 600_000 }, () => {
  const { dir, cleanup } = tempDir('sf-example-');
  try {
    const first = example(['--chaos', '0.05', '--data-dir', dir]);
    assert.match(first, /producer click-source epoch 1: sent 5000 clicks over memory, chaos 0.05/);
    assert.match(first, /counted 5000 clicks \(all runs\) on 40 hosts; partition restarts: \d+; dead letters: 0/);
    assert.match(first, /check: equal to the ground truth computed without shardflow/);
    const second = example(['--chaos', '0.05', '--data-dir', dir, '--broker', redis]);
    assert.match(second, /producer click-source epoch 2: sent 5000 clicks over redis:\/\//);
    assert.match(second, /counted 10000 clicks \(all runs\) on 40 hosts/);
    assert.match(second, /check: equal to the ground truth computed without shardflow/);
  } finally {
    cleanup();
  }
});

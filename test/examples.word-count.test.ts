import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { tempDir } from './kit/datasets.js';

/**
 * examples/word-count as CI runs it (`npm run example -- word-count`), three times on one data
 * dir: memory broker, then `--chaos 0.05` over memory, then `--chaos 0.05` over Redis. Each run
 * checks its index against a computation without shardflow (exactly after `running.compact`,
 * between the live and the all-time counts before it) and exits 1 on a mismatch or a dead
 * letter. The first run, with no restarts, had no compaction before its own: every document
 * is there before, and what the ttl filter drops is exactly what is gone after.
 */
const root = fileURLToPath(new URL('..', import.meta.url));
const redis = process.env.SHARDFLOW_REDIS_URL ?? 'redis://127.0.0.1:6379';

function example(args: string[]): string {
  const r = spawnSync('npm', ['run', '-s', 'example', '--', 'word-count', ...args], { cwd: root, encoding: 'utf8', timeout: 300_000 });
  assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
  assert.match(r.stdout, /check: equal to the ground truth computed without shardflow after compaction, within it before/);
  return r.stdout;
}
const numbers = (text: string, re: RegExp): number[] => {
  const m = re.exec(text);
  assert.ok(m, `${re} in\n${text}`);
  return m.slice(1).map(Number);
};

test('word-count: the ttl filter drops expired documents and postings at running.compact; memory, chaos, Redis on one data dir', { timeout: 600_000 }, () => {
  const { dir, cleanup } = tempDir('sf-example-word-count-');
  try {
    const first = example(['--data-dir', dir]);
    const [docsBefore, postingsBefore] = numbers(first, /before compaction: (\d+) documents, (\d+) postings/);
    const [droppedDocs, droppedPostings, earlierDocs, earlierPostings] = numbers(first, /the filter dropped (\d+) documents and (\d+) postings \(before it, RocksDB's own compactions had dropped (\d+) and (\d+)\)/);
    const [docsAfter, postingsAfter] = numbers(first, /after compaction: (\d+) documents, (\d+) postings/);
    assert.equal(docsBefore, 1000);
    assert.deepEqual([earlierDocs, earlierPostings], [0, 0]);
    assert.ok(droppedDocs > 0 && droppedPostings > droppedDocs, 'old documents and their postings expired');
    assert.equal(docsAfter, docsBefore - droppedDocs);
    assert.equal(postingsAfter, postingsBefore - droppedPostings);
    assert.match(first, /producer doc-source epoch 1: sent 1000 documents over memory; /);

    const second = example(['--data-dir', dir, '--chaos', '0.05']);
    assert.match(second, /producer doc-source epoch 2: sent 1000 documents over memory, chaos 0.05/);
    const [docsNow] = numbers(second, /after compaction: (\d+) documents/);
    assert.ok(docsNow > docsAfter, 'the second run adds its live documents to the first run\'s');

    const third = example(['--data-dir', dir, '--chaos', '0.05', '--broker', redis]);
    assert.match(third, /producer doc-source epoch 3: sent 1000 documents over redis:\/\//);
  } finally {
    cleanup();
  }
});

import assert from 'node:assert/strict';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { graphs, tempDir } from './kit/datasets.js';
import { runCli } from './kit/cliRun.js';

// Two jobs on one data dir: the second used to pass the data dir's checks whenever the first
// had not yet opened its stores (they are checked, closed, then opened again by the actors),
// rewrite the record with its own broker scope and remove the first one's scope (seen over
// Pulsar: the first job then hung in its repair without a word for 12 minutes). Otherwise it
// failed on RocksDB's LOCK with "Restore it, or give a fresh --data-dir", as if damaged.
// A data dir now has a lock file naming the job's pid for the whole run.

const tmp = tempDir('shardflow-lock-');
after(() => tmp.cleanup());
const dataDir = join(tmp.dir, 'data');
const args = (out: string) => ['rank', '--pages', join(graphs.polblogs, 'pages.txt'), '--links', join(graphs.polblogs, 'links.tsv'), '--out', join(tmp.dir, out), '--data-dir', dataDir, '--partitions', '4', '--log-level', 'info'];

test('a second job, or a clean, on a data dir in use is refused naming the first job; the first ends exactly', { timeout: 300_000 }, async () => {
  let second: Promise<Awaited<ReturnType<typeof runCli>>> | undefined;
  let clean: Promise<Awaited<ReturnType<typeof runCli>>> | undefined;
  const first = await runCli(args('a.tsv'), {
    onLine: (line, pid) => {
      if (second || !line.startsWith('data dir ')) return;
      // The first job holds the lock from this line on; stopped here until the other two have
      // tried (a polblogs rank can end before another process has even started), then resumed.
      process.kill(pid, 'SIGSTOP');
      second = runCli(args('b.tsv'), { timeoutMs: 120_000 });
      clean = runCli(['clean', '--data-dir', dataDir, '--remove-data'], { timeoutMs: 120_000 });
      void Promise.allSettled([second, clean]).then(() => process.kill(pid, 'SIGCONT'));
    },
  });
  assert.equal(first.code, 0, first.stderr);
  assert.match(first.stderr, /ranked 1489 pages, 18938 links, 18938 backlinks/);
  const b = await second!;
  assert.equal(b.code, 1, b.stderr);
  assert.match(b.stderr, /data dir .* is in use by process \d+ \(another shardflow job on it\)/);
  const c = await clean!;
  assert.notEqual(c.code, 0, c.stderr);
  assert.match(c.stderr, /is in use by process \d+ .*nothing was removed/);
  assert.ok(existsSync(join(dataDir, 'p0')), 'clean removed nothing');
  assert.ok(!existsSync(join(dataDir, 'shardflow.lock')), 'the lock is released at the end');
});

test('a lock left by a killed job is taken over', { timeout: 120_000 }, async () => {
  writeFileSync(join(dataDir, 'shardflow.lock'), '2147483646\n'); // no such process
  const again = await runCli(args('a.tsv'), { timeoutMs: 120_000 });
  assert.equal(again.code, 0, again.stderr);
  assert.ok(!existsSync(join(dataDir, 'shardflow.lock')));
});

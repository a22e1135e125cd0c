import assert from 'node:assert/strict';
import { cpSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { graphs, tempDir } from './kit/datasets.js';
import { runCli } from './kit/cliRun.js';

// A partition folder copied in from another data dir of the same shape (partition 1 of 4,
// fnv1a-host/4) used to pass the data dir's checks; its metric state (last round, last push
// report) belonged to the other run, and the rank job then waited in the metric rounds for
// messages that never come: "no progress: metric rounds, waiting for nothing in flight"
// every 30 s, failing after 10 minutes. Each store now carries its data dir's id.

const tmp = tempDir('shardflow-foreign-');
after(() => tmp.cleanup());

const rank = (dataDir: string, graph: string) =>
  runCli(['rank', '--pages', join(graph, 'pages.txt'), '--links', join(graph, 'links.tsv'), '--out', join(tmp.dir, 'scores.tsv'), '--data-dir', dataDir, '--partitions', '4'], { timeoutMs: 120_000 });

test('a partition store from another data dir of the same shape is refused at once, naming it', { timeout: 300_000 }, async () => {
  const a = join(tmp.dir, 'a');
  const b = join(tmp.dir, 'b');
  assert.equal((await rank(a, graphs.polblogs)).code, 0);
  assert.equal((await rank(b, graphs.epa)).code, 0);
  rmSync(join(a, 'p1'), { recursive: true });
  cpSync(join(b, 'p1'), join(a, 'p1'), { recursive: true });
  const record = readFileSync(join(a, 'shardflow.json'), 'utf8');
  const t0 = performance.now();
  const again = await rank(a, graphs.polblogs);
  assert.equal(again.code, 1, again.stderr);
  assert.ok(performance.now() - t0 < 60_000, 'refused at once, not after a wait');
  assert.match(again.stderr, /partition store p1 \(.*\) was created in another data dir/);
  assert.doesNotMatch(again.stderr, /\n\s+at /, 'no stack trace');
  assert.equal(readFileSync(join(a, 'shardflow.json'), 'utf8'), record, 'the data dir is left as it was');

  // Without its record file, the stores still tell each other apart.
  rmSync(join(a, 'shardflow.json'));
  const noRecord = await rank(a, graphs.polblogs);
  assert.equal(noRecord.code, 1, noRecord.stderr);
  assert.match(noRecord.stderr, /partition store p1 \(.*\) was created in another data dir/);
});

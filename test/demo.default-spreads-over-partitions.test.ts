import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runCli } from './kit/cliRun.js';

// `npm run demo` as a user runs it, defaults only: its default graph (polblogs, 1,489 pages
// over 1,451 hosts, examples/data/polblogs) spreads over all 16 partitions (hollins' 4 hosts
// filled 3), is crawled whole over HTTP and ranks within L1 1e-6 of its reference.

test('the default demo crawls polblogs over all 16 partitions and matches its reference within L1 1e-6', { timeout: 300_000 }, async () => {
  const r = await runCli(['demo'], { timeoutMs: 240_000 });
  assert.equal(r.code, 0, r.stderr.slice(-2000));
  assert.match(r.stdout, /^shardflow demo: 16 partitions/m);
  assert.match(r.stdout, /^graph: 1489 pages, 19090 link lines \(.*examples\/data\/polblogs\/pages\.txt\)$/m);
  assert.match(r.stdout, /pages fetched: +1489\n/);
  assert.match(r.stdout, /links stored: +18938\n/);
  assert.match(r.stdout, /backlinks stored: +18938\n/);
  assert.match(r.stdout, /; converged\n/);

  const partitions = [...r.stdout.matchAll(/^ {2}p(\d+): (\d+) \/ (\d+) \/ (\d+)$/gm)].map((m) => ({ p: Number(m[1]), pages: Number(m[2]) }));
  assert.deepEqual(partitions.map((x) => x.p), [...Array(16).keys()], 'one count line per partition');
  assert.deepEqual(partitions.filter((x) => x.pages === 0), [], 'every partition holds pages');
  assert.equal(partitions.reduce((sum, x) => sum + x.pages, 0), 1489);
  assert.doesNotMatch(r.stdout, /partitions hold pages/, 'no note about empty partitions');

  const l1 = /L1 distance to .*examples\/data\/polblogs\/pagerank\.tsv: (\S+)/.exec(r.stdout)?.[1];
  assert.ok(l1 !== undefined, `the L1 line: ${r.stdout.slice(-3000)}`);
  assert.ok(Number(l1) <= 1e-6, `L1 ${l1}`);
});

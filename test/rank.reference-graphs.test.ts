import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { l1Distance } from '../src/jobs/rankGraph.js';
import { readScores } from '../src/replay/graphFile.js';
import { graphs, repoRoot, tempDir } from './kit/datasets.js';

const run = promisify(execFile);

for (const name of ['hollins', 'polblogs', 'epa'] as const) {
  for (const partitions of [1, 4, 16, 64]) {
    test(`shardflow rank --weights uniform on ${name} with ${partitions} partitions matches the reference within L1 1e-6`, { timeout: 300_000 }, async () => {
      const { dir, cleanup } = tempDir();
      try {
        const out = join(dir, 'scores.tsv');
        await run(process.execPath, [
          join(repoRoot, 'bin/shardflow.mjs'), 'rank',
          '--pages', join(graphs[name], 'pages.txt'),
          '--links', join(graphs[name], 'links.tsv'),
          '--partitions', String(partitions),
          '--data-dir', join(dir, 'data'),
          '--weights', 'uniform',
          '--out', out,
        ], { cwd: repoRoot });
        const got = await readScores(out);
        const reference = await readScores(join(graphs[name], 'pagerank.tsv'));
        assert.equal(got.size, reference.size, 'every page ranked, none merged');
        let sum = 0;
        for (const s of got.values()) sum += s;
        assert.ok(Math.abs(sum - 1) < 1e-9, `scores sum to ${sum}`);
        const l1 = l1Distance(got, reference);
        assert.ok(l1 <= 1e-6, `L1 ${l1}`);
        const scores = [...got.values()];
        assert.ok(scores.every((s, i) => i === 0 || scores[i - 1]! >= s), 'highest first');
      } finally {
        cleanup();
      }
    });
  }
}

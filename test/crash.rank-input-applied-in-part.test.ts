import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { graphs, tempDir } from './kit/datasets.js';
import { runCli, type KillPoint } from './kit/cliRun.js';

// Found by a new user: a rank killed during its load, then `rank --update` with other files
// on the same data dir, ranked what the two gave (2,266 of 4,150 pages missing) and exited 0.
// The data dir now records whether its input was applied completely, and refuses other input
// until the same command is run again.

const rank = (dataDir: string, graph: string, options: { update?: boolean; kill?: KillPoint } = {}) =>
  runCli(
    ['rank', '--pages', join(graph, 'pages.txt'), '--links', join(graph, 'links.tsv'), '--out', join(dataDir, '..', 'scores.tsv'), '--data-dir', dataDir, '--partitions', '4', '--log-level', 'info', ...(options.update ? ['--update'] : [])],
    { timeoutMs: 180_000, ...(options.kill ? { kill: options.kill } : {}) },
  );

const record = (dataDir: string) => JSON.parse(readFileSync(join(dataDir, 'shardflow.json'), 'utf8')) as { inputApplied?: boolean };

describe('a data dir whose input is applied in part takes no other input', () => {
  const tmp = tempDir('shardflow-in-part-');
  after(() => tmp.cleanup());

  for (const [name, kill] of [
    ['SIGKILL during the load', { signal: 'SIGKILL', when: (l: string) => l.includes('loading the graph') }],
    ['SIGINT during the metric rounds', { signal: 'SIGINT', when: (l: string) => l.includes('"msg":"metric round"') }],
  ] as const) {
    it(`${name}: --update with other files is refused; the same command completes it, then the update applies`, async () => {
      const dir = join(tmp.dir, name.replace(/\W+/g, '-'));
      const first = await rank(dir, graphs.polblogs, { kill });
      assert.ok(first.killed, first.stderr);
      assert.equal(record(dir).inputApplied, false);
      const refused = await rank(dir, graphs.hollins, { update: true });
      assert.equal(refused.code, 1, refused.stderr);
      assert.match(refused.stderr, /holds graph .*polblogs.* applied in part: the run with it was stopped or killed before it completed\. Run the same command with those files again/);
      const again = await rank(dir, graphs.polblogs);
      assert.equal(again.code, 0, again.stderr);
      assert.equal(record(dir).inputApplied, true);
      const update = await rank(dir, graphs.hollins, { update: true });
      assert.equal(update.code, 0, update.stderr);
      assert.match(update.stderr, /ranked 7501 pages/);
    });
  }
});

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { l1Distance } from '../src/jobs/rankGraph.js';
import { readScores } from '../src/replay/graphFile.js';
import { graphs, tempDir } from './kit/datasets.js';
import { readScoresFile, runCli } from './kit/cliRun.js';

// Ctrl-C during the repair of a killed run's data dir printed "stopped by SIGINT" while the
// repair went on in the background (its reset of the other partitions, its link operations)
// with the broker closed under it, until the CLI's 5 s exit timer cut it off: no clean stop,
// stores never closed. The repair now stops with the job.

const tmp = tempDir('shardflow-sigint-repair-');
after(() => tmp.cleanup());

test('SIGINT during a repair stops it cleanly; the next run repairs again and ends exactly', { timeout: 300_000 }, async () => {
  const dataDir = join(tmp.dir, 'data');
  const out = join(tmp.dir, 'scores.tsv');
  const args = ['rank', '--pages', join(graphs.polblogs, 'pages.txt'), '--links', join(graphs.polblogs, 'links.tsv'), '--out', out, '--data-dir', dataDir, '--partitions', '8', '--log-level', 'info'];
  const killed = await runCli(args, { kill: { signal: 'SIGKILL', when: (l) => l.includes('"msg":"metric round"') } });
  assert.equal(killed.signal, 'SIGKILL');

  const interrupted = await runCli(args, { kill: { signal: 'SIGINT', when: (l) => l.includes('"partition":0') && l.includes('repair: state of messages in flight reset') } });
  assert.ok(interrupted.killed);
  assert.equal(interrupted.code, 130, interrupted.stderr);
  const lines = interrupted.stderr.split('\n');
  const stopped = lines.findIndex((l) => l.includes('stopped by SIGINT'));
  assert.ok(stopped >= 0, interrupted.stderr);
  assert.deepEqual(lines.slice(stopped).filter((l) => l.includes('repair:')), [], 'nothing of the repair runs after the stop');
  const record = JSON.parse(readFileSync(join(dataDir, 'shardflow.json'), 'utf8')) as { state: string; repairing: boolean };
  assert.deepEqual([record.state, record.repairing], ['running', true]);

  const again = await runCli(args);
  assert.equal(again.code, 0, again.stderr);
  assert.match(again.stderr.split('\n')[0]!, /the last run was stopped during a repair: repairing again/);
  assert.match(again.stderr, /ranked 1489 pages, 18938 links, 18938 backlinks/);
  const l1 = l1Distance(readScoresFile(out), await readScores(join(graphs.polblogs, 'pagerank.tsv')));
  assert.ok(l1 <= 1e-6, `L1 ${l1}`);
});

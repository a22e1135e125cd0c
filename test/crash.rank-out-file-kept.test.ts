import assert from 'node:assert/strict';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { graphs, tempDir } from './kit/datasets.js';
import { runCli, type KillPoint } from './kit/cliRun.js';

// `rank --out F` used to open F for writing before anything else: a run refused on its data
// dir (another --partitions, another graph), or stopped by Ctrl-C, left F empty, and an
// operator's earlier scores were gone. The scores now go to a file beside F, renamed over
// it only once complete.

const rank = (dataDir: string, out: string, partitions: number, kill?: KillPoint) =>
  runCli(['rank', '--pages', join(graphs.polblogs, 'pages.txt'), '--links', join(graphs.polblogs, 'links.tsv'), '--out', out, '--data-dir', dataDir, '--partitions', String(partitions), '--log-level', 'info'], { timeoutMs: 120_000, ...(kill ? { kill } : {}) });

describe('rank leaves an earlier --out file as it was unless it completes', () => {
  const tmp = tempDir('shardflow-out-');
  after(() => tmp.cleanup());
  const out = join(tmp.dir, 'scores.tsv');
  let scores = '';

  it('writes --out whole when it completes', async () => {
    const first = await rank(join(tmp.dir, 'a'), out, 4);
    assert.equal(first.code, 0, first.stderr);
    scores = readFileSync(out, 'utf8');
    assert.equal(scores.trim().split('\n').length, 1489);
  });

  it('a run refused on its data dir leaves --out as it was', async () => {
    const refused = await rank(join(tmp.dir, 'a'), out, 8);
    assert.equal(refused.code, 1, refused.stderr);
    assert.match(refused.stderr, /holds 4 partitions/);
    assert.equal(readFileSync(out, 'utf8'), scores);
    assert.deepEqual(readdirSync(tmp.dir).filter((f) => f.includes('.partial-')), [], 'no partial file left behind');
  });

  it('a run stopped by SIGINT leaves --out as it was', async () => {
    const stopped = await rank(join(tmp.dir, 'b'), out, 4, { signal: 'SIGINT', when: (l) => l.includes('"msg":"metric round"') });
    assert.ok(stopped.killed);
    assert.equal(stopped.code, 130, stopped.stderr);
    assert.match(stopped.stderr, /the same command on --data-dir .*b goes on with it/);
    assert.equal(readFileSync(out, 'utf8'), scores);
    assert.deepEqual(readdirSync(tmp.dir).filter((f) => f.includes('.partial-')), [], 'no partial file left behind');
  });

  it('a run on a temporary data dir stopped by SIGTERM does not point to that folder (found by a new user: it was already removed)', async () => {
    const stopped = await runCli(['rank', '--pages', join(graphs.polblogs, 'pages.txt'), '--links', join(graphs.polblogs, 'links.tsv'), '--out', out, '--partitions', '2', '--log-level', 'info'], { timeoutMs: 120_000, kill: { signal: 'SIGTERM', when: (l) => l.includes('"msg":"metric round"') } });
    assert.equal(stopped.code, 143, stopped.stderr);
    assert.match(stopped.stderr, /its temporary data dir is removed; give --data-dir DIR to keep a run that can go on/);
    assert.doesNotMatch(stopped.stderr, /goes on with it/);
  });

  it('a run SIGKILLed while ranking leaves --out as it was, and the next run removes its partial file', async () => {
    const killed = await rank(join(tmp.dir, 'c'), out, 4, { signal: 'SIGKILL', when: (l) => l.includes('"msg":"metric round"') });
    assert.ok(killed.killed);
    assert.equal(readFileSync(out, 'utf8'), scores);
    const left = readdirSync(tmp.dir).filter((f) => f.includes('.partial-'));
    assert.equal(left.length, 1, `the killed run's partial file is there: ${left.join(', ')}`);
    // A partial file of a process that still runs (this one's parent's pid stands for one) is another run's: kept.
    const live = join(tmp.dir, `scores.tsv.partial-${process.pid}`);
    writeFileSync(live, '');
    // And one of a pid that ran and exited.
    const gone = spawnSync(process.execPath, ['-e', '0']).pid!;
    writeFileSync(join(tmp.dir, `scores.tsv.partial-${gone}`), 'cut short');
    const again = await rank(join(tmp.dir, 'd'), out, 4);
    assert.equal(again.code, 0, again.stderr);
    assert.equal(readFileSync(out, 'utf8').trim().split('\n').length, 1489);
    assert.deepEqual(readdirSync(tmp.dir).filter((f) => f.includes('.partial-')), [`scores.tsv.partial-${process.pid}`], 'the dead runs\' partial files are removed, a live one kept');
  });
});

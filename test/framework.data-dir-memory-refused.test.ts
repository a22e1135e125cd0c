import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { readTopologyRecord } from '../src/index.js';
import { addTruth } from './kit/clickTopology.js';
import { killPoint, runClickChild, sentBefore } from './kit/clickTopologyRun.js';
import { tempDir } from './kit/datasets.js';

/**
 * A topology killed (SIGKILL, at seeded points mid-stream) over the in-memory broker loses
 * what was in flight with the process. Started again on its data dir, it used to count
 * without those messages and exit 0. Now:
 * 1. the start is refused (DataDirError, exit != 0) naming what was lost and how to go on,
 *    and nothing in the data dir changes;
 * 2. with `onUnclean: 'discard-in-flight'` it starts, warns, and counts the new clicks on
 *    top of what was applied before (the lost ones are not there);
 * 3. that run stopped quiet, so the next start goes on without a word, exactly.
 */
for (const seed of [1, 5]) {
  const kill = killPoint(seed);
  test(`memory broker, killed before ${kill.stage} applies message ${kill.at}: refused, then discard-in-flight warns and goes on`, { timeout: 60_000 }, async () => {
    const { dir, cleanup } = tempDir('sf-dd-memory-');
    const dataDir = join(dir, 'data');
    const sentFile = join(dir, 'sent');
    try {
      const killed = await runClickChild(['--data-dir', dataDir, '--events', '1500', '--sent-file', sentFile, ...kill.args]);
      assert.equal(killed.signal, 'SIGKILL', `the run was killed at its seeded point:\n${killed.stdout}\n${killed.stderr}`);
      const sent = sentBefore(sentFile);
      assert.ok(sent > 0, 'the killed run had sent clicks');
      const before = readTopologyRecord(dataDir);
      assert.equal(before?.state, 'running', 'a killed run leaves state running');
      assert.deepEqual(before?.broker, { kind: 'memory' });

      const refused = await runClickChild(['--data-dir', dataDir, '--events', '10']);
      assert.equal(refused.code, 2, refused.stderr);
      assert.equal(refused.result, undefined, 'a refused start counts nothing');
      assert.match(refused.stderr, /DataDirError SF_ERR_DATA_DIR: the last run of topology dd-clicks on data dir .* \(pid \d+, recorded .*\) did not stop quiet \(killed, or stopped with messages in flight\) on the in-memory broker/);
      assert.match(refused.stderr, /the messages in flight then \(sent to clicks for stage count, host-deltas for stage totals and not yet applied\) were lost with that process/);
      assert.match(refused.stderr, /start with onUnclean: 'discard-in-flight'/);
      assert.match(refused.stderr, new RegExp(`warn: data dir .*: taking over the lock of process ${before!.pid}, which no longer runs`), 'the killed run\'s lock is taken over, with a warning');
      assert.deepEqual(readTopologyRecord(dataDir), before, 'a refused start writes nothing');

      const discarded = await runClickChild(['--data-dir', dataDir, '--from', '100000', '--events', '300', '--on-unclean', 'discard-in-flight']);
      assert.equal(discarded.code, 0, discarded.stderr);
      assert.match(discarded.stderr, /warn: the last run of topology dd-clicks .* were lost with that process: starting anyway without them \(onUnclean: 'discard-in-flight'\)/);
      assert.equal(discarded.result?.recovery.previous, 'discarded-in-flight');
      // What the killed run applied stays; the new clicks all count on top; the lost ones never do.
      const fresh = addTruth(new Map(), 100000, 300);
      const upTo = addTruth(addTruth(new Map(), 0, sent + 1), 100000, 300);
      for (const [host, n] of Object.entries(discarded.result!.count)) {
        assert.ok(n >= (fresh.get(host) ?? 0) && n <= (upTo.get(host) ?? 0), `${host}: ${n} clicks, between ${fresh.get(host) ?? 0} and ${upTo.get(host) ?? 0}`);
      }
      for (const host of fresh.keys()) assert.ok(host in discarded.result!.count, `${host} counted`);
      assert.equal(readTopologyRecord(dataDir)?.state, 'quiet', 'a stop after quiescence is recorded quiet');

      const after = await runClickChild(['--data-dir', dataDir, '--from', '200000', '--events', '100']);
      assert.equal(after.code, 0, after.stderr);
      assert.equal(after.result?.recovery.previous, 'quiet');
      assert.doesNotMatch(after.stderr, /warn:/);
      const expected = addTruth(new Map(Object.entries(discarded.result!.count)), 200000, 100);
      assert.deepEqual(new Map(Object.entries(after.result!.count)), expected, 'after a quiet stop, every click counts exactly once');
      assert.equal(readTopologyRecord(dataDir)?.runs, 3, 'runs: killed, discarded, after (the refused one is not a run)');
    } finally {
      cleanup();
    }
  });
}

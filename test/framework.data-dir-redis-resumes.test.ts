import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { Redis } from 'ioredis';
import { brokerIdentityFor, deleteBrokerScope, readTopologyRecord } from '../src/index.js';
import { addTruth } from './kit/clickTopology.js';
import { killPoint, runClickChild, sentBefore } from './kit/clickTopologyRun.js';
import { tempDir } from './kit/datasets.js';

/**
 * A topology killed (SIGKILL, at seeded points mid-stream) over Redis Streams leaves what
 * was in flight on the broker. Started again on its data dir:
 * - on another broker (the in-memory one), the start is refused, naming the recorded
 *   Redis scope that holds those messages;
 * - on the recorded scope, it resumes: Redis delivers what was not acked, applied marks
 *   skip what was applied, outboxes publish what they hold, and quiescence waits for the
 *   backlog the killed run left. Both stages' counts then equal the ground truth of every
 *   click sent, in both runs (the killed run's last send may or may not have reached Redis
 *   when it was killed: the counts must equal one of the two truths, whole).
 */
const url = process.env.SHARDFLOW_REDIS_URL ?? 'redis://127.0.0.1:6379';

for (const seed of [2, 8]) {
  const kill = killPoint(seed);
  test(`Redis, killed before ${kill.stage} applies message ${kill.at}: refused on another broker, resumed exactly on its scope`, { timeout: 60_000 }, async () => {
    const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
    await probe.connect();
    await probe.quit();
    const { dir, cleanup } = tempDir('sf-dd-redis-');
    const dataDir = join(dir, 'data');
    const sentFile = join(dir, 'sent');
    const prefix = `sftest-dd-${process.pid}-${seed}:`;
    const onRedis = ['--broker', url, '--prefix', prefix];
    try {
      const killed = await runClickChild(['--data-dir', dataDir, ...onRedis, '--events', '1500', '--sent-file', sentFile, ...kill.args]);
      assert.equal(killed.signal, 'SIGKILL', `the run was killed at its seeded point:\n${killed.stdout}\n${killed.stderr}`);
      const sent = sentBefore(sentFile);
      const record = readTopologyRecord(dataDir);
      assert.equal(record?.state, 'running');
      assert.deepEqual(record?.broker, { kind: 'redis', url, scope: prefix });
      // What a user's program connects to for the next run: the recorded scope on that broker, a fresh one elsewhere.
      assert.deepEqual(brokerIdentityFor(dataDir, url), record?.broker);
      assert.deepEqual(brokerIdentityFor(dataDir, 'memory'), { kind: 'memory' });
      assert.notEqual(brokerIdentityFor(dataDir, `${url}/1`).scope, prefix);

      const elsewhere = await runClickChild(['--data-dir', dataDir, '--events', '10']);
      assert.equal(elsewhere.code, 2, elsewhere.stderr);
      assert.match(elsewhere.stderr, new RegExp(`did not stop quiet \\(killed, or stopped with messages in flight\\) on redis ${url} scope "${prefix}": the messages in flight then \\(sent to clicks for stage count, host-deltas for stage totals and not yet applied\\) are on that broker scope, and this start is on the in-memory broker`));
      assert.match(elsewhere.stderr, /Connect to the recorded scope to resume \(connectBroker\(readTopologyRecord\(dataDir\)\.broker\)\)/);
      assert.deepEqual(readTopologyRecord(dataDir), record, 'a refused start writes nothing');

      const resumed = await runClickChild(['--data-dir', dataDir, ...onRedis, '--from', '100000', '--events', '200']);
      assert.equal(resumed.code, 0, resumed.stderr);
      assert.equal(resumed.result?.recovery.previous, 'resumed');
      assert.ok(resumed.result!.recovery.backlog! > 0, 'the killed run left at least the batch it was applying unacked on Redis');
      const truths = [sent, sent + 1].map((n) => addTruth(addTruth(new Map(), 0, n), 100000, 200));
      for (const stage of ['count', 'totals'] as const) {
        const counted = new Map(Object.entries(resumed.result![stage]));
        assert.ok(
          truths.some((t) => isDeepStrictEqual(counted, t)),
          `${stage} equals the ground truth of the ${sent} (or ${sent + 1}) clicks of the killed run and the 200 of the resumed one: ${JSON.stringify([...counted].slice(0, 8))} ...`,
        );
      }
      assert.deepEqual(resumed.result!.count, resumed.result!.totals, 'count and totals agree host by host');
      assert.equal(readTopologyRecord(dataDir)?.state, 'quiet');
    } finally {
      cleanup();
      await deleteBrokerScope({ kind: 'redis', url, scope: prefix });
    }
  });
}


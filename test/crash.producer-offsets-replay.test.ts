import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { deleteBrokerScope } from '../src/index.js';
import { addTruth } from './kit/clickTopology.js';
import { killPoint, runClickChild, sentBefore } from './kit/clickTopologyRun.js';
import { tempDir } from './kit/datasets.js';

/**
 * An ingest that sends a replayable input (clicks 0 .. 1499) through a producer with source
 * offsets (`running.producer(ns, name, { offsets: true })`, offset n for click n), SIGKILLed
 * with its topology at seeded points mid-stream and run again on the same data dir sending
 * the whole input from offset 0: both stages count every click exactly once, and nothing is
 * dead-lettered. Each partition skips what it applied before the kill (the offsets at or
 * below its mark) and applies the rest, whatever the killed run's producer had sent.
 The re-run resumes the recorded Redis scope: Redis delivers what was not acked (copies of
 * applied offsets, skipped) beside the replay (copies of both kinds), and the count stage's
 * outbox publishes what it held. (On the in-memory broker the messages in flight between the
 * stages die with the process, so no replay of the input restores them: there the exact way
 * is the input sent again into a fresh data dir, as the refused start says.)
 * Without offsets a producer opened again is a new epoch, and the replay counts again what
 * was applied: the last case shows it (the guide's section 7 says so).
 */
const url = process.env.SHARDFLOW_REDIS_URL ?? 'redis://127.0.0.1:6379';
const truth = addTruth(new Map(), 0, 1500);

function assertExact(result: NonNullable<Awaited<ReturnType<typeof runClickChild>>['result']>, what: string) {
  for (const stage of ['count', 'totals'] as const) {
    assert.deepEqual(new Map(Object.entries(result[stage])), truth, `${what}: ${stage} counts each of the 1,500 clicks once`);
  }
  assert.deepEqual(result.dead, [], `${what}: nothing dead-lettered`);
}

for (const seed of [3, 5, 11, 17]) {
  const kill = killPoint(seed);
  test(`offsets, Redis Streams, killed before ${kill.stage} applies message ${kill.at}: resumed, the input sent again from 0 is counted exactly once`, { timeout: 120_000 }, async () => {
    const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
    await probe.connect();
    await probe.quit();
    const { dir, cleanup } = tempDir('sf-offsets-redis-');
    const dataDir = join(dir, 'data');
    const prefix = `sftest-offsets-${process.pid}-${seed}:`;
    const onRedis = ['--broker', url, '--prefix', prefix];
    try {
      const killed = await runClickChild(['--data-dir', dataDir, ...onRedis, '--offsets', '--events', '1500', ...kill.args]);
      assert.equal(killed.signal, 'SIGKILL', `the run was killed at its seeded point:\n${killed.stdout}\n${killed.stderr}`);
      const again = await runClickChild(['--data-dir', dataDir, ...onRedis, '--offsets', '--events', '1500']);
      assert.equal(again.code, 0, again.stderr);
      assert.equal(again.result?.recovery.previous, 'resumed');
      assertExact(again.result!, 'the resumed run');
    } finally {
      cleanup();
      await deleteBrokerScope({ kind: 'redis', url, scope: prefix });
    }
  });
}

test('offsets, Redis Streams, killed mid-stream: the next run sends from the resumeOffset() the killed one last recorded, exactly once', { timeout: 120_000 }, async () => {
  const kill = killPoint(23);
  const { dir, cleanup } = tempDir('sf-offsets-resume-');
  const dataDir = join(dir, 'data');
  const sentFile = join(dir, 'resume');
  const prefix = `sftest-offsets-${process.pid}-resume:`;
  const onRedis = ['--broker', url, '--prefix', prefix];
  try {
    const killed = await runClickChild(['--data-dir', dataDir, ...onRedis, '--offsets', '--events', '1500', '--sent-file', sentFile, ...kill.args]);
    assert.equal(killed.signal, 'SIGKILL', `the run was killed at its seeded point:\n${killed.stdout}\n${killed.stderr}`);
    const from = sentBefore(sentFile);
    assert.ok(from > 0 && from < 1500, `the killed run recorded where to resume: ${from}`);
    const again = await runClickChild(['--data-dir', dataDir, ...onRedis, '--offsets', '--from', String(from), '--events', String(1500 - from)]);
    assert.equal(again.code, 0, again.stderr);
    assertExact(again.result!, `the run resumed from offset ${from}`);
  } finally {
    cleanup();
    await deleteBrokerScope({ kind: 'redis', url, scope: prefix });
  }
});

test('without offsets, the input sent again after a kill is counted again (a new producer epoch)', { timeout: 120_000 }, async () => {
  const kill = killPoint(3);
  const { dir, cleanup } = tempDir('sf-offsets-epochs-');
  const dataDir = join(dir, 'data');
  const prefix = `sftest-offsets-${process.pid}-epochs:`;
  const onRedis = ['--broker', url, '--prefix', prefix];
  try {
    const killed = await runClickChild(['--data-dir', dataDir, ...onRedis, '--events', '1500', ...kill.args]);
    assert.equal(killed.signal, 'SIGKILL');
    const again = await runClickChild(['--data-dir', dataDir, ...onRedis, '--events', '1500']);
    assert.equal(again.code, 0, again.stderr);
    const counted = [...Object.values(again.result!.count)].reduce((a, b) => a + b, 0);
    assert.ok(counted > 1500, `what the killed run applied is counted again: ${counted} clicks for 1,500`);
  } finally {
    cleanup();
    await deleteBrokerScope({ kind: 'redis', url, scope: prefix });
  }
});

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { InvalidArgumentError, MemoryBroker, PayloadTooLargeError, ProducerFailedError } from '../src/index.js';
import { addTruth, clickTopology, clicks, hostOf } from './kit/clickTopology.js';
import { tempDir } from './kit/datasets.js';

/**
 * `running.producer(ns, name, { offsets: true })`: the caller's offsets are the sequences.
 * The same input sent again by a new producer of that name is skipped where applied; offsets
 * that are missing, repeated or decreasing are refused; after a failed send the producer
 * refuses the rest (ProducerFailedError, the failure as cause). The SIGKILL cases are in
 * test/crash.producer-offsets-replay.test.ts.
 */
test('a producer with offsets: the input sent again is applied once, bad offsets are refused, a failed send fails the rest', async () => {
  const { dir, cleanup } = tempDir('sf-offsets-');
  const broker = new MemoryBroker({ maxPayloadBytes: 512 });
  const running = await clickTopology.start({ broker, dataDir: join(dir, 'data') });
  try {
    const first = await running.producer(clicks, 'clicks-src', { offsets: true });
    assert.equal(first.name, 'clicks-src#offsets');
    assert.equal(first.epoch, 0);
    assert.equal(first.offsets, true);
    assert.equal(first.resumeOffset(), undefined, 'nothing given yet');
    await assert.rejects(first.send({ host: hostOf(0), n: 0 }), InvalidArgumentError, 'an offset is required');
    await assert.rejects(first.send({ host: hostOf(0), n: 0 }, { offset: -1 }), InvalidArgumentError);
    await assert.rejects(first.send({ host: hostOf(0), n: 0 }, { offset: 1.5 }), InvalidArgumentError);
    await assert.rejects(first.send({ host: hostOf(0), n: 0 }, { offset: '7' as unknown as number }), /must be a non-negative safe integer, got string "7"/);
    // Sends not awaited one by one: the producer keeps each topic's offsets in order.
    const inFlight = Array.from({ length: 100 }, (_, n) => first.send({ host: hostOf(n), n }, { offset: n }));
    assert.equal(first.resumeOffset(), 0, 'none resolved yet');
    await Promise.all(inFlight);
    assert.equal(first.resumeOffset(), 100, 'every offset below 100 resolved');
    await assert.rejects(first.send({ host: hostOf(50), n: 50 }, { offset: 50 }), /offset 50 is not above the previous send's \(99\)/);
    await first.close();
    await running.quiescence({ timeoutMs: 30_000 });

    // A new producer of the name sends the input again from its start, and on.
    const again = await running.producer(clicks, 'clicks-src', { offsets: true });
    for (let n = 0; n < 150; n++) await again.send({ host: hostOf(n), n }, { offset: n });
    await running.quiescence({ timeoutMs: 30_000 });
    const truth = addTruth(new Map(), 0, 150);
    for (const stage of ['count', 'totals'] as const) {
      assert.deepEqual(new Map((await running.askAll(stage, 'hosts')).flat()), truth, `${stage}: each of the 150 clicks once`);
    }
    assert.deepEqual(await running.deadLetters('count'), []);

    // A failed send (here the broker refuses the payload) fails every later send.
    const big = { host: 'x'.repeat(600), n: 1 };
    await assert.rejects(again.send(big, { offset: 150 }), PayloadTooLargeError);
    assert.equal(again.resumeOffset(), 150, 'the failed offset is where a replay starts');
    await assert.rejects(again.send({ host: hostOf(151), n: 151 }, { offset: 151 }), (err: unknown) => {
      assert.ok(err instanceof ProducerFailedError);
      assert.equal(err.code, 'SF_ERR_PRODUCER_FAILED');
      assert.ok(err.cause instanceof PayloadTooLargeError);
      assert.match(err.message, /offset 151 was not sent: the send of offset 150 failed .* Open a new producer and send again from the lowest offset not known to be sent/);
      return true;
    });
    await again.close();

    // An epoch producer takes no offsets.
    const epochs = await running.producer(clicks, 'clicks-src');
    await assert.rejects(epochs.send({ host: hostOf(0), n: 0 }, { offset: 0 }), /open it with offsets: true/);
    assert.equal(epochs.resumeOffset(), undefined);
    await epochs.close();
  } finally {
    await running.stop();
    await broker.close();
    cleanup();
  }
});

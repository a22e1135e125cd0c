import assert from 'node:assert/strict';
import { test } from 'node:test';
import { InvalidArgumentError, JobStalledError, partitionId, producerId } from '../src/index.js';
import { sequence } from '../src/runtime/ids.js';
import { topic } from '../src/runtime/brokers/index.js';
import { withClusterRun } from './kit/clusterRun.js';
import { skipWithoutRedis } from './kit/cluster.js';

/**
 * `ClusterClient.quiescence` (docs/cluster.md, "Quiescence across the cluster"): the two-stage
 * click counter (count: 6 partitions, totals: 2) on worker processes over Redis Streams, the
 * clicks sent from the test process by an external producer. Quiet means done: right after it
 * resolves, every partition answers the exact counts, with no wait for backlogs (the tests used
 * to poll `clusterStatus` until every backlog was 0, which says nothing of the second stage's
 * outbox rows waiting for a checkpoint). And a stream that cannot be applied stalls it with the
 * stream named. Lease 3000 ms, as the other cluster tests.
 */
const LEASE_MS = 3000;

type Pairs = Array<[string, number]>;
const sum = (answers: unknown[]) => {
  const m = new Map<string, number>();
  for (const a of answers as Pairs[]) for (const [h, n] of a) m.set(h, (m.get(h) ?? 0) + n);
  return new Map([...m].sort());
};

test('quiescence across three workers: once it resolves, both stages hold the exact counts; an undecodable message is waited for and listed by deadLetters; a stream nobody can apply stalls it by name', { timeout: 240_000 }, async (t) => {
  if (await skipWithoutRedis(t)) return;
  await withClusterRun(t, LEASE_MS, {}, async (run) => {
    const workers = [await run.startWorker('w1'), await run.startWorker('w2'), await run.startWorker('w3')];
    await run.balancedOn(workers);
    const client = await run.client();
    await run.send(400);
    const sent = run.sent();
    assert.ok(sent.length > 1 && sent.every((s) => s.topic.startsWith('clicks/') && s.next > 0), `the producer reports what it sent per topic: ${JSON.stringify(sent)}`);
    const quiet = await client.quiescence({ external: sent, timeoutMs: 120_000 });
    assert.ok(quiet.collections >= 2, 'two identical collections at least');
    assert.equal(quiet.reports.length, 8, 'one report per partition of both stages');
    // At once, no backlog polling: every click counted in both stages.
    assert.deepEqual(sum(await client.askAll('count', 'hosts')), new Map([...run.truth].sort()), 'count: exact right after quiescence');
    assert.deepEqual(sum(await client.askAll('totals', 'hosts')), new Map([...run.truth].sort()), 'totals: exact right after quiescence (the second hop applied too)');
    // Again after more input: it waits for the new clicks.
    await run.send(200);
    await client.quiescence({ external: run.sent(), timeoutMs: 120_000 });
    assert.deepEqual(sum(await client.askAll('totals', 'hosts')), new Map([...run.truth].sort()), 'totals: exact after the second burst');
    // A message the count stage cannot decode: quiescence waits until it is dead-lettered (its
    // mark moves past it), and the client lists it with its reason, read from the broker.
    const raw = await run.broker.producer(topic('clicks', partitionId(0)), { producer: producerId('raw-src') });
    await raw.send(Buffer.from([0xc1]), { sequence: sequence(0) }); // 0xc1: never used in msgpack
    await raw.close();
    await client.quiescence({ external: [...run.sent(), { producer: 'raw-src', topic: 'clicks/0', next: 1 }], timeoutMs: 120_000 });
    const dead = await client.deadLetters('count');
    assert.equal(dead.length, 1, JSON.stringify(dead.map((d) => d.reason)));
    assert.equal(dead[0]!.message.producer, 'raw-src');
    assert.match(dead[0]!.reason, /Click/);
    assert.deepEqual(await client.deadLetters('totals'), []);
    // Undecodable messages that do not follow their producer's mark (the first message of an
    // epoch producer, epoch 1 #0; an offsets producer's sparse sequence on this topic): the
    // mark stays, and quiescence takes the stream as settled once its last message was
    // dead-lettered (found by a new user: it waited out its timeout, "sent 4294967296 (epoch 1
    // #0), applied -1").
    const epochSeq = 2 ** 32;
    const rawEpoch = await run.broker.producer(topic('clicks', partitionId(1)), { producer: producerId('raw-epoch') });
    await rawEpoch.send(Buffer.from('not msgpack at all'), { sequence: sequence(epochSeq) });
    await rawEpoch.close();
    const rawSparse = await run.broker.producer(topic('clicks', partitionId(2)), { producer: producerId('raw-sparse') });
    await rawSparse.send(Buffer.from([0xc1]), { sequence: sequence(5) });
    await rawSparse.close();
    await client.quiescence({
      external: [...run.sent(), { producer: 'raw-src', topic: 'clicks/0', next: 1 }, { producer: 'raw-epoch', topic: 'clicks/1', next: epochSeq + 1 }, { producer: 'raw-sparse', topic: 'clicks/2', next: 6 }],
      timeoutMs: 60_000,
    });
    assert.deepEqual((await client.deadLetters('count')).map((d) => d.message.producer).sort(), ['raw-epoch', 'raw-sparse', 'raw-src']);
    assert.deepEqual(sum(await client.askAll('totals', 'hosts')), new Map([...run.truth].sort()), 'nothing else moved');
    await assert.rejects(client.deadLetters('nope'), /has no stage "nope" \(its stages: count, totals\)/);
    // A stream its receiver never applies (a producer that claims five clicks it never sent).
    await assert.rejects(client.quiescence({ external: [...run.sent(), { producer: 'ghost-src', topic: 'clicks/0', next: 5 }], timeoutMs: 2_000 }), (err: unknown) => {
      assert.ok(err instanceof JobStalledError, String(err));
      assert.match((err as Error).message, /streams not quiet after 2000 ms: 1 unapplied \(ghost-src -> clicks\/0: sent 4, applied -1\)/);
      return true;
    });
    // External streams no stage receives would be left out of the wait: refused by name (found
    // by a new user, whose typo made quiescence a no-op).
    for (const [bad, why] of [
      [[{ producer: 'x', topic: 'nosuch/0', next: 1 }], /no stage consumes namespace nosuch \(stages: count <- clicks, totals <- host-deltas\)/],
      [[{ producer: 'x', topic: 'clicks/99', next: 1 }], /namespace clicks has 6 partitions/],
      [[{ producer: 'x', topic: '[object Object]', next: 1 }], /its topic is not <namespace>\/<partition>/],
      [[{ foo: 1 }], /no producer name/],
      [42, /must be an iterable/],
    ] as const) {
      await assert.rejects(client.quiescence({ external: bad as never, timeoutMs: 5_000 }), (err: unknown) => err instanceof InvalidArgumentError && why.test((err as Error).message), JSON.stringify(bad));
    }
    await run.stopAll();
  });
});

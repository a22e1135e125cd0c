import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  BrokerClosedError, MemoryBroker, Topology, defineNamespace, encodeInt64, int64Add, msgpackCodec, partitionId, producerId, type Logger,
} from '../src/index.js';
import { topic } from '../src/runtime/topics.js';
import { tempDir } from './kit/datasets.js';

/**
 * The in-memory broker holds a producer's send while its topic retains `maxRetainedPerTopic`
 * messages and a connected consumer can drain them (Pulsar's backlog quota with
 * `producer_request_hold`): an awaited send loop then lets the consumers run instead of
 * queueing everything in memory first, as a first user found (50,000 sends, 0 settled).
 */
test('a send waits for room while a connected consumer holds the topic full; goes on when it acks or leaves', { timeout: 30_000 }, async () => {
  const broker = new MemoryBroker({ maxRetainedPerTopic: 100 });
  const t = topic('jobs', partitionId(0));
  const consumer = await broker.subscribe(t, { subscription: 'work', type: 'failover', receiverQueueSize: 1000 });
  const producer = await broker.producer(t, { producer: producerId('src') });
  for (let i = 0; i < 100; i++) await producer.send(new Uint8Array([i]));
  let held = true;
  const next = producer.send(new Uint8Array([100])).then(() => void (held = false));
  await sleep(50);
  assert.equal(held, true, 'the 101st send waits while 100 are retained');
  const got = await consumer.receive(100, 1000);
  assert.equal(got.length, 100);
  for (const m of got) await consumer.ack(m);
  await next;
  assert.equal(held, false, 'acks made room');
  await consumer.close();
  for (let i = 0; i < 300; i++) await producer.send(new Uint8Array([1])); // no consumer: nothing could drain it, no hold
  const other = await broker.subscribe(t, { subscription: 'work', type: 'failover', receiverQueueSize: 1000 });
  const closing = producer.send(new Uint8Array([2]));
  await producer.close();
  await assert.rejects(closing, BrokerClosedError, 'a held send ends when its producer closes');
  await other.close();
  await broker.close();
});

test('an awaited send loop into a topology lets its partitions consume as it goes', { timeout: 60_000 }, async () => {
  const { dir, cleanup } = tempDir('sf-mem-backpressure-');
  const isJob = (v: unknown): v is { n: number } => Number.isInteger((v as { n: number })?.n);
  const jobs = defineNamespace('jobs', { codec: msgpackCodec('Job', isJob), partitions: 1, key: () => 'one' });
  const topology = Topology.create('held').stage('count', {
    input: jobs,
    columnFamilies: { n: { mergeOperator: int64Add() } },
    onMessage: (ctx) => ctx.writes.merge('n', 'all', encodeInt64(1)),
  });
  const quiet: Logger = { debug() {}, warn() {}, error() {} };
  const broker = new MemoryBroker({ maxRetainedPerTopic: 200 });
  const running = await topology.start({ broker, dataDir: dir, logger: quiet });
  try {
    const producer = await running.producer(jobs, 'jobs-src');
    for (let n = 0; n < 3000; n++) await producer.send({ n });
    const settled = running.counters.settled.get('jobs') ?? 0;
    assert.ok(settled >= 3000 - 200 - 1000, `most messages were consumed during the loop (${settled} settled of 3000)`);
    await running.quiescence({ timeoutMs: 30_000 });
  } finally {
    await running.stop();
    await broker.close();
    cleanup();
  }
});

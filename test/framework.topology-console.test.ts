import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MemoryBroker, Topology, defineNamespace, encodeInt64, int64Add, msgpackCodec, type Logger } from '../src/index.js';
import { tempDir } from './kit/datasets.js';

/**
 * The console attaches to any topology: `start({ inspect })` serves the tree of the stage
 * partitions and Prometheus metrics with the topology's own namespaces.
 */
interface Event { readonly key: string }
const isEvent = (v: unknown): v is Event => typeof (v as Event)?.key === 'string';
const quiet: Logger = { debug() {}, warn() {}, error() {} };

test('start({ inspect }) serves the stage tree and per-namespace metrics', { timeout: 60_000 }, async () => {
  const { dir, cleanup } = tempDir('sf-console-');
  const events = defineNamespace('events', { codec: msgpackCodec('Event', isEvent), partitions: 3, key: (e: Event) => e.key });
  const topology = Topology.create('console').stage('tally', {
    input: events,
    columnFamilies: { keys: { mergeOperator: int64Add() } },
    onMessage: (ctx, e) => ctx.writes.merge('keys', e.key, encodeInt64(1)),
  });
  const broker = new MemoryBroker();
  const running = await topology.start({ broker, dataDir: dir, logger: quiet, inspect: { port: 0 } });
  try {
    const producer = await running.producer(events, 'events-src');
    for (let i = 0; i < 30; i++) await producer.send({ key: `k${i}` });
    await running.quiescence({ timeoutMs: 30_000 });
    const url = running.inspection!.url;
    const tree = await (await fetch(`${url}/tree.txt`)).text();
    for (const p of [0, 1, 2]) assert.match(tree, new RegExp(`p${p}`));
    assert.match(tree, /tally/);
    const metrics = await (await fetch(`${url}/metrics`)).text();
    assert.match(metrics, /shardflow_broker_messages_sent_total\{namespace="events"\} 30/);
    assert.match(metrics, /shardflow_broker_messages_settled_total\{namespace="events"\} 30/);
  } finally {
    await running.stop();
    await broker.close();
    cleanup();
  }
});

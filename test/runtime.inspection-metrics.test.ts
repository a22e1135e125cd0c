import assert from 'node:assert/strict';
import { test } from 'node:test';
import { register } from 'prom-client';
import { ActorSystem, type Behavior } from '../src/runtime/actor/index.js';
import { actorLabels } from '../src/runtime/inspection/actorLabels.js';
import { startInspectionServer } from '../src/runtime/inspection/server.js';
import { TopicFlowCounters } from '../src/runtime/inspection/topicFlow.js';
import { MemoryBroker } from '../src/runtime/brokers/memory.js';
import { partitionId, producerId } from '../src/runtime/ids.js';
import { topic } from '../src/runtime/topics.js';
import { SupervisorStrategy } from '../src/runtime/supervision/index.js';
import { ManualClock, recordingBehavior, recordingLogger, settle, type Recording } from './kit/index.js';

/** One Prometheus sample: `name{labels} value`. */
interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

/** Parses the Prometheus text format (no escapes in our label values). */
function parseSamples(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    assert.ok(match, `not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const pair of (match[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)) labels[pair[1]!] = pair[2]!;
    samples.push({ name: match[1]!, labels, value: Number(match[3]) });
  }
  return samples;
}

/** The value of the one sample of `name` whose labels include `labels`. */
function valueOf(samples: readonly Sample[], name: string, labels: Record<string, string>): number | undefined {
  const found = samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  assert.ok(found.length <= 1, `${found.length} samples of ${name} match ${JSON.stringify(labels)}`);
  return found[0]?.value;
}

/** A partition actor like the web index's: its start() spawns an `indexer` child. */
const partition: Behavior<never, void> = {
  kind: 'partition',
  start(ctx) {
    ctx.spawn('indexer', recordingBehavior('indexer', [], { kind: 'indexer' }));
  },
  receive() {},
};

test('actorLabels reads the partition from /partitions/p<N> and leaves it out elsewhere', () => {
  assert.deepEqual(actorLabels('/partitions/p3/indexer', 'indexer'), { path: '/partitions/p3/indexer', kind: 'indexer', partition: '3' });
  assert.deepEqual(actorLabels('/partitions/p12', 'partition'), { path: '/partitions/p12', kind: 'partition', partition: '12' });
  assert.deepEqual(actorLabels('/partitions/p-7/metrics', 'metrics'), { path: '/partitions/p-7/metrics', kind: 'metrics', partition: '7' });
  assert.deepEqual(actorLabels('/crawlers/crawler-0', 'crawler'), { path: '/crawlers/crawler-0', kind: 'crawler' });
  assert.deepEqual(actorLabels('/partitions', 'supervisor'), { path: '/partitions', kind: 'supervisor' });
  assert.deepEqual(actorLabels('/other/p3', 'x'), { path: '/other/p3', kind: 'x' }, 'p<N> counts only under partitions/');
});

test('/metrics reports per-actor processed, mailbox, restarts with partition labels, and broker lag per namespace and topic', async () => {
  const system = ActorSystem.create({ name: 'test', clock: new ManualClock(), logger: recordingLogger() });
  system.supervise('partitions', SupervisorStrategy.oneForOne(), [{ name: 'p3', behavior: partition }]);
  system.supervise('crawlers', SupervisorStrategy.oneForOne(), [{ name: 'crawler-0', behavior: recordingBehavior('c', [], { kind: 'crawler' }) }]);
  await settle();
  const flow = { sent: new Map([['links', 10], ['fetches', 4]]), settled: new Map([['links', 7]]) };
  const topicFlow = new TopicFlowCounters();
  const broker = topicFlow.wrap(new MemoryBroker());
  const server = await startInspectionServer(system, { flow, topicFlow });
  try {
    const indexer = system.lookup<Recording>('/partitions/p3/indexer')!;
    await indexer.tell({ op: 'work', id: 'a' });
    await indexer.tell({ op: 'work', id: 'b' });
    await settle();
    await indexer.tell({ op: 'throw', error: new Error('boom') });
    await settle();

    const links3 = topic('links', partitionId(3));
    const producer = await broker.producer(links3, { producer: producerId('test') });
    for (let i = 0; i < 3; i++) await producer.send(new Uint8Array([i]));
    const consumer = await broker.subscribe(links3, { subscription: 'backlinks', type: 'failover' });
    const [first] = await consumer.receive(1);
    await consumer.ack(first!);

    const response = await fetch(`${server.url}/metrics`);
    assert.equal(response.status, 200);
    assert.match(response.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
    const samples = parseSamples(await response.text());
    const at = { path: '/partitions/p3/indexer', kind: 'indexer', partition: '3' };
    assert.equal(valueOf(samples, 'shardflow_actor_messages_processed_total', at), 2);
    assert.equal(valueOf(samples, 'shardflow_actor_restarts_total', at), 1);
    assert.equal(valueOf(samples, 'shardflow_actor_mailbox_depth', at), 0);
    assert.equal(valueOf(samples, 'shardflow_actor_messages_dropped_total', at), 0);
    assert.equal(valueOf(samples, 'shardflow_actor_restarts_total', { path: '/partitions/p3', kind: 'partition', partition: '3' }), 0);
    const crawler = samples.find((s) => s.name === 'shardflow_actor_restarts_total' && s.labels.path === '/crawlers/crawler-0');
    assert.deepEqual(crawler?.labels, { path: '/crawlers/crawler-0', kind: 'crawler' }, 'no partition label outside /partitions/p<N>');
    assert.equal(valueOf(samples, 'shardflow_actors', { kind: 'indexer', status: 'running' }), 1);
    assert.equal(valueOf(samples, 'shardflow_actors', { kind: 'indexer', status: 'backoff' }), 0);
    assert.equal(valueOf(samples, 'shardflow_actors', { kind: 'supervisor', status: 'running' }), 2);
    assert.equal(valueOf(samples, 'shardflow_lifecycle_events_total', { type: 'failed', kind: 'indexer' }), 1);
    assert.equal(valueOf(samples, 'shardflow_lifecycle_events_total', { type: 'restarted', kind: 'indexer' }), 1);
    assert.equal(valueOf(samples, 'shardflow_broker_messages_sent_total', { namespace: 'links' }), 10);
    assert.equal(valueOf(samples, 'shardflow_broker_messages_settled_total', { namespace: 'links' }), 7);
    assert.equal(valueOf(samples, 'shardflow_broker_lag_messages', { namespace: 'links' }), 3);
    assert.equal(valueOf(samples, 'shardflow_broker_lag_messages', { namespace: 'fetches' }), 4, 'nothing settled yet: lag = sent');
    assert.equal(valueOf(samples, 'shardflow_broker_topic_lag_messages', { namespace: 'links', partition: '3' }), 2);

    // A restart shows at the next scrape: metrics are read at scrape time.
    await indexer.tell({ op: 'throw', error: new Error('boom again') });
    await settle();
    const again = parseSamples(await (await fetch(`${server.url}/metrics`)).text());
    assert.equal(valueOf(again, 'shardflow_actor_restarts_total', at), 2);

    assert.equal(register.getMetricsAsArray().filter((m) => m.name.startsWith('shardflow_')).length, 0, 'nothing in prom-client\'s global registry');
  } finally {
    await server.close();
    await broker.close();
    await system.terminate();
  }
});

test('each endpoint has its own registry; process metrics only when asked', async () => {
  const system = ActorSystem.create({ name: 'test', clock: new ManualClock(), logger: recordingLogger() });
  const plain = await startInspectionServer(system);
  const withProcess = await startInspectionServer(system, { processMetrics: true });
  try {
    assert.notEqual(plain.registry, withProcess.registry);
    assert.notEqual(plain.registry, register);
    const plainText = await (await fetch(`${plain.url}/metrics`)).text();
    assert.doesNotMatch(plainText, /^process_cpu_user_seconds_total /m);
    assert.doesNotMatch(plainText, /shardflow_broker_/, 'no flow source, no broker metrics');
    assert.match(await (await fetch(`${withProcess.url}/metrics`)).text(), /^process_cpu_user_seconds_total /m);
  } finally {
    await plain.close();
    await withProcess.close();
    await system.terminate();
  }
});

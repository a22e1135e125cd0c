import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { BrokerMessage } from '../src/runtime/brokers/broker.js';
import { MemoryBroker } from '../src/runtime/brokers/memory.js';
import { TopicFlowCounters } from '../src/runtime/inspection/topicFlow.js';
import { partitionId, producerId } from '../src/runtime/ids.js';
import { topic } from '../src/runtime/topics.js';

test('topic flow counters count sends, acks, dead letters and nacks past maxRedeliveries per topic', async () => {
  const counters = new TopicFlowCounters();
  const inner = new MemoryBroker();
  const broker = counters.wrap(inner);
  assert.equal(broker.kind, 'memory');
  const links2 = topic('links', partitionId(2));
  const fetches0 = topic('fetches', partitionId(0));
  try {
    const producer = await broker.producer(links2, { producer: producerId('p') });
    for (let i = 0; i < 5; i++) await producer.send(new Uint8Array([i]));
    await (await broker.producer(fetches0, { producer: producerId('p') })).send(new Uint8Array([9]));
    const consumer = await broker.subscribe(links2, { subscription: 's', type: 'failover', maxRedeliveries: 1, nackRedeliveryDelayMs: 1 });
    const [a, b, c, d] = await consumer.receive(4);
    await consumer.ack(a!);
    await consumer.deadLetter(b!, 'does not decode');
    await consumer.nack(c!, 'first try'); // redeliveryCount 0 < 1: comes back, not settled
    const byName = () => new Map([...counters.topics()].map((t) => [`${t.namespace}/${t.partition}`, t]));
    assert.deepEqual(byName().get('links/2'), { namespace: 'links', partition: '2', sent: 5, settled: 2 });
    assert.deepEqual(byName().get('fetches/0'), { namespace: 'fetches', partition: '0', sent: 1, settled: 0 });

    const delivered: BrokerMessage[] = [];
    while (!delivered.some((m) => m.sequence === c!.sequence)) delivered.push(...(await consumer.receive(5, 1000)));
    const again = delivered.find((m) => m.sequence === c!.sequence)!;
    const fifth = delivered.find((m) => m.sequence !== c!.sequence)!;
    assert.equal(again.redeliveryCount, 1);
    await consumer.nack(again, 'second try'); // past maxRedeliveries: dead-lettered by the broker
    assert.equal(byName().get('links/2')!.settled, 3);
    assert.deepEqual((await broker.deadLetters(links2, 's')).map((x) => x.reason), ['does not decode', 'second try']);
    await consumer.ack(d!);
    assert.equal(byName().get('links/2')!.settled, 4, 'one message (the fifth) still unsettled');
    await consumer.ack(fifth);
    assert.deepEqual(byName().get('links/2'), { namespace: 'links', partition: '2', sent: 5, settled: 5 });
  } finally {
    await broker.close();
  }
  await assert.rejects(broker.producer(links2, { producer: producerId('late') }), { code: 'SF_ERR_BROKER_CLOSED' }, 'closing the wrapper closed the broker');
});

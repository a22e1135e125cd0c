import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { rankGraph } from '../src/jobs/rankGraph.js';
import { readGraph, readScores } from '../src/replay/graphFile.js';
import { uniformWeights } from '../src/actors/metrics/weights.js';
import { MemoryBroker } from '../src/runtime/brokers/memory.js';
import { ChaosPolicy } from '../src/runtime/actor/chaosPolicy.js';
import type { Broker, BrokerMessage, Consumer, SubscribeOptions } from '../src/runtime/brokers/broker.js';
import type { Topic } from '../src/runtime/topics.js';
import { tap } from 'rxjs';
import { graphs, memoryLogger, tempDir, assertMatchesReference } from './kit/datasets.js';

/** The in-memory broker, counting `metrics` messages delivered again (redeliveryCount > 0). */
class CountingBroker implements Broker {
  readonly kind = 'memory';
  redelivered = 0;
  constructor(readonly inner: Broker) {}
  producer(topic: Topic, options: Parameters<Broker['producer']>[1]) {
    return this.inner.producer(topic, options);
  }
  async subscribe(topic: Topic, options: SubscribeOptions): Promise<Consumer> {
    const c = await this.inner.subscribe(topic, options);
    const count = (m: BrokerMessage) => {
      if (m.topic.namespace === 'metrics' && m.redeliveryCount > 0) this.redelivered++;
    };
    return { ...c, messages$: c.messages$.pipe(tap(count)), ack: (m) => c.ack(m), nack: (m, r) => c.nack(m, r), deadLetter: (m, r) => c.deadLetter(m, r), receive: (max, t) => c.receive(max, t), close: () => c.close() };
  }
  deadLetters(topic: Topic, subscription: string) {
    return this.inner.deadLetters(topic, subscription);
  }
  close() {
    return this.inner.close();
  }
}

// A metric actor folds contributions into memory and acks them only when its next push (or a
// flush) commits them. Metric actors killed at random (before pushes, deliveries, barriers)
// lose what they folded; the broker must deliver it again and the scores stay exact. (Acked
// when folded, the lost contributions never come back and the round barrier waits forever:
// the timeout fails the test.)
test('contributions folded but not yet committed come back after a metric actor dies: scores exact, nothing applied twice', { timeout: 120_000 }, async () => {
  const graph = await readGraph(join(graphs.polblogs, 'pages.txt'), join(graphs.polblogs, 'links.tsv'));
  const reference = await readScores(join(graphs.polblogs, 'pagerank.tsv'));
  const broker = new CountingBroker(new MemoryBroker());
  const { dir, cleanup } = tempDir();
  const restarts: string[] = [];
  try {
    const result = await rankGraph({
      graph,
      partitions: 4,
      dataDir: dir,
      broker,
      weigh: uniformWeights,
      log: memoryLogger().log,
      chaos: ChaosPolicy.create({ rate: 0.03, seed: 11, kinds: ['metrics'] }),
      onStarted: (index) => index.system.events$.subscribe((e) => { if (e.type === '@shardflow.restarted') restarts.push(e.kind); }),
    });
    console.log(JSON.stringify({ restarts: restarts.length, redelivered: broker.redelivered, rounds: result.converge.rounds }));
    assert.ok(restarts.filter((k) => k === 'metrics').length >= 5, `metric restarts: ${restarts.length}`);
    assert.ok(broker.redelivered > 0, 'folded contributions were delivered again');
    assertMatchesReference(result, reference);
  } finally {
    await broker.close();
    cleanup();
  }
});

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { rankGraph, l1Distance } from '../src/jobs/rankGraph.js';
import { readGraph, readScores } from '../src/replay/graphFile.js';
import { uniformWeights } from '../src/actors/metrics/weights.js';
import { MemoryBroker } from '../src/runtime/brokers/memory.js';
import type { Broker, BrokerMessage, Consumer, SubscribeOptions } from '../src/runtime/brokers/broker.js';
import type { Topic } from '../src/runtime/topics.js';
import { merge, Subject } from 'rxjs';
import { BrokerDisconnectedError } from '../src/errors.js';
import { graphs, memoryLogger, tempDir } from './kit/datasets.js';

/**
 * The real in-memory broker, except that every `every[namespace]`-th ack fails: the partition has
 * committed the batch's effects to RocksDB (with its applied marks) but the broker never
 * hears of it, exactly as if the partition died between its commit and its ack.
 */
class AckLosingBroker implements Broker {
  readonly kind = 'memory';
  lost = 0;
  readonly #acks = new Map<string, number>();
  constructor(readonly inner: Broker, readonly every: Readonly<Record<string, number>>) {}
  producer(topic: Topic, options: Parameters<Broker['producer']>[1]) {
    return this.inner.producer(topic, options);
  }
  async subscribe(topic: Topic, options: SubscribeOptions): Promise<Consumer> {
    const c = await this.inner.subscribe(topic, options);
    return {
      messages$: c.messages$,
      receive: (max, timeoutMs) => c.receive(max, timeoutMs),
      ack: async (m: BrokerMessage) => {
        const n = (this.#acks.get(m.topic.namespace) ?? 0) + 1;
        this.#acks.set(m.topic.namespace, n);
        if (n % (this.every[m.topic.namespace] ?? Infinity) === 0) {
          this.lost++;
          throw new BrokerDisconnectedError(`test: ack of ${m.topic.namespace}/${m.topic.partition} #${m.sequence} lost after the commit`);
        }
        return c.ack(m);
      },
      nack: (m, reason) => c.nack(m, reason),
      deadLetter: (m, reason) => c.deadLetter(m, reason),
      close: () => c.close(),
    };
  }
  deadLetters(topic: Topic, subscription: string) {
    return this.inner.deadLetters(topic, subscription);
  }
  close() {
    return this.inner.close();
  }
}

/**
 * The real in-memory broker, except that every `every`-th acked message is delivered once
 * more afterwards, as a broker does when it restarts having lost acks it had taken.
 */
class AckForgettingBroker implements Broker {
  readonly kind = 'memory';
  copies = 0;
  #acks = 0;
  readonly #copies = new WeakSet<BrokerMessage>();
  constructor(readonly inner: Broker, readonly every: number) {}
  producer(topic: Topic, options: Parameters<Broker['producer']>[1]) {
    return this.inner.producer(topic, options);
  }
  async subscribe(topic: Topic, options: SubscribeOptions): Promise<Consumer> {
    const c = await this.inner.subscribe(topic, options);
    const again$ = new Subject<BrokerMessage>();
    return {
      messages$: merge(c.messages$, again$),
      receive: (max, timeoutMs) => c.receive(max, timeoutMs),
      ack: async (m: BrokerMessage) => {
        if (this.#copies.has(m)) return; // the copy: the broker took it already
        await c.ack(m);
        if (++this.#acks % this.every === 0) {
          const copy: BrokerMessage = { ...m, redeliveryCount: m.redeliveryCount + 1 };
          this.#copies.add(copy);
          this.copies++;
          setTimeout(() => again$.next(copy), 5);
        }
      },
      nack: (m, reason) => c.nack(m, reason),
      deadLetter: (m, reason) => c.deadLetter(m, reason),
      close: async () => {
        again$.complete();
        await c.close();
      },
    };
  }
  deadLetters(topic: Topic, subscription: string) {
    return this.inner.deadLetters(topic, subscription);
  }
  close() {
    return this.inner.close();
  }
}

/** Ranks polblogs over `broker` and checks that counts and scores are exact. */
async function rankExactly(broker: Broker, onStarted?: Parameters<typeof rankGraph>[0]['onStarted']): Promise<void> {
  const graph = await readGraph(join(graphs.polblogs, 'pages.txt'), join(graphs.polblogs, 'links.tsv'));
  const reference = await readScores(join(graphs.polblogs, 'pagerank.tsv'));
  const { dir, cleanup } = tempDir();
  try {
    const result = await rankGraph({ graph, partitions: 4, dataDir: dir, broker, weigh: uniformWeights, log: memoryLogger().log, ...(onStarted ? { onStarted } : {}) });
    // A double merge would show here: counters and ranks are int64/float64 add merges.
    assert.equal(result.pages, 1489);
    assert.equal(result.outlinks, 18938);
    assert.equal(result.backlinks, 18938);
    const l1 = l1Distance(new Map(result.scores), reference);
    assert.ok(l1 <= 1e-6, `L1 ${l1}`);
  } finally {
    cleanup();
  }
}

test('messages delivered again after their ack (a broker that lost acks) are skipped, and the job still ends: counts and scores exact', { timeout: 600_000 }, async () => {
  const broker = new AckForgettingBroker(new MemoryBroker(), 7);
  try {
    await rankExactly(broker);
    assert.ok(broker.copies > 10, `copies delivered: ${broker.copies}`);
  } finally {
    await broker.close();
  }
});

test('a partition that dies between its RocksDB commit and its ack gets the batch again and skips it: counts and scores equal a run without the fault', { timeout: 600_000 }, async () => {
  const broker = new AckLosingBroker(new MemoryBroker(), { fetches: 5, links: 11, metrics: 37 });
  const restarts: string[] = [];
  try {
    await rankExactly(broker, (index) => index.system.events$.subscribe((e) => { if (e.type === '@shardflow.restarted') restarts.push(e.kind); }));
    assert.ok(broker.lost > 10, `acks lost: ${broker.lost}`);
    assert.ok(restarts.includes('indexer') && restarts.includes('backlinks') && restarts.includes('metrics'), `restarted: ${[...new Set(restarts)]}`);
  } finally {
    await broker.close();
  }
});

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { MemoryBroker, FlowCounters, StreamOutbox, partitionId, producerId } from '../src/index.js';
import { topic } from '../src/runtime/brokers/index.js';
import { Store } from '../src/storage/index.js';
import { tempDir } from './kit/datasets.js';

/**
 * `StreamOutbox.publishCommitted` (an outbox `heldForCheckpoint`, published after the
 * checkpoint that holds its rows): topics go concurrently, each topic's rows in commit order;
 * a topic whose send fails (here a row over the broker's payload limit) sends none of its later
 * rows, which stay committed in order, in the store, for the next call, while the other topics
 * are published whole. Real RocksDB store, in-process broker.
 */
test('publishCommitted: every topic in order; a failing topic keeps its rows from the failure on, the others are published', async () => {
  const { dir, cleanup } = tempDir();
  const broker = new MemoryBroker({ maxPayloadBytes: 64 });
  const store = await Store.open({ path: join(dir, 'p0'), columnFamilies: { meta: {}, outbox: {} } });
  try {
    const families = { meta: 'meta', outbox: 'outbox' } as const;
    const [a, b] = [topic('links', partitionId(1)), topic('links', partitionId(2))];
    const consumers = await Promise.all([a, b].map((t) => broker.subscribe(t, { subscription: 'backlinks', type: 'failover' })));
    const outbox = await StreamOutbox.open({ store, broker, owner: 'indexer', producer: producerId('indexer@0'), counters: new FlowCounters(), columnFamilies: families, heldForCheckpoint: true });
    const batch = store.batch();
    const big = Buffer.alloc(100, 'x');
    const rows: Array<[typeof a, Buffer]> = [
      [a, Buffer.from('a0')], [b, Buffer.from('b0')], [a, Buffer.from('a1')], [b, Buffer.from('b1')],
      [a, big], [b, Buffer.from('b2')], [a, Buffer.from('a3')], [b, Buffer.from('b3')],
    ];
    for (const [t, payload] of rows) await outbox.enqueue(batch, t, payload);
    await store.write(batch);
    await outbox.publish(); // held: nothing sent, the rows become committed
    assert.equal(outbox.committedRows, 8);

    await assert.rejects(outbox.publishCommitted(8), /payload/i, 'the oversized row of topic a fails its send');
    const received = async (i: number) => {
      const got: string[] = [];
      for (let m = await consumers[i]!.receive(100, 200); m.length > 0; m = await consumers[i]!.receive(100, 200)) got.push(...m.map((x) => `${Buffer.from(x.payload).toString()}@${x.sequence}`));
      return got;
    };
    assert.deepEqual(await received(0), ['a0@0', 'a1@1'], 'topic a: its rows before the failure, in order');
    assert.deepEqual(await received(1), ['b0@0', 'b1@1', 'b2@2', 'b3@3'], 'topic b: every row, in order');
    assert.equal(outbox.committedRows, 2, 'topic a\'s failed row and the one after it stay committed');
    const left: string[] = [];
    for await (const [, value] of store.iterate('outbox', { prefix: 'indexer|' })) left.push(value.length > 10 ? 'big' : value.toString());
    assert.deepEqual(left, ['big', 'a3'], 'only the unpublished rows are left in the store, in order');
  } finally {
    await store.close();
    await broker.close();
    cleanup();
  }
});

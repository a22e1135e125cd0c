import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import {
  FlowCounters, InvalidArgumentError, MemoryBroker, StreamMarks, StreamOutbox, encodeInt64, outboxProducerKey, partitionId, producerId, readStreamFlow,
  sameStreamFlow, sequence, unappliedStreams, waitStreamsQuiet, type StreamFlowReport,
} from '../src/index.js';
import { topic } from '../src/runtime/brokers/index.js';
import { StreamColumnFamilies, stageColumnFamilies } from '../src/runtime/stream/reserved.js';
import { Store } from '../src/storage/index.js';
import { tempDir } from './kit/datasets.js';

/**
 * Quiet detection across processes from two real stage stores (`sf.meta`): store 0 sends to
 * `sums/1` through its outbox, store 1 applies what it receives with its marks. The reports
 * say what was sent and applied; `unappliedStreams` compares them; `waitStreamsQuiet` needs
 * two identical collections with nothing unapplied.
 */
test('flow reports of real stores: sent against applied, external streams, two identical collections for quiet', async () => {
  const { dir, cleanup } = tempDir();
  const broker = new MemoryBroker();
  const stores = await Promise.all([0, 1].map((p) => Store.open({ path: join(dir, `p${p}`), columnFamilies: stageColumnFamilies({}) })));
  const [sender, receiver] = stores as [Store, Store];
  try {
    const sums1 = topic('sums', partitionId(1));
    const outbox = await StreamOutbox.open({ store: sender, broker, owner: 'count', producer: producerId('count@0'), counters: new FlowCounters(), epoch: 2 });
    const batch = sender.batch();
    for (let i = 0; i < 3; i++) await outbox.enqueue(batch, sums1, Buffer.of(i));
    await sender.write(batch);
    const collect = () => Promise.all(stores.map((s) => readStreamFlow(s)));
    const receiverOf = (t: string) => (t.startsWith('sums/') ? { report: Number(t.slice(5)), consumer: 'sum' } : undefined);

    const sent = await collect();
    assert.deepEqual(sent[0], { outboxes: [{ owner: 'count', producer: 'count@0', next: { 'sums/1': 2 * 2 ** 32 + 3 } }], consumers: [] });
    const last = 2 * 2 ** 32 + 2;
    assert.deepEqual(unappliedStreams(sent, { receiver: receiverOf }), [{ producer: 'count@0', topic: 'sums/1', sent: last, applied: -1, receiver: { report: 1, consumer: 'sum' } }]);

    // The receiver applies two of the three, then the third: unapplied until its mark reaches the last sequence.
    const marks = new StreamMarks(receiver, 'sum');
    const apply = async (seq: number) => {
      const b = receiver.batch();
      marks.record(b, producerId('count@0'), sequence(seq));
      await receiver.write(b);
    };
    await apply(last - 1);
    assert.equal(unappliedStreams(await collect(), { receiver: receiverOf }).length, 1);
    await apply(last);
    const applied = await collect();
    assert.deepEqual(applied[1]!.consumers, [{ consumer: 'sum', applied: { 'count@0': last } }]);
    assert.deepEqual(unappliedStreams(applied, { receiver: receiverOf }), []);

    // An external producer's stream (a loader) counts too; a receiving report that is missing counts as unapplied.
    const loader = { producer: 'loader/x', topic: 'sums/1', next: 5 };
    assert.deepEqual(unappliedStreams(applied, { receiver: receiverOf, external: [loader] }).map((u) => [u.producer, u.sent, u.applied]), [['loader/x', 4, -1]]);
    assert.equal(unappliedStreams([applied[0], undefined], { receiver: receiverOf }).length, 1);
    assert.throws(() => unappliedStreams([applied[0]], { receiver: receiverOf }), InvalidArgumentError);

    // An outbox whose producer name was never recorded (a store from before names were kept) is never quiet.
    await sender.delete(StreamColumnFamilies.meta, outboxProducerKey('count'));
    const unnamed = await collect();
    assert.equal(unnamed[0]!.outboxes[0]!.producer, undefined);
    assert.deepEqual(unappliedStreams(unnamed, { receiver: receiverOf }).map((u) => u.producer), [undefined]);
    await sender.put(StreamColumnFamilies.meta, outboxProducerKey('count'), Buffer.from('count@0'));

    // Quiet takes two consecutive identical collections with nothing unapplied: a store that
    // changes between them (here, a commit after the first collection) starts the count again.
    let calls = 0;
    const changing = async (): Promise<StreamFlowReport[]> => {
      const reports = await collect();
      if (++calls === 1) await receiver.put(StreamColumnFamilies.meta, 'applied\u0000sum\u0000other@9', encodeInt64(0));
      return reports;
    };
    const quiet = await waitStreamsQuiet(changing, { receiver: receiverOf, pollMs: 1 });
    assert.equal(quiet.collections, 3, 'a commit after collection 1: collection 2 differs from it, 3 agrees with 2');
    assert.ok(sameStreamFlow(quiet.reports, await collect()));
    await assert.rejects(waitStreamsQuiet(collect, { receiver: receiverOf, external: [loader], pollMs: 1, timeoutMs: 20 }), /loader\/x -> sums\/1: sent 4, applied -1/);

    // Work the stores do not show (a FlowCollection's `busy`): quiet only once it is empty in
    // two consecutive collections, and named when the wait gives up.
    let held = 2;
    const holding = async () => ({ reports: await collect(), busy: held-- > 0 ? ['crawl-policy of partition 0: 1 request out'] : [] });
    const afterBusy = await waitStreamsQuiet(holding, { receiver: receiverOf, pollMs: 1 });
    assert.equal(afterBusy.collections, 4, 'busy in collections 1 and 2; 3 and 4 settled and identical');
    await assert.rejects(
      waitStreamsQuiet(async () => ({ reports: await collect(), busy: ['crawl-policy of partition 0: 1 request out'] }), { receiver: receiverOf, pollMs: 1, timeoutMs: 20 }),
      /0 unapplied; busy: crawl-policy of partition 0: 1 request out/,
    );
    await outbox.close();
  } finally {
    for (const s of stores) await s.close();
    await broker.close();
    cleanup();
  }
});

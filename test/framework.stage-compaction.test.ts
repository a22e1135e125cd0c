import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  InvalidArgumentError, MemoryBroker, Topology, decodeInt64, defineNamespace, encodeInt64, encodeRecord, int64Add, msgpackCodec, ttl, type Logger,
} from '../src/index.js';
import { tempDir } from './kit/datasets.js';

/**
 * `running.compact(stage, columnFamily)` compacts a stage's column family on every partition
 * while the topology runs, so its compaction filter has run over every committed value: a
 * `ttl` family loses exactly its expired records (the filter reads the wall clock, so records
 * are a day or more on either side of the cut-off), a family without a filter loses nothing,
 * and a family the stage does not declare (the framework's `sf.*` included) is refused.
 */
interface Event { readonly key: string; readonly ms: number }
const isEvent = (v: unknown): v is Event => typeof (v as Event)?.key === 'string' && Number.isSafeInteger((v as Event)?.ms);
const quiet: Logger = { debug() {}, warn() {}, error() {} };
const DAY = 86_400_000;

test('compact(stage, cf) runs the ttl filter over every partition now; unknown families are refused', { timeout: 60_000 }, async () => {
  const { dir, cleanup } = tempDir('sf-compact-');
  const events = defineNamespace('events', { codec: msgpackCodec('Event', isEvent), partitions: 3, key: (e: Event) => e.key });
  const topology = Topology.create('compaction').stage('keep', {
    input: events,
    columnFamilies: { recent: { compactionFilter: ttl({ field: 'ms', ttlMs: 2 * DAY }) }, total: { mergeOperator: int64Add() } },
    onMessage(ctx, e) {
      ctx.writes.put('recent', e.key, encodeRecord({ ms: e.ms }));
      ctx.writes.merge('total', 'all', encodeInt64(1));
    },
    async query(reads, _request: 'count') {
      let recent = 0;
      for await (const _ of reads.iterate('recent')) recent++;
      const total = await reads.get('total', 'all');
      return { recent, total: total ? decodeInt64(total) : 0n };
    },
  });
  const broker = new MemoryBroker();
  const running = await topology.start({ broker, dataDir: dir, logger: quiet });
  try {
    const producer = await running.producer(events, 'events-src');
    const now = Date.now();
    for (let i = 0; i < 60; i++) await producer.send({ key: `k${i}`, ms: i % 3 === 0 ? now - 5 * DAY : now });
    await running.quiescence({ timeoutMs: 30_000 });
    const count = async () => (await running.askAll('keep', 'count')).reduce((a, c) => ({ recent: a.recent + c.recent, total: a.total + c.total }));
    assert.deepEqual(await count(), { recent: 60, total: 60n });

    const reports = await running.compact('keep', 'recent');
    assert.deepEqual(reports.map((r) => [r.partition, r.columnFamily]), [[0, 'recent'], [1, 'recent'], [2, 'recent']]);
    assert.equal(reports.reduce((a, r) => a + r.dropped, 0), 20);
    assert.ok(reports.reduce((a, r) => a + r.examined, 0) >= 60);
    assert.deepEqual(await count(), { recent: 40, total: 60n });

    const unfiltered = await running.compact('keep', 'total');
    assert.equal(unfiltered.reduce((a, r) => a + r.dropped, 0), 0);
    assert.deepEqual(await count(), { recent: 40, total: 60n });

    // @ts-expect-error: not a column family of the stage
    await assert.rejects(running.compact('keep', 'nope'), (err: unknown) => err instanceof InvalidArgumentError && /"nope" is not one of its column families \(declared: recent, total\)/.test(err.message));
    // @ts-expect-error: the framework's own families are not the stage's to compact
    await assert.rejects(running.compact('keep', 'sf.meta'), InvalidArgumentError);
  } finally {
    await running.stop();
    await broker.close();
    cleanup();
  }
});

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { DataDirError, MemoryBroker, Topology, defineNamespace, encodeInt64, int64Add, msgpackCodec } from '../src/index.js';
import { tempDir } from './kit/datasets.js';

/**
 * A start that changes a stage's partition count is refused for that, naming both counts,
 * even when it also changed the stage's column families (the stores' own check would
 * otherwise speak first, of a family they were opened without: found by a new user).
 */
interface Order { readonly customer: string }
const isOrder = (v: unknown): v is Order => typeof (v as Order)?.customer === 'string';

function orders(partitions: number, families: Record<string, { mergeOperator: ReturnType<typeof int64Add> }>) {
  const input = defineNamespace('orders', { codec: msgpackCodec('Order', isOrder), partitions, key: (o: Order) => o.customer });
  return Topology.create('repartition').stage('customers', {
    input,
    columnFamilies: families,
    onMessage(ctx, o) {
      ctx.writes.merge(Object.keys(families)[0]! as never, o.customer, encodeInt64(1));
    },
  });
}

test('a data dir run with 8 partitions is refused with 16 for the partition count, whatever else changed', async () => {
  const { dir, cleanup } = tempDir('sf-repartition-');
  const dataDir = join(dir, 'data');
  const broker = new MemoryBroker();
  try {
    const first = await orders(8, { totals: { mergeOperator: int64Add() }, counts: { mergeOperator: int64Add() } }).start({ broker, dataDir });
    await first.stop();
    const both = { totals: { mergeOperator: int64Add() }, counts: { mergeOperator: int64Add() } };
    const one = { totals: { mergeOperator: int64Add() } };
    for (const families of [both, one] as Array<Record<string, { mergeOperator: ReturnType<typeof int64Add> }>>) {
      await assert.rejects(orders(16, families).start({ broker, dataDir }), (err: unknown) => {
        assert.ok(err instanceof DataDirError, String(err));
        assert.match(err.message, /stage customers was run with 8 partitions \(.*\), not 16 \(.*\): its stores hold keys placed by that partitioning; use a new data dir/);
        return true;
      });
    }
    const again = await orders(8, { totals: { mergeOperator: int64Add() }, counts: { mergeOperator: int64Add() } }).start({ broker, dataDir });
    await again.stop();
  } finally {
    await broker.close();
    cleanup();
  }
});

import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { decodeInt64, encodeInt64, int64Add } from '../src/operators/mergeOperators.js';
import { SharedResources, Store } from '../src/storage/index.js';

let dir: string;
before(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'shardflow-resources-'));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

const MiB = 2 ** 20;

describe('SharedResources', () => {
  it('validates the budget', () => {
    assert.throws(() => SharedResources.create({ memoryBudgetBytes: 1000 }), { code: 'SF_ERR_INVALID_ARGUMENT' });
    assert.throws(() => SharedResources.create({ memoryBudgetBytes: Number.NaN }), { code: 'SF_ERR_INVALID_ARGUMENT' });
  });

  it('keeps 64 stores writing 2x the budget within the budget (cache + memtables)', async () => {
    const budget = 32 * MiB;
    const resources = SharedResources.create({ memoryBudgetBytes: budget });
    const stores: Store[] = [];
    try {
      for (let s = 0; s < 64; s++) {
        stores.push(
          await Store.open({
            path: path.join(dir, `s${s}`),
            columnFamilies: { pages: {}, counts: { mergeOperator: int64Add() } },
            resources,
          }),
        );
      }
      const value = Buffer.alloc(1000, 1);
      let peakMemtables = 0;
      let peakCharged = 0;
      for (let round = 0; round < 10; round++) {
        await Promise.all(
          stores.map((store) => {
            const batch = store.batch();
            for (let i = 0; i < 100; i++) batch.put('pages', `r${round}/k${i}`, value).merge('counts', 'n', encodeInt64(1));
            return store.write(batch);
          }),
        );
        const u = resources.usage();
        peakMemtables = Math.max(peakMemtables, u.memtableBytes);
        peakCharged = Math.max(peakCharged, u.blockCacheBytes);
      }
      // 64 MB written in total; memtables are held to about half the budget by the
      // write admission, and everything charged to the cache stays within the budget.
      assert.ok(peakMemtables <= budget * 0.75, `memtables peaked at ${peakMemtables} bytes`);
      assert.ok(peakCharged <= budget * 1.05, `cache charge peaked at ${peakCharged} bytes`);
      for (const store of stores) {
        assert.equal(decodeInt64((await store.get('counts', 'n'))!), 1000n);
        assert.deepEqual(await store.get('pages', 'r9/k99'), value);
        assert.equal(store.stats().memoryBudgetBytes, budget);
      }
    } finally {
      await Promise.all(stores.map((s) => s.close()));
    }
  });
});

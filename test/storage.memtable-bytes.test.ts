import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { decodeFloat64s, float64Add } from '../src/operators/mergeOperators.js';
import { packKeys, Store } from '../src/storage/index.js';
import { InvalidArgumentError } from '../src/errors.js';

// ColumnFamilyOptions.memtableBytes: a family's memtables are switched (and flushed) at
// that size instead of the budget's share, and the merged values are the same.
let dir: string;
before(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'shardflow-memtable-bytes-'));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

const SMALL = 256 * 1024;

describe('ColumnFamilyOptions.memtableBytes', () => {
  it('bounds the family\'s memtable, not the others\', and merges the same sums', async () => {
    const store = await Store.open({
      path: path.join(dir, 'bounded'),
      columnFamilies: {
        small: { mergeOperator: float64Add(), memtableInsertHint: true, memtableBytes: SMALL },
        shared: { mergeOperator: float64Add(), memtableInsertHint: true },
      },
    });
    try {
      const keys = Array.from({ length: 2000 }, (_, i) => Buffer.from(`https://h${i >> 8}.example/p${String(i).padStart(5, '0')}`));
      keys.sort(Buffer.compare);
      const packed = packKeys(keys);
      // 40 batches of 2,000 [dx, dr] merges each (80,000 skip-list entries, several MiB).
      for (let b = 0; b < 40; b++) {
        const operands = new Float64Array(2 * keys.length);
        for (let i = 0; i < keys.length; i++) {
          operands[2 * i] = b + 1;
          operands[2 * i + 1] = -(i + 1);
        }
        const batch = store.batch();
        batch.mergeFloat64s('small', packed, operands, 2);
        batch.mergeFloat64s('shared', packed, operands, 2);
        await store.write(batch);
      }
      const active = (cf: string) => Number(store.property('rocksdb.cur-size-active-mem-table', cf));
      assert.ok(active('small') <= 2 * SMALL, `small family's active memtable ${active('small')} bytes, bound ${SMALL}`);
      assert.ok(active('shared') > 2 * SMALL, `shared family's active memtable ${active('shared')} bytes holds every entry`);
      await store.flush();
      for (const cf of ['small', 'shared']) {
        let i = 0;
        for await (const [k, v] of store.iterate(cf)) {
          assert.deepEqual(k, keys[i]);
          assert.deepEqual([...decodeFloat64s(v)], [(40 * 41) / 2, -40 * (i + 1)], `${cf} ${k.toString()}`);
          i++;
        }
        assert.equal(i, keys.length);
      }
    } finally {
      await store.close();
    }
  });

  it('rejects a size that is not a positive integer', async () => {
    for (const memtableBytes of [0, -1, 1.5, Number.NaN]) {
      await assert.rejects(
        Store.open({ path: path.join(dir, `bad-${String(memtableBytes)}`), columnFamilies: { f: { memtableBytes } } }),
        InvalidArgumentError,
      );
    }
  });
});

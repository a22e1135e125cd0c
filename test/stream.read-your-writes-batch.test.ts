import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { decodeSet, encodeInt64, encodeSetOps, int64Add, seededRandom, set } from '../src/index.js';
import { Store } from '../src/storage/index.js';
import { ReadYourWritesBatch } from '../src/runtime/stream/readYourWritesBatch.js';

/**
 * A stage batch starts plain and becomes indexed at its first read (ReadYourWritesBatch):
 * whatever was recorded before, with save points open or rolled back, the first read and
 * everything after it must give what a batch indexed from the start gives, and both must
 * commit the same data. Seeded random programs of put/merge/delete, save points and reads.
 */
const KEYS = ['a', 'b', 'c', 'd'];

for (const seed of [1, 2, 3, 4, 5, 6, 7, 8]) {
  test(`seed ${seed}: a batch indexed at its first read reads and commits like one indexed from the start`, async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'sf-ryw-'));
    const cfs = { plain: {}, counts: { mergeOperator: int64Add() }, sets: { mergeOperator: set() } };
    const [lazyStore, eagerStore] = await Promise.all([Store.open({ path: path.join(dir, 'lazy'), columnFamilies: cfs }), Store.open({ path: path.join(dir, 'eager'), columnFamilies: cfs })]);
    try {
      for (const s of [lazyStore, eagerStore]) await s.write(s.batch().put('plain', 'a', Buffer.from('stored')).merge('counts', 'a', encodeInt64(5)));
      const lazy = new ReadYourWritesBatch(lazyStore, false);
      const eager = new ReadYourWritesBatch(eagerStore, true);
      const random = seededRandom(seed);
      let open = 0;
      let reads = 0;
      for (let step = 0; step < 80; step++) {
        const r = random();
        const key = KEYS[Math.floor(random() * KEYS.length)]!;
        const both = (f: (b: ReadYourWritesBatch) => void) => [lazy, eager].forEach(f);
        if (r < 0.2) both((b) => b.put('plain', key, Buffer.from(`v${step}`)));
        else if (r < 0.4) both((b) => b.merge('counts', key, encodeInt64(step)));
        else if (r < 0.5) both((b) => b.merge('sets', key, encodeSetOps({ add: [`m${step}`] })));
        else if (r < 0.6) both((b) => b.delete(['plain', 'counts', 'sets'][step % 3]!, key));
        else if (r < 0.7) {
          both((b) => b.setSavePoint());
          open++;
        } else if (r < 0.8 && open > 0) {
          both((b) => (step % 2 ? b.rollbackToSavePoint() : b.popSavePoint()));
          open--;
        } else if (r < 0.85 + (step > 40 ? 0.1 : 0)) {
          reads++;
          for (const cf of ['plain', 'counts', 'sets']) {
            const [x, y] = await Promise.all([lazy.readable().get(cf, key), eager.readable().get(cf, key)]);
            assert.deepEqual(cf === 'sets' && x ? decodeSet(x) : x, cf === 'sets' && y ? decodeSet(y) : y, `step ${step}: ${cf}/${key}`);
          }
        }
      }
      while (open-- > 0) [lazy, eager].forEach((b) => b.popSavePoint());
      assert.equal(lazy.batch.length, eager.batch.length);
      await lazyStore.write(lazy.batch);
      await eagerStore.write(eager.batch);
      for (const cf of ['plain', 'counts', 'sets']) {
        const all = async (s: Store) => {
          const out: string[] = [];
          for await (const [k, v] of s.iterate(cf)) out.push(`${k.toString()}=${cf === 'sets' ? decodeSet(v).join(',') : v.toString('hex')}`);
          return out;
        };
        assert.deepEqual(await all(lazyStore), await all(eagerStore), `committed ${cf} (reads in the program: ${reads})`);
      }
    } finally {
      await lazyStore.close();
      await eagerStore.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
}

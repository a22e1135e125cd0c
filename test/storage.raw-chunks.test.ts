import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Store } from '../src/storage/index.js';
import { tempDir } from './kit/datasets.js';

test('rawChunks gives the same entries as chunks, in place, within bounds and at a snapshot', async () => {
  const { dir, cleanup } = tempDir();
  const store = await Store.open({ path: dir, columnFamilies: { data: {} } });
  try {
    const batch = store.batch();
    for (let i = 0; i < 5000; i++) batch.put('data', `k${String(i).padStart(5, '0')}`, Buffer.from(`value-${i}`.repeat(1 + (i % 3))));
    await store.write(batch);
    const snapshot = store.snapshot();
    await store.put('data', 'k00001', Buffer.from('changed after the snapshot'));
    const opts = { gte: 'k00100', lt: 'k04000', chunkSize: 333, snapshot };
    const expected: Array<[string, string]> = [];
    for await (const c of store.chunks('data', opts)) c.keys.forEach((k, i) => expected.push([k.toString(), c.values[i]!.toString()]));
    const got: Array<[string, string]> = [];
    let chunks = 0;
    for await (const c of store.rawChunks('data', opts)) {
      chunks++;
      for (let i = 0; i < c.count; i++) {
        got.push([c.keys.toString('utf8', c.keyOffsets[i]!, c.keyOffsets[i + 1]!), c.values.toString('utf8', c.valueOffsets[i]!, c.valueOffsets[i + 1]!)]);
      }
    }
    snapshot.release();
    assert.equal(got.length, 3900);
    assert.deepEqual(got, expected);
    assert.ok(chunks >= 12, `one item per native call of at most 333 entries (${chunks})`);
    assert.equal(got[0]![0], 'k00100');
  } finally {
    await store.close();
    cleanup();
  }
});

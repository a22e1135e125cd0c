import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { FencedError } from '../src/index.js';
import { Store } from '../src/storage/index.js';
import { tempDir } from './kit/datasets.js';

// A store's write guard (what a fenced partition passes as its lease check) refuses every
// kind of write once it throws, writes nothing of it, and leaves reads alone.
test('a write guard that throws refuses put, merge, delete and batch writes; reads go on', async () => {
  const { dir, cleanup } = tempDir();
  let lost = false;
  const store = await Store.open({ path: join(dir, 's'), columnFamilies: { a: {} }, writeGuard: () => { if (lost) throw new FencedError('lease lost', 1); } });
  try {
    await store.put('a', 'k', Buffer.from('v1'));
    lost = true;
    await assert.rejects(store.put('a', 'k', Buffer.from('v2')), FencedError);
    await assert.rejects(store.delete('a', 'k'), FencedError);
    await assert.rejects(store.merge('a', 'k', Buffer.from('x')), FencedError);
    const batch = store.batch().put('a', 'k', Buffer.from('v3')).put('a', 'other', Buffer.from('o'));
    await assert.rejects(store.write(batch), FencedError);
    assert.equal((await store.get('a', 'k'))?.toString(), 'v1');
    assert.equal(await store.get('a', 'other'), undefined);
    lost = false;
    await store.write(batch);
    assert.equal((await store.get('a', 'k'))?.toString(), 'v3', 'the refused batch kept its operations');
  } finally {
    await store.close();
    cleanup();
  }
});

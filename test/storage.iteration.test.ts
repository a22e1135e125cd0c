import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Store, type IterateOptions } from '../src/storage/index.js';

let dir: string;
let store: Store;
// Keys of one and two characters plus a non-ASCII one ('c\xff' is UTF-8 63 c3 bf); value = 'v:' + key
const keys = ['a', 'aa', 'ab', 'ac', 'b', 'ba', 'bb', 'c', 'c\xff', 'd'];

before(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'shardflow-iter-'));
  store = await Store.open({ path: path.join(dir, 'db'), columnFamilies: { cf: {}, other: {} } });
  const batch = store.batch();
  for (const k of keys) batch.put('cf', k, Buffer.from(`v:${k}`));
  batch.put('other', 'zzz', Buffer.from('elsewhere'));
  await store.write(batch);
  await store.flush();
  await store.put('cf', 'ab', Buffer.from('v:ab')); // one key in the memtable too
});
after(async () => {
  await store.close();
  await rm(dir, { recursive: true, force: true });
});

async function collect(opts?: IterateOptions): Promise<string[]> {
  const out: string[] = [];
  for await (const [k, v] of store.iterate('cf', opts)) {
    if (!opts?.keysOnly) assert.equal(v.toString('latin1'), `v:${k.toString('latin1')}`);
    out.push(k.toString('latin1'));
  }
  return out;
}

const sorted = [...keys].map((k) => Buffer.from(k)).sort(Buffer.compare).map((b) => b.toString('latin1'));

describe('iterate', () => {
  it('walks the whole column family in bytewise order, and only that family', async () => {
    assert.deepEqual(await collect(), sorted);
  });

  it('applies gte/gt/lt/lte', async () => {
    assert.deepEqual(await collect({ gte: 'ab', lt: 'ba' }), ['ab', 'ac', 'b']);
    assert.deepEqual(await collect({ gt: 'ab', lte: 'ba' }), ['ac', 'b', 'ba']);
    assert.deepEqual(await collect({ gt: 'd' }), []);
    assert.deepEqual(await collect({ gte: 'bb', lt: 'b' }), []);
    assert.deepEqual(await collect({ lte: 'a' }), ['a']);
  });

  it('restricts to a prefix, combined with other bounds', async () => {
    assert.deepEqual(await collect({ prefix: 'a' }), ['a', 'aa', 'ab', 'ac']);
    assert.deepEqual(await collect({ prefix: 'b', gt: 'b' }), ['ba', 'bb']);
    assert.deepEqual(await collect({ prefix: 'c' }), ['c', Buffer.from('c\xff').toString('latin1')]);
    assert.deepEqual(await collect({ prefix: Buffer.from([0xff]) }), []);
  });

  it('walks in reverse, bounds included', async () => {
    assert.deepEqual(await collect({ reverse: true }), [...sorted].reverse());
    assert.deepEqual(await collect({ reverse: true, prefix: 'a' }), ['ac', 'ab', 'aa', 'a']);
    assert.deepEqual(await collect({ reverse: true, gt: 'a', lte: 'b' }), ['b', 'ac', 'ab', 'aa']);
  });

  it('gives empty values with keysOnly', async () => {
    for await (const [, v] of store.iterate('cf', { keysOnly: true, prefix: 'a' })) assert.equal(v.length, 0);
  });

  it('can stop early (break releases the native iterator)', async () => {
    const seen: string[] = [];
    for await (const [k] of store.iterate('cf', { chunkSize: 2 })) {
      seen.push(k.toString());
      if (seen.length === 3) break;
    }
    assert.deepEqual(seen, sorted.slice(0, 3));
  });
});

describe('chunks', () => {
  it('hands out chunkSize entries per native call, the last one possibly shorter', async () => {
    const sizes: number[] = [];
    const all: string[] = [];
    for await (const { keys: ks, values } of store.chunks('cf', { chunkSize: 3 })) {
      sizes.push(ks.length);
      assert.equal(values.length, ks.length);
      all.push(...ks.map((k) => k.toString('latin1')));
    }
    assert.deepEqual(sizes, [3, 3, 3, 1]);
    assert.deepEqual(all, sorted);
  });

  it('stops a chunk early at chunkBytes', async () => {
    const sizes: number[] = [];
    for await (const { keys: ks } of store.chunks('cf', { chunkSize: 100, chunkBytes: 1 })) sizes.push(ks.length);
    assert.ok(sizes.every((s) => s === 1));
    assert.equal(sizes.length, keys.length);
  });

  it('reads the state at its start; later writes are not seen', async () => {
    const it = store.chunks('cf', { chunkSize: 1 })[Symbol.asyncIterator]();
    const first = await it.next();
    assert.equal(first.done, false);
    await store.put('cf', 'zz-late', Buffer.from('v:zz-late'));
    let count = 1;
    for (let r = await it.next(); !r.done; r = await it.next()) count++;
    assert.equal(count, keys.length);
    await store.delete('cf', 'zz-late');
  });

  it('reads a snapshot when given one', async () => {
    const snap = store.snapshot();
    await store.put('cf', 'ca', Buffer.from('v:ca'));
    const withSnap: string[] = [];
    for await (const { keys: ks } of store.chunks('cf', { snapshot: snap, prefix: 'c' })) withSnap.push(...ks.map(String));
    const now: string[] = [];
    for await (const { keys: ks } of store.chunks('cf', { prefix: 'c' })) now.push(...ks.map(String));
    assert.equal(now.length, withSnap.length + 1);
    assert.ok(!withSnap.includes('ca'));
    snap.release();
    await store.delete('cf', 'ca');
  });
});

import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { InvalidArgumentError, StoreClosedError } from '../src/errors.js';
import { decodeInt64, encodeInt64, int64Add } from '../src/operators/mergeOperators.js';
import { Store } from '../src/storage/index.js';

// Single writes issued while another is on the libuv pool are group-committed
// (src/storage/internal/writeGroup.ts): one RocksDB write per group, same results.

let dir: string;
let n = 0;
before(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'shardflow-group-'));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});
const open = () => Store.open({ path: path.join(dir, `s${n++}`), columnFamilies: { data: {}, counts: { mergeOperator: int64Add() } } });
const writeCalls = (s: Store) => {
  const st = s.stats();
  return st.writesDoneBySelf + st.writesDoneByOther;
};

describe('Store group commit of single writes', () => {
  it('concurrent merges count exactly, in far fewer RocksDB writes than merges', async () => {
    const store = await open();
    const before = writeCalls(store);
    const keysBefore = store.stats().keysWritten;
    const one = encodeInt64(1);
    const merges: Promise<void>[] = [];
    for (let i = 0; i < 10_000; i++) merges.push(store.merge('counts', `k${i % 100}`, one));
    await Promise.all(merges);
    const writes = writeCalls(store) - before;
    for (let k = 0; k < 100; k++) assert.equal(decodeInt64((await store.get('counts', `k${k}`))!), 100n);
    assert.equal(store.stats().keysWritten - keysBefore, 10_000);
    assert.ok(writes < 1000, `10000 merges took ${writes} RocksDB writes`);
    await store.close();
  });

  it('keeps the order of writes issued in order, across groups', async () => {
    const store = await open();
    const done: Promise<void>[] = [];
    for (let i = 0; i < 2000; i++) {
      done.push(store.put('data', `k${i % 7}`, Buffer.from(String(i))));
      if (i % 3 === 0) done.push(store.delete('data', `k${(i + 1) % 7}`));
    }
    await Promise.all(done);
    // Replay the same sequence in a Map.
    const expected = new Map<string, string>();
    for (let i = 0; i < 2000; i++) {
      expected.set(`k${i % 7}`, String(i));
      if (i % 3 === 0) expected.delete(`k${(i + 1) % 7}`);
    }
    for (let k = 0; k < 7; k++) assert.equal((await store.get('data', `k${k}`))?.toString(), expected.get(`k${k}`));
    await store.close();
  });

  it('a write resolves only once readable; a bad write rejects alone', async () => {
    const store = await open();
    const first = store.put('data', 'a', Buffer.from('1'));
    const bad = store.put('data', 'b', 'not bytes' as unknown as Uint8Array);
    const badCf = store.merge('nope', 'c', encodeInt64(1));
    const good = store.put('data', 'd', Buffer.from('4'), { sync: true });
    await assert.rejects(bad, InvalidArgumentError);
    await assert.rejects(badCf, InvalidArgumentError);
    await Promise.all([first, good]);
    assert.equal((await store.get('data', 'a'))?.toString(), '1');
    assert.equal((await store.get('data', 'd'))?.toString(), '4');
    assert.equal(await store.get('data', 'b'), undefined);
    await store.close();
  });

  it('close() waits for writes still waiting for their group; later writes reject', async () => {
    const where = path.join(dir, `s${n++}`);
    const store = await Store.open({ path: where, columnFamilies: { data: {} } });
    const pending = Array.from({ length: 500 }, (_, i) => store.put('data', `k${i}`, Buffer.from(String(i))));
    const closing = store.close();
    await assert.rejects(store.put('data', 'late', Buffer.from('x')), StoreClosedError);
    await Promise.all(pending);
    await closing;
    const again = await Store.open({ path: where, columnFamilies: { data: {} } });
    let count = 0;
    for await (const _ of again.iterate('data')) count++;
    assert.equal(count, 500);
    await again.close();
  });
});

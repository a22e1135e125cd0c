import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { StoreClosedError } from '../src/errors.js';
import { decodeFloat64s, encodeFloat64s, float64Add } from '../src/operators/mergeOperators.js';
import { Store } from '../src/storage/index.js';

let dir: string;
let n = 0;
before(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'shardflow-snap-'));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

const columnFamilies = { pages: {}, ranks: { mergeOperator: float64Add() } };
const open = (p = path.join(dir, `s${n++}`)) => Store.open({ path: p, columnFamilies });

describe('snapshots', () => {
  it('read one consistent state across column families while writes go on', async () => {
    const store = await open();
    await store.write(store.batch().put('pages', 'u', Buffer.from('v1')).merge('ranks', 'u', encodeFloat64s(1)));
    const snap = store.snapshot();
    await store.write(store.batch().put('pages', 'u', Buffer.from('v2')).merge('ranks', 'u', encodeFloat64s(1)));
    await store.put('pages', 'new', Buffer.from('x'));
    await store.flush();
    await store.compactRange('ranks');

    assert.deepEqual(await store.get('pages', 'u', { snapshot: snap }), Buffer.from('v1'));
    assert.deepEqual([...decodeFloat64s((await store.get('ranks', 'u', { snapshot: snap }))!)], [1]);
    assert.deepEqual(await store.multiGet('pages', ['u', 'new'], { snapshot: snap }), [Buffer.from('v1'), undefined]);
    const keys: string[] = [];
    for await (const [k] of store.iterate('pages', { snapshot: snap })) keys.push(k.toString());
    assert.deepEqual(keys, ['u']);

    assert.deepEqual(await store.get('pages', 'u'), Buffer.from('v2'));
    assert.deepEqual([...decodeFloat64s((await store.get('ranks', 'u'))!)], [2]);
    snap.release();
    assert.equal(snap.released, true);
    await assert.rejects(store.get('pages', 'u', { snapshot: snap }), StoreClosedError);
    await store.close();
  });
});

describe('checkpoints', () => {
  it('copy the store at a point in time; the copy opens with its operators and diverges', async () => {
    const store = await open();
    for (let i = 0; i < 100; i++) await store.merge('ranks', `p${i}`, encodeFloat64s(i));
    await store.put('pages', 'a', Buffer.from('before'));
    const cpDir = path.join(dir, `checkpoint${n++}`);
    await store.checkpoint(cpDir);
    await store.put('pages', 'a', Buffer.from('after'));
    await store.merge('ranks', 'p1', encodeFloat64s(100));

    const copy = await open(cpDir);
    assert.deepEqual(await copy.get('pages', 'a'), Buffer.from('before'));
    assert.deepEqual([...decodeFloat64s((await copy.get('ranks', 'p1'))!)], [1]);
    await copy.merge('ranks', 'p1', encodeFloat64s(0.5));
    assert.deepEqual([...decodeFloat64s((await copy.get('ranks', 'p1'))!)], [1.5]);
    assert.deepEqual([...decodeFloat64s((await store.get('ranks', 'p1'))!)], [101]);
    await copy.close();
    await assert.rejects(store.checkpoint(cpDir), (e: Error & { code?: string }) => e.code === 'SF_ERR_INVALID_ARGUMENT' || e.code === 'SF_ERR_STORE_IO');
    await store.close();
  });
});

describe('properties and stats', () => {
  it('report sizes, memtable usage, compaction counters and merge faults', async () => {
    const store = await open();
    for (let i = 0; i < 500; i++) await store.put('pages', `k${i}`, Buffer.alloc(100, 1));
    await store.merge('ranks', 'bad', Buffer.alloc(3));
    assert.ok(await store.get('ranks', 'bad'));
    let s = store.stats();
    assert.ok(s.columnFamilies.pages!.memtableBytes > 0);
    assert.equal(s.keysWritten >= 501, true);
    assert.equal(s.mergeFaults, 1);
    assert.equal(s.columnFamilies.ranks!.mergeFaults, 1);
    assert.equal(s.writeStopped, 0);
    await store.flush();
    await store.compactRange('pages');
    s = store.stats();
    assert.ok(s.columnFamilies.pages!.liveSstBytes > 0);
    assert.ok(s.flushWriteBytes > 0);
    assert.ok(s.compactReadBytes > 0);
    assert.equal(s.columnFamilies.pages!.estimateNumKeys, 500);
    assert.ok(s.memoryBudgetBytes > 0);
    assert.equal(typeof s.stallMicros, 'number');
    assert.match(store.property('rocksdb.stats')!, /Compaction Stats/);
    assert.equal(store.property('rocksdb.estimate-num-keys', 'pages'), '500');
    await store.close();
  });
});

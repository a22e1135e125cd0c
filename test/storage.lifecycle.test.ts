import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { StoreBusyError, StoreClosedError } from '../src/errors.js';
import { encodeInt64, int64Add } from '../src/operators/mergeOperators.js';
import { Store } from '../src/storage/index.js';

let dir: string;
let n = 0;
before(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'shardflow-life-'));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

const where = () => path.join(dir, `s${n++}`);
const columnFamilies = { data: {}, counts: { mergeOperator: int64Add() } };

describe('Store lifecycle', () => {
  it('creates missing column families and lists them with "default"', async () => {
    const store = await Store.open({ path: where(), columnFamilies });
    assert.deepEqual(store.columnFamilies.sort(), ['counts', 'data', 'default']);
    await store.close();
  });

  it('close() is safe twice; later calls fail with StoreClosedError', async () => {
    const store = await Store.open({ path: where(), columnFamilies });
    await store.put('data', 'k', Buffer.from('v'));
    const first = store.close();
    const second = store.close();
    await Promise.all([first, second]);
    await store.close();
    assert.equal(store.closed, true);
    await assert.rejects(store.get('data', 'k'), StoreClosedError);
    await assert.rejects(store.put('data', 'k', Buffer.from('v')), { code: 'SF_ERR_STORE_CLOSED' });
    await assert.rejects(store.flush(), StoreClosedError);
    assert.throws(() => store.snapshot(), StoreClosedError);
    assert.throws(() => store.batch(), StoreClosedError);
    assert.throws(() => store.stats(), StoreClosedError);
    await assert.rejects(async () => {
      for await (const _ of store.iterate('data')) assert.fail('iterated a closed store');
    }, StoreClosedError);
  });

  it('close() waits for in-flight writes, which all land', async () => {
    const path_ = where();
    const store = await Store.open({ path: path_, columnFamilies });
    const writes = Array.from({ length: 200 }, (_, i) => store.merge('counts', 'n', encodeInt64(1)).then(() => i));
    const closed = store.close();
    const settled = await Promise.allSettled(writes);
    await closed;
    assert.ok(settled.every((s) => s.status === 'fulfilled'));
    const again = await Store.open({ path: path_, columnFamilies });
    assert.equal((await again.get('counts', 'n'))!.readBigInt64LE(), 200n);
    await again.close();
  });

  it('an open iterator does not block close(); using it afterwards fails', async () => {
    const store = await Store.open({ path: where(), columnFamilies });
    for (let i = 0; i < 10; i++) await store.put('data', `k${i}`, Buffer.from('v'));
    const it = store.chunks('data', { chunkSize: 2 })[Symbol.asyncIterator]();
    assert.equal((await it.next()).done, false);
    const snap = store.snapshot();
    await store.close();
    await assert.rejects(it.next(), StoreClosedError);
    snap.release();
    snap.release();
  });

  it('a second handle on the same path fails with StoreBusyError', async () => {
    const p = where();
    const store = await Store.open({ path: p, columnFamilies });
    await assert.rejects(Store.open({ path: p, columnFamilies }), StoreBusyError);
    await store.close();
  });

  it('createIfMissing: false fails on a missing store', async () => {
    await assert.rejects(Store.open({ path: where(), columnFamilies, createIfMissing: false }), (e: Error & { code?: string }) =>
      e.code === 'SF_ERR_INVALID_ARGUMENT' || e.code === 'SF_ERR_STORE_IO',
    );
  });

  it('rejects undeclared column families', async () => {
    const store = await Store.open({ path: where(), columnFamilies });
    await assert.rejects(store.get('nope', 'k'), { code: 'SF_ERR_INVALID_ARGUMENT' });
    assert.throws(() => store.property('rocksdb.estimate-num-keys', 'nope'), { code: 'SF_ERR_INVALID_ARGUMENT' });
    assert.equal(store.property('rocksdb.no-such-property'), undefined);
    assert.match(store.property('rocksdb.estimate-num-keys', 'data')!, /^\d+$/);
    await store.close();
  });
});

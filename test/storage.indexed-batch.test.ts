import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { decodeInt64, decodeSet, encodeInt64, encodeSetOps, int64Add, set } from '../src/operators/mergeOperators.js';
import { Store, type IndexedWriteBatch, type IterateOptions } from '../src/storage/index.js';

let dir: string;
let n = 0;
before(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'shardflow-indexed-'));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

function openStore(): Promise<Store> {
  return Store.open({
    path: path.join(dir, `s${n++}`),
    columnFamilies: { plain: {}, counts: { mergeOperator: int64Add() }, sets: { mergeOperator: set() } },
  });
}

const b = (s: string) => Buffer.from(s);
const str = (v: Buffer | undefined) => v?.toString();

async function entries(batch: IndexedWriteBatch, cf: string, opts?: IterateOptions): Promise<[string, string][]> {
  const out: [string, string][] = [];
  for await (const [k, v] of batch.iterate(cf, opts)) out.push([k.toString(), v.toString()]);
  return out;
}

describe('IndexedWriteBatch: get', () => {
  it('reads its own puts and deletes on top of the store, and the store where it has none', async () => {
    const store = await openStore();
    await store.write(store.batch().put('plain', 'kept', b('db')).put('plain', 'deleted', b('db')).put('plain', 'replaced', b('db')));
    const batch = store.indexedBatch();
    batch.put('plain', 'new', b('batch')).delete('plain', 'deleted').put('plain', 'replaced', b('batch'));
    batch.put('plain', 'twice', b('1')).delete('plain', 'twice').put('plain', 'twice', b('3'));
    assert.equal(str(await batch.get('plain', 'kept')), 'db');
    assert.equal(str(await batch.get('plain', 'new')), 'batch');
    assert.equal(await batch.get('plain', 'deleted'), undefined);
    assert.equal(str(await batch.get('plain', 'replaced')), 'batch');
    assert.equal(str(await batch.get('plain', 'twice')), '3');
    assert.equal(await batch.get('plain', 'absent'), undefined);
    // Nothing is in the store until the batch is written; then everything is, and the batch is empty.
    assert.equal(await store.get('plain', 'new'), undefined);
    await store.write(batch);
    assert.equal(batch.length, 0);
    assert.equal(str(await store.get('plain', 'new')), 'batch');
    assert.equal(await store.get('plain', 'deleted'), undefined);
    assert.equal(str(await batch.get('plain', 'new')), 'batch'); // now from the store
    await store.close();
  });

  it('resolves merges with the column family merge operator, over the store value, a batch put or a batch delete', async () => {
    const store = await openStore();
    await store.write(store.batch().merge('counts', 'c', encodeInt64(10)).put('sets', 's', encodeSetOps({ add: ['a', 'b'] })));
    const batch = store.indexedBatch();
    batch.merge('counts', 'c', encodeInt64(5)).merge('counts', 'c', encodeInt64(1));
    assert.equal(decodeInt64((await batch.get('counts', 'c'))!), 16n);
    batch.put('counts', 'p', encodeInt64(100)).merge('counts', 'p', encodeInt64(1));
    assert.equal(decodeInt64((await batch.get('counts', 'p'))!), 101n);
    batch.delete('counts', 'c').merge('counts', 'c', encodeInt64(2));
    assert.equal(decodeInt64((await batch.get('counts', 'c'))!), 2n);
    // The set operator is not commutative: the batch's operands apply in the order recorded.
    batch.merge('sets', 's', encodeSetOps({ remove: ['a'] })).merge('sets', 's', encodeSetOps({ add: ['a', 'c'] })).merge('sets', 's', encodeSetOps({ remove: ['b'] }));
    assert.deepEqual(decodeSet((await batch.get('sets', 's'))!).map(String), ['a', 'c']);
    await store.write(batch);
    assert.deepEqual(decodeSet((await store.get('sets', 's'))!).map(String), ['a', 'c']);
    assert.equal(decodeInt64((await store.get('counts', 'c'))!), 2n);
    await store.close();
  });

  it('reads the store at a snapshot, with the batch on top', async () => {
    const store = await openStore();
    await store.put('plain', 'a', b('old'));
    const snap = store.snapshot();
    await store.put('plain', 'a', b('new'));
    await store.put('plain', 'b', b('new'));
    const batch = store.indexedBatch().put('plain', 'c', b('batch'));
    assert.equal(str(await batch.get('plain', 'a', { snapshot: snap })), 'old');
    assert.equal(await batch.get('plain', 'b', { snapshot: snap }), undefined);
    assert.equal(str(await batch.get('plain', 'c', { snapshot: snap })), 'batch');
    assert.deepEqual(await entries(batch, 'plain', { snapshot: snap }), [['a', 'old'], ['c', 'batch']]);
    snap.release();
    await assert.rejects(batch.get('plain', 'a', { snapshot: snap }), { code: 'SF_ERR_STORE_CLOSED' });
    await store.close();
  });

  it('rejects an undeclared column family, and every read after the store closed', async () => {
    const store = await openStore();
    const batch = store.indexedBatch().put('plain', 'a', b('1'));
    await assert.rejects(batch.get('nope', 'a'), { code: 'SF_ERR_INVALID_ARGUMENT', message: /unknown column family "nope"/ });
    await assert.rejects(entries(batch, 'nope'), { code: 'SF_ERR_INVALID_ARGUMENT' });
    await store.close();
    await assert.rejects(batch.get('plain', 'a'), { code: 'SF_ERR_STORE_CLOSED' });
    await assert.rejects(entries(batch, 'plain'), { code: 'SF_ERR_STORE_CLOSED' });
  });
});

describe('IndexedWriteBatch: iterate', () => {
  it('merges the batch into the store in key order, both ways, within the bounds only', async () => {
    const store = await openStore();
    await store.write(store.batch().put('plain', 'b', b('db')).put('plain', 'd', b('db')).put('plain', 'f', b('db')).put('plain', 'h', b('db')));
    await store.flush(); // the store side comes from an SST file, and the memtable below
    await store.put('plain', 'g', b('db'));
    const batch = store.indexedBatch();
    // Batch keys below and above every bound: RocksDB 7.8's base-delta iterator would show them.
    batch.put('plain', 'a', b('batch')).put('plain', 'c', b('batch')).delete('plain', 'd').put('plain', 'f', b('batch')).put('plain', 'z', b('batch'));
    const all = [['a', 'batch'], ['b', 'db'], ['c', 'batch'], ['f', 'batch'], ['g', 'db'], ['h', 'db'], ['z', 'batch']];
    assert.deepEqual(await entries(batch, 'plain'), all);
    assert.deepEqual(await entries(batch, 'plain', { reverse: true }), [...all].reverse());
    assert.deepEqual(await entries(batch, 'plain', { gte: 'b', lt: 'g' }), [['b', 'db'], ['c', 'batch'], ['f', 'batch']]);
    assert.deepEqual(await entries(batch, 'plain', { gt: 'b', lte: 'g', reverse: true }), [['g', 'db'], ['f', 'batch'], ['c', 'batch']]);
    assert.deepEqual(await entries(batch, 'plain', { gte: 'c', lt: 'f', reverse: true }), [['c', 'batch']]);
    assert.deepEqual(await entries(batch, 'plain', { prefix: 'z' }), [['z', 'batch']]);
    assert.deepEqual(await entries(batch, 'plain', { lt: 'a' }), []);
    const keys: string[] = [];
    for await (const c of batch.chunks('plain', { keysOnly: true, chunkSize: 2 })) {
      assert.equal(c.values.length, 0);
      keys.push(...c.keys.map(String));
    }
    assert.deepEqual(keys, all.map(([k]) => k));
    await store.close();
  });

  it('resolves merge operands of the batch in both directions', async () => {
    const store = await openStore();
    await store.write(store.batch().merge('counts', 'a', encodeInt64(1)).merge('counts', 'c', encodeInt64(3)).put('sets', 's', encodeSetOps({ add: ['x'] })));
    const batch = store.indexedBatch();
    batch.merge('counts', 'a', encodeInt64(10)).merge('counts', 'b', encodeInt64(20)).put('counts', 'c', encodeInt64(30)).merge('counts', 'c', encodeInt64(5));
    batch.delete('counts', 'd').merge('counts', 'd', encodeInt64(7));
    batch.merge('sets', 's', encodeSetOps({ remove: ['x'] })).merge('sets', 's', encodeSetOps({ add: ['y'] }));
    const counts = async (opts?: IterateOptions) => {
      const out: [string, bigint][] = [];
      for await (const [k, v] of batch.iterate('counts', opts)) out.push([k.toString(), decodeInt64(v)]);
      return out;
    };
    const want: [string, bigint][] = [['a', 11n], ['b', 20n], ['c', 35n], ['d', 7n]];
    assert.deepEqual(await counts(), want);
    assert.deepEqual(await counts({ reverse: true }), [...want].reverse());
    for await (const [k, v] of batch.iterate('sets')) assert.deepEqual([k.toString(), decodeSet(v).map(String)], ['s', ['y']]);
    await store.close();
  });

  it('sees the batch as it was at its first step, whatever is written while it runs and whatever the chunk size', async () => {
    for (const chunkSize of [1, 2, 1000]) {
      const store = await openStore();
      await store.write(store.batch().put('plain', 'k1', b('db')).put('plain', 'k3', b('db')).put('plain', 'k5', b('db')));
      const batch = store.indexedBatch().put('plain', 'k2', b('batch')).put('plain', 'k4', b('batch'));
      const seen: string[] = [];
      for await (const [k, v] of batch.iterate('plain', { chunkSize })) {
        seen.push(`${k}=${v}`);
        // Read-then-write: replace the entry, delete one not reached yet, add one ahead.
        batch.put('plain', k, b(`${v}+`)).delete('plain', 'k4').put('plain', `${k}a`, b('added'));
      }
      assert.deepEqual(seen, ['k1=db', 'k2=batch', 'k3=db', 'k4=batch', 'k5=db'], `chunkSize ${chunkSize}`);
      assert.deepEqual(await entries(batch, 'plain'), [
        ['k1', 'db+'], ['k1a', 'added'], ['k2', 'batch+'], ['k2a', 'added'], ['k3', 'db+'], ['k3a', 'added'], ['k4a', 'added'], ['k5', 'db+'], ['k5a', 'added'],
      ]);
      await store.close();
    }
  });

  it('refuses changes while a read is in flight, and takes them once it settled', async () => {
    const store = await openStore();
    const batch = store.indexedBatch().put('plain', 'a', b('1'));
    const read = batch.get('plain', 'a');
    assert.throws(() => batch.put('plain', 'b', b('2')), { code: 'SF_ERR_STORE_BUSY', message: /being read \(1 reads in flight\)/ });
    assert.throws(() => batch.mergeMany('counts', ['x'], [encodeInt64(1)]), { code: 'SF_ERR_STORE_BUSY' });
    assert.throws(() => batch.clear(), { code: 'SF_ERR_STORE_BUSY' });
    await assert.rejects(store.write(batch), { code: 'SF_ERR_STORE_BUSY' });
    assert.equal(str(await read), '1');
    assert.equal(batch.length, 1, 'nothing was taken or recorded');
    const it = batch.iterate('plain', { chunkSize: 1 });
    const first = it.next(); // a chunk in flight
    assert.throws(() => batch.delete('plain', 'a'), { code: 'SF_ERR_STORE_BUSY' });
    assert.deepEqual((await first).value?.map(String), ['a', '1']);
    batch.delete('plain', 'a');
    assert.equal((await it.next()).done, true);
    await store.write(batch);
    assert.equal(await store.get('plain', 'a'), undefined);
    await store.close();
  });

  it('takes no range deletes', async () => {
    const store = await openStore();
    const batch = store.indexedBatch();
    assert.throws(() => batch.deleteRange('plain', 'a', 'z'), { code: 'SF_ERR_INVALID_ARGUMENT', message: /no range deletes/ });
    await store.close();
  });
});

describe('save points', () => {
  it('take back what was recorded since, on an indexed batch (its reads too) and a plain one', async () => {
    const store = await openStore();
    await store.put('plain', 'a', b('db'));
    const batch = store.indexedBatch().put('plain', 'b', b('kept'));
    batch.setSavePoint().put('plain', 'a', b('dropped')).delete('plain', 'b').merge('counts', 'c', encodeInt64(1));
    batch.setSavePoint().put('plain', 'inner', b('x'));
    batch.rollbackToSavePoint();
    assert.equal(await batch.get('plain', 'inner'), undefined);
    assert.equal(str(await batch.get('plain', 'a')), 'dropped');
    batch.rollbackToSavePoint();
    assert.equal(str(await batch.get('plain', 'a')), 'db');
    assert.equal(str(await batch.get('plain', 'b')), 'kept');
    assert.equal(await batch.get('counts', 'c'), undefined);
    assert.deepEqual(await entries(batch, 'plain'), [['a', 'db'], ['b', 'kept']]);
    assert.throws(() => batch.rollbackToSavePoint(), { code: 'SF_ERR_INVALID_ARGUMENT', message: /no save point/ });
    assert.throws(() => batch.popSavePoint(), { code: 'SF_ERR_INVALID_ARGUMENT' });
    batch.setSavePoint().put('plain', 'c', b('popped, kept')).popSavePoint();
    assert.equal(batch.length, 2);
    await store.write(batch);
    const stored: string[] = [];
    for await (const [k, v] of store.iterate('plain')) stored.push(`${k}=${v}`);
    assert.deepEqual(stored, ['a=db', 'b=kept', 'c=popped, kept']);

    const plain = store.batch().put('plain', 'd', b('kept')).setSavePoint().put('plain', 'e', b('dropped')).rollbackToSavePoint();
    assert.equal(plain.length, 1);
    await store.write(plain);
    assert.equal(await store.get('plain', 'e'), undefined);
    assert.equal(str(await store.get('plain', 'd')), 'kept');
    await store.close();
  });
});

describe('IndexedWriteBatch against a model', () => {
  it('agrees with a map of what was committed and recorded, for random puts, deletes, merges and save points', async () => {
    let seed = 0x5eed;
    const rand = (k: number) => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return (seed >>> 8) % k;
    };
    const key = () => `k${String(rand(40)).padStart(2, '0')}`;
    type Model = Map<string, Set<string>>;
    const apply = (m: Model, op: Op) => {
      if (op.kind === 'put') m.set(op.key, new Set(op.members));
      else if (op.kind === 'delete') m.delete(op.key);
      else {
        const s = new Set(m.get(op.key) ?? []);
        for (const x of op.add) s.add(x);
        for (const x of op.remove) s.delete(x);
        m.set(op.key, s);
      }
    };
    type Op = { kind: 'put'; key: string; members: string[] } | { kind: 'delete'; key: string } | { kind: 'merge'; key: string; add: string[]; remove: string[] };
    const members = () => Array.from({ length: rand(3) }, () => `m${rand(5)}`);
    const randomOp = (): Op => {
      const r = rand(10);
      if (r < 3) return { kind: 'put', key: key(), members: [...new Set(members())].sort() };
      if (r < 5) return { kind: 'delete', key: key() };
      return { kind: 'merge', key: key(), add: members(), remove: members() };
    };
    const record = (batch: { put: Function; delete: Function; merge: Function }, op: Op) => {
      if (op.kind === 'put') batch.put('sets', op.key, encodeSetOps({ add: op.members }));
      else if (op.kind === 'delete') batch.delete('sets', op.key);
      else batch.merge('sets', op.key, encodeSetOps({ add: op.add, remove: op.remove }));
    };
    const show = (v: Buffer) => decodeSet(v).map(String).sort().join(',');

    const store = await openStore();
    const model: Model = new Map();
    for (let round = 0; round < 3; round++) {
      const committed = store.batch();
      for (let i = 0; i < 60; i++) {
        const op = randomOp();
        record(committed, op);
        apply(model, op);
      }
      await store.write(committed);
      if (round === 1) await store.flush();
    }
    const batch = store.indexedBatch();
    const saved: Model[] = [];
    let checks = 0;
    for (let step = 0; step < 400; step++) {
      const r = rand(40);
      if (r === 0) {
        batch.setSavePoint();
        saved.push(new Map([...model].map(([k, v]) => [k, new Set(v)])));
      } else if (r === 1 && saved.length > 0) {
        batch.rollbackToSavePoint();
        const back = saved.pop()!;
        model.clear();
        for (const [k, v] of back) model.set(k, v);
      } else if (r < 6) {
        const k = key();
        const v = await batch.get('sets', k);
        const want = model.get(k);
        assert.equal(v === undefined ? undefined : show(v), want === undefined ? undefined : [...want].sort().join(','), `get ${k} at step ${step}`);
        checks++;
      } else if (r < 8) {
        const [x, y] = [key(), key()].sort();
        const reverse = rand(2) === 1;
        const got: string[] = [];
        for await (const [k, v] of batch.iterate('sets', { gte: x, lte: y, reverse, chunkSize: 1 + rand(7) })) got.push(`${k}=${show(v)}`);
        const want = [...model.keys()]
          .filter((k) => k >= x! && k <= y!)
          .sort()
          .map((k) => `${k}=${[...model.get(k)!].sort().join(',')}`);
        assert.deepEqual(got, reverse ? want.reverse() : want, `iterate [${x}, ${y}] reverse ${reverse} at step ${step}`);
        checks++;
      } else {
        const op = randomOp();
        record(batch, op);
        apply(model, op);
      }
    }
    assert.ok(checks > 50);
    await store.write(batch);
    const stored: string[] = [];
    for await (const [k, v] of store.iterate('sets')) stored.push(`${k}=${show(v)}`);
    assert.deepEqual(stored, [...model.keys()].sort().map((k) => `${k}=${[...model.get(k)!].sort().join(',')}`));
    await store.close();
  });
});

import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { UnknownMergeOperatorError } from '../src/errors.js';
import {
  decodeFloat64s,
  decodeInt64,
  decodeLww,
  decodeRecord,
  decodeSet,
  encodeFloat64s,
  encodeInt64,
  encodeLww,
  encodeRecord,
  encodeSetOps,
  float64Add,
  int64Add,
  lastWriteWins,
  lwwTombstone,
  max,
  min,
  record,
  recordSetOps,
  set,
} from '../src/operators/mergeOperators.js';
import { Store } from '../src/storage/index.js';
import { nativeAddon } from '../src/storage/native.js';

let dir: string;
before(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'shardflow-merge-'));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function openStore(name: string): Promise<Store> {
  return Store.open({
    path: path.join(dir, name),
    columnFamilies: {
      counts: { mergeOperator: int64Add() },
      ranks: { mergeOperator: float64Add() },
      highs: { mergeOperator: max() },
      lows: { mergeOperator: min() },
      latest: { mergeOperator: lastWriteWins() },
      members: { mergeOperator: set() },
      pages: { mergeOperator: record({ lastSeen: 'max', fetchCount: 'sum', firstSeen: 'min', tags: 'set' }) },
    },
  });
}

/** Reads `key` now, after flush and after a full compaction; all three must agree. */
async function stableRead(store: Store, cf: string, key: string): Promise<Buffer | undefined> {
  const before = await store.get(cf, key);
  await store.flush();
  const flushed = await store.get(cf, key);
  await store.compactRange(cf);
  const compacted = await store.get(cf, key);
  assert.deepEqual(flushed, before, 'value changed by flush');
  assert.deepEqual(compacted, before, 'value changed by compaction');
  return compacted;
}

describe('int64Add', () => {
  it('adds operands, negative ones included, on top of a put, stable across flush and compaction', async () => {
    const store = await openStore('int64');
    await store.merge('counts', 'a', encodeInt64(5));
    await store.merge('counts', 'a', encodeInt64(-7));
    await store.flush(); // operands split across an SST and the memtable
    await store.merge('counts', 'a', encodeInt64(10n));
    await store.put('counts', 'b', encodeInt64(100));
    await store.merge('counts', 'b', encodeInt64(1));
    assert.equal(decodeInt64((await stableRead(store, 'counts', 'a'))!), 8n);
    assert.equal(decodeInt64((await stableRead(store, 'counts', 'b'))!), 101n);
    assert.equal(await store.get('counts', 'never'), undefined);
    await store.close();
  });

  it('skips a malformed operand, keeps the last good value and counts the fault', async () => {
    const store = await openStore('int64-bad');
    await store.merge('counts', 'k', encodeInt64(3));
    await store.merge('counts', 'k', Buffer.from('xyz'));
    await store.merge('counts', 'k', encodeInt64(4));
    assert.equal(decodeInt64((await store.get('counts', 'k'))!), 7n);
    assert.ok(store.stats().columnFamilies.counts!.mergeFaults >= 1);
    assert.equal(decodeInt64((await stableRead(store, 'counts', 'k'))!), 7n);
    assert.ok(store.stats().mergeFaults >= 1);
    await store.close();
  });

  it('survives reopening with the same operator', async () => {
    const store = await openStore('int64-reopen');
    for (let i = 0; i < 100; i++) await store.merge('counts', 'n', encodeInt64(1));
    await store.close();
    const again = await openStore('int64-reopen');
    assert.equal(decodeInt64((await again.get('counts', 'n'))!), 100n);
    await again.close();
  });
});

describe('float64Add', () => {
  it('adds element-wise; shorter operands add to the first elements; the longest length wins', async () => {
    const store = await openStore('float64');
    await store.merge('ranks', 'p', encodeFloat64s(0.15));
    await store.merge('ranks', 'p', encodeFloat64s(0, 0.25));
    await store.flush();
    await store.merge('ranks', 'p', encodeFloat64s(1, 2, 3));
    const v = decodeFloat64s((await stableRead(store, 'ranks', 'p'))!);
    assert.deepEqual([...v], [1.15, 2.25, 3]);
    await store.close();
  });

  it('implements the push form of the rank update: [x, r] + [r, -r] moves the residual into the rank', async () => {
    const store = await openStore('float64-push');
    await store.merge('ranks', 'u', encodeFloat64s(0, 0.15)); // new page: r += 1 - d
    await store.merge('ranks', 'u', encodeFloat64s(0, 0.5)); // a contribution
    const [x, r] = decodeFloat64s((await store.get('ranks', 'u'))!);
    await store.merge('ranks', 'u', encodeFloat64s(r!, -r!)); // push
    const after = decodeFloat64s((await stableRead(store, 'ranks', 'u'))!);
    assert.equal(after[0], x! + r!);
    assert.equal(after[1], 0);
    await store.close();
  });

  it('sums bit for bit as the pairwise fold it replaced, full and partial, malformed operands included', () => {
    // The model: RocksDB's AssociativeMergeOperator folds left to right, Merge(acc, operand)
    // at each step (a malformed acc is a fault and missing; a malformed operand a fault and
    // skipped, [0] when nothing came before). Non-integer values, so the order of the
    // additions shows in the bits.
    const { evaluateMerge } = nativeAddon();
    const wellFormed = (b: Buffer | undefined) => b !== undefined && b.length >= 8 && b.length % 8 === 0;
    const model = (base: Buffer | undefined, ops: Buffer[]) => {
      let faults = 0;
      let acc: number[] | undefined;
      if (base !== undefined) {
        if (wellFormed(base)) acc = [...decodeFloat64s(base)];
        else faults++;
      }
      for (const op of ops) {
        if (!wellFormed(op)) {
          faults++;
          acc ??= [0];
          continue;
        }
        const v = [...decodeFloat64s(op)];
        if (acc === undefined) acc = v;
        else acc = Array.from({ length: Math.max(acc.length, v.length) }, (_, i) => (i < acc!.length && i < v.length ? acc![i]! + v[i]! : i < acc!.length ? acc![i]! : v[i]!));
      }
      return { value: acc, faults };
    };
    let seed = 7;
    const random = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32);
    const operand = () => (random() < 0.08 ? Buffer.alloc(Math.floor(random() * 3) * 5) : encodeFloat64s(...Array.from({ length: 1 + Math.floor(random() * 3) }, () => (random() - 0.5) * 10 ** Math.floor(random() * 12 - 6))));
    for (let round = 0; round < 500; round++) {
      const ops = Array.from({ length: 2 + Math.floor(random() * 10) }, operand);
      const base = random() < 0.5 ? operand() : undefined;
      const full = evaluateMerge(float64Add(), base, ops, 'full');
      const want = model(base, ops);
      assert.deepEqual(full.value, encodeFloat64s(...want.value!), `full, round ${round}`);
      assert.equal(full.faults, want.faults, `full faults, round ${round}`);
      // A partial merge takes the first operand as the left side (RocksDB's PartialMergeMulti).
      const partial = evaluateMerge(float64Add(), undefined, ops, 'partial');
      const wantPartial = model(ops[0], ops.slice(1));
      assert.deepEqual(partial.value, encodeFloat64s(...wantPartial.value!), `partial, round ${round}`);
      assert.equal(partial.faults, wantPartial.faults, `partial faults, round ${round}`);
    }
  });

  it('skips operands whose length is not a multiple of 8', async () => {
    const store = await openStore('float64-bad');
    await store.merge('ranks', 'p', encodeFloat64s(1, 1));
    await store.merge('ranks', 'p', Buffer.alloc(5));
    await store.merge('ranks', 'p', Buffer.alloc(0));
    await store.merge('ranks', 'p', encodeFloat64s(2));
    assert.deepEqual([...decodeFloat64s((await stableRead(store, 'ranks', 'p'))!)], [3, 1]);
    assert.ok(store.stats().columnFamilies.ranks!.mergeFaults >= 2);
    await store.close();
  });
});

describe('max / min', () => {
  it('keep the largest / smallest float64', async () => {
    const store = await openStore('extremum');
    for (const x of [3, -1, 7.5, 2]) {
      await store.merge('highs', 'k', encodeFloat64s(x));
      await store.merge('lows', 'k', encodeFloat64s(x));
      await store.flush();
    }
    await store.merge('highs', 'k', Buffer.alloc(3));
    assert.deepEqual([...decodeFloat64s((await stableRead(store, 'highs', 'k'))!)], [7.5]);
    assert.deepEqual([...decodeFloat64s((await stableRead(store, 'lows', 'k'))!)], [-1]);
    assert.equal(store.stats().columnFamilies.highs!.mergeFaults > 0, true);
    await store.close();
  });
});

describe('lastWriteWins', () => {
  it('keeps the largest timestamp; a tie goes to the later write; tombstones are values', async () => {
    const store = await openStore('lww');
    await store.merge('latest', 'a', encodeLww(10, Buffer.from('ten')));
    await store.merge('latest', 'a', encodeLww(5, Buffer.from('five (late, older)')));
    await store.flush();
    await store.merge('latest', 'a', encodeLww(10, Buffer.from('ten again')));
    const a = decodeLww((await stableRead(store, 'latest', 'a'))!);
    assert.equal(a.timestampMs, 10n);
    assert.equal(a.payload.toString(), 'ten again');
    await store.put('latest', 'b', encodeLww(1, Buffer.from('put')));
    await store.merge('latest', 'b', lwwTombstone(2));
    const b = decodeLww((await stableRead(store, 'latest', 'b'))!);
    assert.equal(b.tombstone, true);
    assert.equal(b.timestampMs, 2n);
    await store.close();
  });
});

describe('set', () => {
  it('adds and removes members in write order; the value lists members sorted', async () => {
    const store = await openStore('set');
    await store.merge('members', 's', encodeSetOps({ add: ['b', 'a', 'c'] }));
    await store.flush();
    await store.merge('members', 's', encodeSetOps({ remove: ['b'] }));
    await store.merge('members', 's', encodeSetOps({ add: ['d', 'b'], remove: ['a'] }));
    await store.merge('members', 's', Buffer.from([9, 9, 9])); // malformed: skipped
    const members = decodeSet((await stableRead(store, 'members', 's'))!).map(String);
    assert.deepEqual(members, ['b', 'c', 'd']);
    assert.ok(store.stats().columnFamilies.members!.mergeFaults >= 1);
    await store.close();
  });
});

describe('record', () => {
  it('merges field by field: max, sum, min, set, and last write for the rest', async () => {
    const store = await openStore('record');
    await store.put('pages', 'u', encodeRecord({ status: 200, lastSeen: 100, fetchCount: 1, firstSeen: 100, tags: ['x'] }));
    await store.flush();
    await store.merge('pages', 'u', encodeRecord({ lastSeen: 50, fetchCount: 2, firstSeen: 40, status: 301 }));
    await store.merge('pages', 'u', encodeRecord({ lastSeen: 300, fetchCount: 0.5, tags: ['y', 'z'] }));
    await store.flush();
    await store.merge('pages', 'u', encodeRecord({ tags: recordSetOps({ add: ['w'], remove: ['x', 'z'] }), contentHash: 'abc' }));
    await store.merge('pages', 'u', encodeRecord({ fetchCount: 'not a number' })); // field skipped
    const v = decodeRecord((await stableRead(store, 'pages', 'u'))!);
    assert.deepEqual(v, { status: 301, lastSeen: 300, fetchCount: 3.5, firstSeen: 40, tags: ['w', 'y'], contentHash: 'abc' });
    assert.ok(store.stats().columnFamilies.pages!.mergeFaults >= 1);
    await store.merge('pages', 'u', Buffer.from('not msgpack at all \xc1'));
    assert.deepEqual(decodeRecord((await store.get('pages', 'u'))!), v);
    await store.close();
  });

  it('builds a record from merges alone', async () => {
    const store = await openStore('record-new');
    await store.merge('pages', 'n', encodeRecord({ fetchCount: 1, tags: ['a'] }));
    await store.merge('pages', 'n', encodeRecord({ fetchCount: 1, tags: { add: [], remove: ['a'] } }));
    assert.deepEqual(decodeRecord((await stableRead(store, 'pages', 'n'))!), { fetchCount: 2, tags: [] });
    await store.close();
  });
});

describe('operator declaration', () => {
  it('fails to open with an unknown operator name, before creating anything', async () => {
    const where = path.join(dir, 'unknown');
    await assert.rejects(
      Store.open({ path: where, columnFamilies: { x: { mergeOperator: { name: 'shardflow.nope.v1' } } } }),
      (err: unknown) => err instanceof UnknownMergeOperatorError && err.code === 'SF_ERR_STORE_UNKNOWN_MERGE_OPERATOR',
    );
    const { existsSync } = await import('node:fs');
    assert.equal(existsSync(where), false);
  });

  it('fails to reopen a column family with another operator', async () => {
    const where = path.join(dir, 'mismatch');
    const store = await Store.open({ path: where, columnFamilies: { c: { mergeOperator: int64Add() } } });
    await store.merge('c', 'k', encodeInt64(1));
    await store.close();
    await assert.rejects(
      Store.open({ path: where, columnFamilies: { c: { mergeOperator: float64Add() } } }),
      { code: 'SF_ERR_STORE_MERGE_OPERATOR_MISMATCH' },
    );
    const again = await Store.open({ path: where, columnFamilies: { c: { mergeOperator: int64Add() } } });
    assert.equal(decodeInt64((await again.get('c', 'k'))!), 1n);
    await again.close();
  });
});

describe('encode helpers', () => {
  it('round-trip int64 and float64 vectors and reject bad input', () => {
    assert.equal(decodeInt64(encodeInt64(-(2n ** 63n))), -(2n ** 63n));
    assert.equal(decodeInt64(encodeInt64(42)), 42n);
    assert.throws(() => encodeInt64(2n ** 63n), RangeError);
    assert.throws(() => encodeInt64(0.5), RangeError);
    assert.throws(() => decodeInt64(Buffer.alloc(7)), RangeError);
    assert.deepEqual([...decodeFloat64s(encodeFloat64s(1.5, -2))], [1.5, -2]);
    assert.deepEqual([...decodeFloat64s(encodeFloat64s(3).subarray(0, 8))], [3]);
    assert.throws(() => decodeFloat64s(Buffer.alloc(9)), RangeError);
  });
});

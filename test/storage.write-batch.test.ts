import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { decodeFloat64s, decodeInt64, encodeFloat64s, encodeInt64, float64Add, int64Add } from '../src/operators/mergeOperators.js';
import { Store } from '../src/storage/index.js';

let dir: string;
let n = 0;
before(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'shardflow-batch-'));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

function openStore(): Promise<Store> {
  return Store.open({
    path: path.join(dir, `s${n++}`),
    columnFamilies: { pages: {}, counts: { mergeOperator: int64Add() }, meta: {} },
  });
}

describe('WriteBatch', () => {
  it('applies puts, merges, deletes and range deletes across column families in one write', async () => {
    const store = await openStore();
    await store.put('pages', 'gone', Buffer.from('x'));
    for (const k of ['r1', 'r2', 'r3']) await store.put('pages', k, Buffer.from(k));
    const batch = store
      .batch()
      .put('pages', 'a', Buffer.from('A'))
      .merge('counts', 'a', encodeInt64(2))
      .merge('counts', 'a', encodeInt64(3))
      .delete('pages', 'gone')
      .deleteRange('pages', 'r1', 'r3')
      .put('meta', 'applied/p1', encodeInt64(7));
    assert.equal(batch.length, 6);
    assert.ok(batch.byteLength > 0);
    await store.write(batch, { sync: true });
    assert.deepEqual(await store.get('pages', 'a'), Buffer.from('A'));
    assert.equal(decodeInt64((await store.get('counts', 'a'))!), 5n);
    assert.equal(await store.get('pages', 'gone'), undefined);
    assert.equal(await store.get('pages', 'r1'), undefined);
    assert.equal(await store.get('pages', 'r2'), undefined);
    assert.deepEqual(await store.get('pages', 'r3'), Buffer.from('r3'));
    assert.equal(decodeInt64((await store.get('meta', 'applied/p1'))!), 7n);
    await store.close();
  });

  it('is atomic: a reader never sees part of a batch', async () => {
    const store = await openStore();
    const keys = Array.from({ length: 50 }, (_, i) => `k${String(i).padStart(2, '0')}`);
    let writing = true;
    const seen: number[] = [];
    const reader = (async () => {
      while (writing) {
        const snap = store.snapshot();
        const values = await store.multiGet('counts', keys, { snapshot: snap });
        snap.release();
        const distinct = new Set(values.map((v) => (v === undefined ? 0n : decodeInt64(v))));
        seen.push(distinct.size);
      }
    })();
    for (let round = 0; round < 50; round++) {
      const batch = store.batch();
      for (const k of keys) batch.merge('counts', k, encodeInt64(1));
      await store.write(batch);
    }
    writing = false;
    await reader;
    assert.ok(seen.length > 0);
    assert.ok(seen.every((d) => d === 1), `a snapshot saw ${Math.max(...seen)} different counts`);
    const final = await store.multiGet('counts', keys);
    assert.ok(final.every((v) => decodeInt64(v!) === 50n));
    await store.close();
  });

  it('is empty and reusable right after write (write takes its operations)', async () => {
    const store = await openStore();
    const batch = store.batch().put('pages', 'one', Buffer.from('1'));
    const written = store.write(batch);
    assert.equal(batch.length, 0);
    batch.put('pages', 'two', Buffer.from('2'));
    await written;
    assert.deepEqual(await store.get('pages', 'one'), Buffer.from('1'));
    assert.equal(await store.get('pages', 'two'), undefined);
    await store.write(batch);
    assert.deepEqual(await store.get('pages', 'two'), Buffer.from('2'));
    await store.close();
  });

  it('rejects undeclared column families when recording and batches of another store when writing', async () => {
    const a = await openStore();
    const b = await openStore();
    assert.throws(() => a.batch().put('nope', 'k', Buffer.from('v')), { code: 'SF_ERR_INVALID_ARGUMENT' });
    await assert.rejects(b.write(a.batch().put('pages', 'k', Buffer.from('v'))), { code: 'SF_ERR_INVALID_ARGUMENT' });
    const leftover = a.batch().put('pages', 'k', Buffer.from('v'));
    await a.close();
    await assert.rejects(a.write(leftover), { code: 'SF_ERR_STORE_CLOSED' });
    await b.close();
  });
  it('putPairs writes two-part keys (first 0x00 second) from arrays or one shared part, in order with the other operations, all or nothing', async () => {
    const store = await openStore();
    const v = (s: string) => Buffer.from(s);
    const batch = store
      .batch()
      .putPairs('pages', 'http://a/', ['http://b/', 'http://c/é'], [v('1'), v('2')]) // one first, arrays of seconds and values
      .putPairs('pages', ['http://x/', Buffer.from('http://y/')], 'http://a/', v('same')) // arrays of firsts, one second and value
      .delete('pages', 'http://a/\u0000http://b/');
    await store.write(batch);
    const entries = [];
    for await (const [k, value] of store.iterate('pages')) entries.push([k.toString('utf8'), value.toString()]);
    assert.deepEqual(entries, [
      ['http://a/\u0000http://c/é', '2'],
      ['http://x/\u0000http://a/', 'same'],
      ['http://y/\u0000http://a/', 'same'],
    ]);
    // A bad element anywhere records nothing; lengths must agree; one part must be an array.
    const bad = store.batch().put('pages', 'k', v('v'));
    assert.throws(() => bad.putPairs('pages', 'a', ['b', 42 as unknown as string], [v('1'), v('2')]), { code: 'SF_ERR_INVALID_ARGUMENT' });
    assert.throws(() => bad.putPairs('pages', 'a', ['b', 'c'], [v('1')]), { code: 'SF_ERR_INVALID_ARGUMENT' });
    assert.throws(() => bad.putPairs('pages', 'a', 'b', v('1')), { code: 'SF_ERR_INVALID_ARGUMENT' });
    assert.throws(() => bad.putPairs('pages', 'a', ['b'], ['not bytes' as unknown as Uint8Array]), { code: 'SF_ERR_INVALID_ARGUMENT' });
    assert.equal(bad.length, 1);
    // A part holding 0x00 is written as given (as put would), not split.
    await store.write(store.batch().putPairs('pages', ['x\u0000y', 'z'], 'b', v('nul')));
    assert.equal((await store.get('pages', 'x\u0000y\u0000b'))?.toString(), 'nul');
    assert.equal((await store.get('pages', 'z\u0000b'))?.toString(), 'nul');
    await store.close();
  });

  it('mergePairs merges into two-part keys, and keyOrder (puts or merges) gives what the given order gives, one key\'s operations in their order', async () => {
    const store = await openStore();
    const v = (s: string) => Buffer.from(s);
    const firsts = ['http://b/', 'http://a/', 'http://b/', 'http://ab/', 'http://a/', 'http://é/', 'http://a/'];
    const seconds = ['http://x/', 'http://y/', 'http://x/', 'http://x/', 'http://x/', 'http://x/', 'http://y/'];
    const ones = firsts.map((_, i) => encodeInt64(i + 1));
    // Every argument form: joined strings, a shared part, Buffer parts and a part with 0x00 (built in JS).
    const forms: Array<[string, readonly (string | Uint8Array)[] | string, readonly (string | Uint8Array)[] | string]> = [
      ['strings', firsts, seconds],
      ['one shared second', firsts, 'http://s/'],
      ['Buffer parts', firsts.map((f) => Buffer.from(f)), seconds],
      ['a part with 0x00', [...firsts.slice(0, -1), 'http://a/\u0000z'], seconds],
    ];
    for (const [form, fs, ss] of forms) {
      const key = (i: number) => `${typeof fs === 'string' ? fs : Buffer.from(fs[i]!).toString()}\u0000${typeof ss === 'string' ? ss : Buffer.from(ss[i]!).toString()}`;
      const expected = new Map<string, bigint>();
      firsts.forEach((_, i) => expected.set(key(i), (expected.get(key(i)) ?? 0n) + BigInt(i + 1)));
      for (const keyOrder of [false, true]) {
        const s2 = await openStore();
        await s2.write(s2.batch().mergePairs('counts', fs, ss, ones, { keyOrder }).mergePairs('counts', fs, ss, ones, { keyOrder }));
        for (const [k, sum] of expected) assert.equal(decodeInt64((await s2.get('counts', k))!), 2n * sum, `${form}, keyOrder ${keyOrder}: ${k}`);
        // Puts on one key: the last given wins in key order too (a stable sort).
        await s2.write(s2.batch().putPairs('pages', fs, ss, firsts.map((_, i) => v(String(i))), { keyOrder }));
        const last = new Map<string, string>();
        firsts.forEach((_, i) => last.set(key(i), String(i)));
        for (const [k, value] of last) assert.equal((await s2.get('pages', k))?.toString(), value, `${form}, keyOrder ${keyOrder}: ${k}`);
        let count = 0;
        for await (const _ of s2.iterate('pages')) count++;
        assert.equal(count, last.size);
        await s2.close();
      }
    }
    // All or nothing, as putPairs.
    const bad = store.batch().put('pages', 'k', v('v'));
    assert.throws(() => bad.mergePairs('counts', 'a', ['b', 42 as unknown as string], [ones[0]!, ones[1]!], { keyOrder: true }), { code: 'SF_ERR_INVALID_ARGUMENT' });
    assert.throws(() => bad.mergePairs('counts', 'a', [Buffer.from('b'), 'c'], [ones[0]!], { keyOrder: true }), { code: 'SF_ERR_INVALID_ARGUMENT' });
    assert.throws(() => bad.mergePairs('counts', 'a', 'b', ones[0]!), { code: 'SF_ERR_INVALID_ARGUMENT' });
    assert.throws(() => bad.mergePairs('counts', 'a', [Buffer.from('b')], ['not bytes' as unknown as Uint8Array]), { code: 'SF_ERR_INVALID_ARGUMENT' });
    assert.equal(bad.length, 1);
    await store.close();
  });

  it('a family with memtable insert hints keeps every merge, in order or not, across flushes, and refuses range deletes', async () => {
    const store = await Store.open({
      path: path.join(dir, `s${n++}`),
      columnFamilies: { ranks: { mergeOperator: float64Add(), memtableInsertHint: true }, pages: {} },
    });
    const keys = Array.from({ length: 2000 }, (_, i) => `http://h${i % 7}.example/p/${String(i).padStart(5, '0')}`).sort();
    const expected = new Map<string, number>();
    // Rounds of merges in key order (as a push writes them), then in reverse and shuffled
    // orders, interleaved with puts to another family in the same batches.
    for (let round = 0; round < 12; round++) {
      const order = round % 3 === 0 ? keys : round % 3 === 1 ? [...keys].reverse() : keys.filter((_, i) => (i * 7919 + round) % 3 === 0);
      const batch = store.batch();
      for (const k of order) {
        batch.merge('ranks', k, encodeFloat64s(1, round));
        expected.set(k, (expected.get(k) ?? 0) + round);
      }
      batch.put('pages', `round${round}`, Buffer.from('x'));
      await store.write(batch);
      if (round === 5) await store.flush();
    }
    let seen = 0;
    for await (const [k, v] of store.iterate('ranks')) {
      assert.equal(decodeFloat64s(v)[1], expected.get(k.toString('utf8')));
      seen++;
    }
    assert.equal(seen, keys.length);
    assert.throws(() => store.batch().deleteRange('ranks', 'a', 'z'), { code: 'SF_ERR_INVALID_ARGUMENT', message: /insert hints/ });
    await store.write(store.batch().deleteRange('pages', 'round0', 'round5'));
    assert.equal(await store.get('pages', 'round1'), undefined);
    await store.close();
  });

  it('reopens with insert hints a store whose WAL holds range deletes written before the family had them', async () => {
    const where = path.join(dir, `s${n++}`);
    const keys = Array.from({ length: 600 }, (_, i) => `http://h${i % 3}.example/p/${String(i).padStart(4, '0')}`);
    // Written without hints (an older version of the schema), closed without a flush: the
    // range delete stays in the WAL, which the next open replays.
    const before = await Store.open({ path: where, columnFamilies: { ranks: { mergeOperator: float64Add() } } });
    const batch = before.batch();
    for (const k of keys) batch.merge('ranks', k, encodeFloat64s(1, 2));
    await before.write(batch);
    await before.write(before.batch().deleteRange('ranks', 'http://h1.example/', 'http://h1.example0'));
    await before.close();
    const after = await Store.open({ path: where, columnFamilies: { ranks: { mergeOperator: float64Add(), memtableInsertHint: true } } });
    let seen = 0;
    for await (const [k, v] of after.iterate('ranks')) {
      assert.ok(!k.toString('utf8').startsWith('http://h1.example/'), 'the range delete was replayed');
      assert.deepEqual([...decodeFloat64s(v)], [1, 2]);
      seen++;
    }
    assert.equal(seen, keys.filter((k) => !k.startsWith('http://h1.example/')).length);
    // Writes in the hinted family after the reopen still work.
    await after.write(after.batch().merge('ranks', keys[0]!, encodeFloat64s(1, 0)));
    assert.deepEqual([...decodeFloat64s((await after.get('ranks', keys[0]!))!)], [2, 2]);
    await after.close();
  });

  it('writesTo counts the completed writes per column family: puts, merges, deletes, and batches that recorded an operation on it', async () => {
    const store = await openStore();
    const counts = () => ['pages', 'counts', 'meta'].map((cf) => store.writesTo(cf));
    assert.deepEqual(counts(), [0, 0, 0]);
    await store.put('pages', 'a', Buffer.from('A'));
    await store.merge('counts', 'a', encodeInt64(1));
    await store.delete('pages', 'nothing');
    assert.deepEqual(counts(), [2, 1, 0]);
    const batch = store.batch().put('meta', 'm', Buffer.from('M')).deleteRange('pages', 'a', 'b');
    const pending = store.write(batch);
    batch.put('counts', 'c', encodeInt64(1)); // recorded after the write began: belongs to the next write
    await pending;
    assert.deepEqual(counts(), [3, 1, 1]);
    await store.write(batch);
    assert.deepEqual(counts(), [3, 2, 1]);
    await store.write(store.batch());
    assert.deepEqual(counts(), [3, 2, 1], 'an empty batch writes to no family');
    assert.throws(() => store.writesTo('nope'), /unknown column family/);
    await store.close();
  });
});

import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { decodeFloat64s, decodeInt64, decodeRecord, encodeFloat64s, encodeInt64, encodeRecord, float64Add, int64Add, record } from '../src/operators/mergeOperators.js';
import { gatherKeys, packedKey, packKeys, Store, type PackedKeys } from '../src/storage/index.js';

// WriteBatch.mergeMany and mergeFloat64s record many merges in one native call; they must
// give exactly what the same merges recorded one by one give, before and after flush and
// full compaction, with operands coming from several concurrent batches.
let dir: string;
let n = 0;
before(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'shardflow-batched-merges-'));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

function openStore(): Promise<Store> {
  return Store.open({
    path: path.join(dir, `s${n++}`),
    columnFamilies: {
      ranksOne: { mergeOperator: float64Add() },
      ranksMany: { mergeOperator: float64Add() },
      countsOne: { mergeOperator: int64Add() },
      countsMany: { mergeOperator: int64Add() },
      recordsOne: { mergeOperator: record({ m: 'lww', v: 'lww' }) },
      recordsMany: { mergeOperator: record({ m: 'lww', v: 'lww' }), memtableInsertHint: true },
    },
  });
}

const keyOf = (i: number) => `https://example.org/page/${i % 97}`;

async function readAll(store: Store, cf: string): Promise<Map<string, Buffer>> {
  const out = new Map<string, Buffer>();
  for await (const [k, v] of store.iterate(cf)) out.set(k.toString('utf8'), v);
  return out;
}

async function assertSame(store: Store, one: string, many: string, decode: (b: Buffer) => unknown): Promise<void> {
  const a = await readAll(store, one);
  const b = await readAll(store, many);
  assert.equal(a.size, 97);
  assert.deepEqual([...b.keys()], [...a.keys()]);
  for (const [k, v] of a) assert.deepEqual(decode(b.get(k)!), decode(v), k);
}

/**
 * `keys` as PackedKeys picked out of one buffer that holds them in reverse order with junk
 * between them (as a KeyArena hands them out): key i at [starts[i], ends[i]).
 */
function picked(keys: string[]): PackedKeys {
  const parts: Buffer[] = [];
  const starts = new Uint32Array(keys.length);
  const ends = new Uint32Array(keys.length);
  let at = 0;
  for (let i = keys.length - 1; i >= 0; i--) {
    const k = Buffer.from(keys[i]!);
    parts.push(Buffer.from('~~'), k);
    starts[i] = at + 2;
    ends[i] = at + 2 + k.length;
    at += 2 + k.length;
  }
  const bytes = Buffer.concat(parts);
  // gatherKeys packs them back: the same keys, one after another.
  const gathered = gatherKeys(bytes, starts, ends);
  assert.deepEqual(keys.map((_, i) => Buffer.from(packedKey(gathered, i)).toString()), keys);
  return { bytes, starts, ends };
}

describe('batched merges', () => {
  it('mergeFloat64s equals one-by-one float64 merges, keys as an array or packed, before and after flush and compaction', async () => {
    const store = await openStore();
    // 8 concurrent writers x 5 batches x 300 [0, delta] operands, keys repeating.
    await Promise.all(
      Array.from({ length: 8 }, async (_, w) => {
        for (let b = 0; b < 5; b++) {
          const keys: string[] = [];
          const values = new Float64Array(300 * 2);
          const one = store.batch();
          for (let i = 0; i < 300; i++) {
            // Quarters: every partial sum is exact, so any merge order gives the same bits.
            const delta = ((w * 7 + b * 13 + i) % 17) / 4 - 2;
            keys.push(keyOf(w * 1000 + b * 300 + i));
            values[2 * i + 1] = delta;
            one.merge('ranksOne', keys[i]!, encodeFloat64s(0, delta));
          }
          // Odd batches pass the keys packed (PackedKeys), batch 2 picks them out of one
          // buffer in reverse order (starts and ends): the same merges.
          const many = store.batch().mergeFloat64s('ranksMany', b % 2 ? packKeys(keys.map((k) => Buffer.from(k))) : b === 2 ? picked(keys) : keys, values, 2);
          assert.equal(many.length, 300);
          // The same operands in one write each, so the two families see the same order.
          await store.write(one);
          await store.write(many);
          if (b === 2 && w === 0) await store.flush();
        }
      }),
    );
    const decode = (v: Buffer) => decodeFloat64s(v);
    await assertSame(store, 'ranksOne', 'ranksMany', decode);
    await store.flush();
    await assertSame(store, 'ranksOne', 'ranksMany', decode);
    await store.compactRange('ranksOne');
    await store.compactRange('ranksMany');
    await assertSame(store, 'ranksOne', 'ranksMany', decode);
    // stride 1 adds to the first element only; a longer stride grows the vector.
    await store.write(store.batch().mergeFloat64s('ranksMany', [keyOf(0)], Float64Array.of(1), 1));
    await store.write(store.batch().mergeFloat64s('ranksMany', [keyOf(1)], Float64Array.of(0, 0, 4), 3));
    const [x0] = decodeFloat64s((await store.get('ranksMany', keyOf(0)))!);
    const [xo] = decodeFloat64s((await store.get('ranksOne', keyOf(0)))!);
    assert.equal(x0, xo! + 1);
    assert.equal(decodeFloat64s((await store.get('ranksMany', keyOf(1)))!).length, 3);
    await store.close();
  });

  it('mergeMany equals one-by-one merges, with per-key and shared operands', async () => {
    const store = await openStore();
    await Promise.all(
      Array.from({ length: 6 }, async (_, w) => {
        for (let b = 0; b < 4; b++) {
          const keys = Array.from({ length: 250 }, (_, i) => keyOf(w * 500 + b * 250 + i));
          const operands = keys.map((_, i) => encodeInt64(BigInt(((w + b + i) % 11) - 5)));
          const one = store.batch();
          keys.forEach((k, i) => one.merge('countsOne', k, operands[i]!).merge('countsOne', Buffer.from(k), encodeInt64(1)));
          await store.write(one);
          await store.write(
            store
              .batch()
              .mergeMany('countsMany', keys, operands)
              .mergeMany('countsMany', keys.map((k) => Buffer.from(k)), encodeInt64(1)),
          );
        }
      }),
    );
    const decode = (v: Buffer) => decodeInt64(v);
    await assertSame(store, 'countsOne', 'countsMany', decode);
    await store.flush();
    await store.compactRange('countsOne');
    await store.compactRange('countsMany');
    await assertSame(store, 'countsOne', 'countsMany', decode);
    await store.close();
  });

  it('mergePairRuns equals one-by-one merges into `first 0x00 second` keys, groups in order, packed or picked columns', async () => {
    const store = await openStore();
    // Keys `target 0x00 source` with 97 targets and 13 sources; runs of 0 to 6 targets per
    // source, so keys repeat within and across groups (int64 sums: every merge counts).
    const target = (i: number) => keyOf(i);
    const source = (j: number) => `https://source.example/${j % 13}`;
    await Promise.all(
      Array.from({ length: 4 }, async (_, w) => {
        for (let b = 0; b < 3; b++) {
          const one = store.batch();
          const groups = [];
          for (let g = 0; g < 3; g++) {
            const firsts: string[] = [];
            const seconds: string[] = [];
            const operands: Buffer[] = [];
            const runs: number[] = [];
            for (let j = 0; j < 40; j++) {
              const run = (w + b + g + j) % 7;
              const s = source(w * 5 + b * 3 + g + j);
              const operand = encodeInt64(BigInt(((w + b + j) % 9) - 4));
              seconds.push(s);
              operands.push(operand);
              runs.push(run);
              for (let k = 0; k < run; k++) {
                const t = target(w * 31 + b * 17 + g * 7 + j * 3 + k);
                firsts.push(t);
                one.merge('countsOne', `${t}\u0000${s}`, operand);
              }
            }
            const pack = (keys: string[]) => packKeys(keys.map((k) => Buffer.from(k)));
            groups.push({ firsts: g === 1 ? picked(firsts) : pack(firsts), seconds: g === 2 ? picked(seconds) : pack(seconds), operands: packKeys(operands), runs: Uint32Array.from(runs) });
          }
          const many = store.batch().mergePairRuns('countsMany', groups);
          assert.equal(many.length, one.length);
          await store.write(one);
          await store.write(many);
          if (b === 1 && w === 0) await store.flush();
        }
      }),
    );
    const a = await readAll(store, 'countsOne');
    const b = await readAll(store, 'countsMany');
    assert.ok(a.size > 200, `${a.size} keys`);
    assert.deepEqual([...b.keys()], [...a.keys()]);
    await store.flush();
    await store.compactRange('countsOne');
    await store.compactRange('countsMany');
    const a2 = await readAll(store, 'countsOne');
    const b2 = await readAll(store, 'countsMany');
    for (const [k, v] of a2) assert.equal(decodeInt64(b2.get(k)!), decodeInt64(v), k);
    await store.close();
  });

  // Every combination of the options: the native call drops all but the last merge of a key
  // (a hash set over both parts) and sorts part by part, which must give the joined keys'
  // bytewise order: the keys here share long prefixes, and some are prefixes of others ("1"
  // and "10").
  for (const options of [{ lastPerKey: true, keyOrder: true }, { lastPerKey: true, keyOrder: false }, { lastPerKey: false, keyOrder: true }, { lastPerKey: false, keyOrder: false }]) {
  it(`mergePairRuns with ${JSON.stringify(options)} equals every merge of lww records${options.lastPerKey ? ', one merge per key' : ''}`, async () => {
    const store = await openStore();
    // Every key first gets a `v` from another writer; then copies {m: x} arrive in groups
    // (messages), the same backlink several times: only the last one counts.
    const keys: Array<[string, string]> = [];
    for (let t = 0; t < 20; t++) for (let s = 0; s < 5; s++) keys.push([`https://t.example/${t % 2 ? 'a-long-shared-path/' : ''}${t}`, `https://s.example/${(t * 3 + s) % 11}`]);
    const link = store.batch();
    for (const [t, s] of keys) for (const cf of ['recordsOne', 'recordsMany']) link.merge(cf, `${t}\u0000${s}`, encodeRecord({ v: Buffer.from(`link ${t} ${s}`) }));
    await store.write(link);
    for (let round = 0; round < 3; round++) {
      const one = store.batch();
      const groups = [];
      let merges = 0;
      const distinct = new Set<string>();
      for (let g = 0; g < 4; g++) {
        // Runs by source: each source's targets among `keys`, a third of them per group.
        const bySource = new Map<string, string[]>();
        keys.forEach(([t, s], i) => {
          if ((i + g + round) % 3 === 0) bySource.set(s, [...(bySource.get(s) ?? []), t]);
        });
        const firsts: string[] = [];
        const seconds: string[] = [];
        const operands: Buffer[] = [];
        const runs: number[] = [];
        for (const [s, ts] of bySource) {
          const x = round * 100 + g * 10 + s.length + ts.length / 8;
          seconds.push(s);
          operands.push(encodeRecord({ m: x }));
          runs.push(ts.length);
          for (const t of ts) {
            firsts.push(t);
            one.merge('recordsOne', `${t}\u0000${s}`, encodeRecord({ m: x }));
            merges++;
            distinct.add(`${t}\u0000${s}`);
          }
        }
        const pack = (k: Array<string | Buffer>) => packKeys(k.map((x) => Buffer.from(x)));
        groups.push({ firsts: pack(firsts), seconds: pack(seconds), operands: pack(operands), runs: Uint32Array.from(runs) });
      }
      const many = store.batch().mergePairRuns('recordsMany', groups, options);
      assert.ok(merges > distinct.size, 'some keys get several copies');
      assert.equal(many.length, options.lastPerKey ? distinct.size : merges);
      await store.write(one);
      await store.write(many);
      if (round === 1) await store.flush();
    }
    const check = async () => {
      const a = await readAll(store, 'recordsOne');
      const b = await readAll(store, 'recordsMany');
      assert.equal(a.size, keys.length);
      assert.deepEqual([...b.keys()], [...a.keys()]);
      for (const [k, v] of a) assert.deepEqual(decodeRecord(b.get(k)!), decodeRecord(v), k);
    };
    await check();
    await store.flush();
    await store.compactRange('recordsOne');
    await store.compactRange('recordsMany');
    await check();
    await store.close();
  });
  }

  it('rejects bad arguments and records nothing then', async () => {
    const store = await openStore();
    const batch = store.batch().merge('countsMany', 'a', encodeInt64(1));
    assert.throws(() => batch.mergeMany('countsMany', ['a', 'b'], [encodeInt64(1)]), { code: 'SF_ERR_INVALID_ARGUMENT' });
    assert.throws(() => batch.mergeMany('countsMany', ['a', 7 as unknown as string], encodeInt64(1)), {
      code: 'SF_ERR_INVALID_ARGUMENT',
    });
    assert.throws(() => batch.mergeMany('nope', ['a'], encodeInt64(1)), { code: 'SF_ERR_INVALID_ARGUMENT' });
    assert.throws(() => batch.mergeFloat64s('ranksMany', ['a', 'b'], new Float64Array(3), 2), {
      code: 'SF_ERR_INVALID_ARGUMENT',
    });
    assert.throws(() => batch.mergeFloat64s('ranksMany', ['a'], new Float64Array(1), 0), { code: 'SF_ERR_INVALID_ARGUMENT' });
    assert.throws(
      () => batch.mergeFloat64s('ranksMany', ['a', 7 as unknown as string], new Float64Array(2), 1),
      { code: 'SF_ERR_INVALID_ARGUMENT' },
    );
    const packed = packKeys([Buffer.from('a'), Buffer.from('bc')]);
    assert.throws(() => batch.mergeFloat64s('ranksMany', packed, new Float64Array(3), 1), { code: 'SF_ERR_INVALID_ARGUMENT' });
    assert.throws(() => batch.mergeFloat64s('ranksMany', { bytes: packed.bytes, ends: Uint32Array.of(2, 1) }, new Float64Array(2), 1), {
      code: 'SF_ERR_INVALID_ARGUMENT',
    });
    assert.throws(() => batch.mergeFloat64s('ranksMany', { bytes: packed.bytes, ends: Uint32Array.of(1, 4) }, new Float64Array(2), 1), {
      code: 'SF_ERR_INVALID_ARGUMENT',
    });
    assert.throws(() => batch.mergeFloat64s('ranksMany', { bytes: packed.bytes, starts: Uint32Array.of(0, 2), ends: Uint32Array.of(1, 1) }, new Float64Array(2), 1), {
      code: 'SF_ERR_INVALID_ARGUMENT',
    });
    assert.throws(() => batch.mergeFloat64s('ranksMany', { bytes: packed.bytes, starts: Uint32Array.of(0), ends: Uint32Array.of(1, 3) }, new Float64Array(2), 1), {
      code: 'SF_ERR_INVALID_ARGUMENT',
    });
    assert.throws(() => gatherKeys(packed.bytes, Uint32Array.of(0), Uint32Array.of(4)), { code: 'SF_ERR_INVALID_ARGUMENT' });
    const one = packKeys([Buffer.from('s')]);
    const op = packKeys([encodeInt64(1)]);
    const good = { firsts: packed, seconds: one, operands: op, runs: Uint32Array.of(2) };
    for (const bad of [
      { ...good, runs: Uint32Array.of(3) },
      { ...good, runs: Uint32Array.of(1, 1) },
      { ...good, operands: packKeys([]) },
      { ...good, firsts: { bytes: packed.bytes, ends: Uint32Array.of(2, 1) } },
      { ...good, seconds: { bytes: one.bytes, ends: Uint32Array.of(2) } },
      { ...good, firsts: { bytes: packed.bytes, starts: Uint32Array.of(0), ends: Uint32Array.of(1, 3) } },
    ]) {
      // The first group is good and would record 2 merges: all or nothing.
      assert.throws(() => batch.mergePairRuns('countsMany', [good, bad]), { code: 'SF_ERR_INVALID_ARGUMENT' });
    }
    assert.throws(() => batch.mergePairRuns('nope', [good]), { code: 'SF_ERR_INVALID_ARGUMENT' });
    assert.equal(batch.length, 1);
    await store.write(batch);
    assert.equal(decodeInt64((await store.get('countsMany', 'a'))!), 1n);
    assert.equal(await store.get('countsMany', 'b'), undefined);
    await store.close();
  });
});

/**
 * RocksDB may combine operands without the base (PartialMerge) on compaction and fold the
 * result in later. For every operator, merging a random operand sequence in one go must
 * equal first combining a random run of it partially. Checked without a database through
 * the addon's evaluateMerge, with a seeded generator.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  decodeRecord,
  encodeFloat64s,
  encodeInt64,
  encodeLww,
  encodeRecord,
  encodeSetOps,
  float64Add,
  int64Add,
  lastWriteWins,
  max,
  min,
  record,
  recordSetOps,
  set,
  type MergeOperatorSpec,
} from '../src/operators/mergeOperators.js';
import { nativeAddon } from '../src/storage/native.js';

/** mulberry32: small seeded PRNG. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Gen = (r: () => number) => Buffer;
const int = (r: () => number, n: number) => Math.floor(r() * n);

const cases: { spec: MergeOperatorSpec; operand: Gen; base?: Gen; decode?: (b: Buffer) => unknown }[] = [
  { spec: int64Add(), operand: (r) => encodeInt64(int(r, 2000) - 1000) },
  // Small integers keep float addition exact, so the comparison can be strict.
  { spec: float64Add(), operand: (r) => encodeFloat64s(...Array.from({ length: 1 + int(r, 3) }, () => int(r, 100) - 50)) },
  { spec: max(), operand: (r) => encodeFloat64s(r() * 100 - 50) },
  { spec: min(), operand: (r) => encodeFloat64s(r() * 100 - 50) },
  { spec: lastWriteWins(), operand: (r) => encodeLww(int(r, 5), Buffer.from([int(r, 256)])) },
  {
    spec: set(),
    operand: (r) => encodeSetOps(r() < 0.6 ? { add: [`m${int(r, 6)}`] } : { remove: [`m${int(r, 6)}`] }),
    base: () => encodeSetOps({ add: ['m0', 'm1', 'm2'] }),
  },
  {
    spec: record({ hits: 'sum', seen: 'max', low: 'min', status: 'lww', tags: 'set' }),
    operand: (r) => {
      const o: Record<string, unknown> = {};
      if (r() < 0.5) o.hits = int(r, 10);
      if (r() < 0.5) o.seen = int(r, 1000);
      if (r() < 0.5) o.low = int(r, 1000);
      if (r() < 0.5) o.status = r() < 0.2 ? null : int(r, 600);
      if (r() < 0.3) o.note = `n${int(r, 3)}`; // default rule: lww
      if (r() < 0.5) {
        o.tags = r() < 0.5 ? [`t${int(r, 4)}`] : recordSetOps({ add: [`t${int(r, 4)}`], remove: [`t${int(r, 4)}`] });
      }
      return encodeRecord(o);
    },
    base: () => encodeRecord({ hits: 5, seen: 10, low: 500, status: 200, tags: ['t0', 't1'] }),
    decode: (b) => decodeRecord(b),
  },
];

describe('partial merge equals full merge', () => {
  for (const c of cases) {
    it(`${c.spec.name}: 300 random sequences, split at random points`, () => {
      const { evaluateMerge } = nativeAddon();
      const r = rng(42);
      for (let round = 0; round < 300; round++) {
        const ops = Array.from({ length: 2 + int(r, 8) }, () => c.operand(r));
        const base = c.base && r() < 0.7 ? c.base(r) : undefined;
        const whole = evaluateMerge(c.spec, base, ops, 'full');
        const from = int(r, ops.length - 1);
        const to = from + 2 + int(r, ops.length - from - 1);
        const combined = evaluateMerge(c.spec, undefined, ops.slice(from, to), 'partial');
        const split = evaluateMerge(c.spec, base, [...ops.slice(0, from), combined.value, ...ops.slice(to)], 'full');
        assert.equal(whole.faults, 0);
        assert.equal(combined.faults + split.faults, 0);
        if (c.decode) assert.deepEqual(c.decode(split.value), c.decode(whole.value), `round ${round}`);
        else assert.deepEqual(split.value, whole.value, `round ${round}`);
      }
    });
  }
});

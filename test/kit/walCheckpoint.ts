/**
 * A store written in numbered batches whose content after any number of them is known, for
 * the tests of checkpoints that copy the WAL instead of flushing
 * (test/checkpoint.wal-copy.test.ts and its child, test/kit/walCheckpointChild.ts).
 *
 * Batch b writes three column families at once: `pages` (a put of `page-<b mod 40>`, and at
 * every tenth batch a delete of another page), `ranks` (a float64-sum merge operand to
 * `r-<b mod 7>`) and `log` (`b-<b, 8 digits>`, ascending keys, a family with memtable insert
 * hints, whose WAL replay `Store.open` does in two steps).
 */
import { decodeFloat64s, encodeFloat64s, float64Add } from '../../src/operators/mergeOperators.js';
import type { Store } from '../../src/storage/index.js';

export const walColumnFamilies = { pages: {}, ranks: { mergeOperator: float64Add() }, log: { memtableInsertHint: true } };

const logKey = (b: number): string => `b-${String(b).padStart(8, '0')}`;

/** Writes batch `b` (one atomic write across the three families). */
export async function writeWalBatch(store: Store, b: number): Promise<void> {
  const batch = store.batch();
  batch.put('pages', `page-${b % 40}`, Buffer.from(`v${b}`));
  if (b % 10 === 9) batch.delete('pages', `page-${(b * 3) % 40}`);
  batch.merge('ranks', `r-${b % 7}`, encodeFloat64s(b));
  batch.put('log', logKey(b), Buffer.from('x'.repeat(100 + (b % 50))));
  await store.write(batch);
}

/** The store's content after batches 0 to n-1, as `family/key=value` lines in key order. */
export function expectedAfter(n: number): string[] {
  const pages = new Map<string, string>();
  const ranks = new Map<string, number>();
  for (let b = 0; b < n; b++) {
    pages.set(`page-${b % 40}`, `v${b}`);
    if (b % 10 === 9) pages.delete(`page-${(b * 3) % 40}`);
    ranks.set(`r-${b % 7}`, (ranks.get(`r-${b % 7}`) ?? 0) + b);
  }
  const sorted = <V>(m: Map<string, V>): Array<[string, V]> => [...m].sort(([a], [b]) => (Buffer.compare(Buffer.from(a), Buffer.from(b))));
  return [
    ...sorted(pages).map(([k, v]) => `pages/${k}=${v}`),
    ...sorted(ranks).map(([k, v]) => `ranks/${k}=${v}`),
    ...Array.from({ length: n }, (_, b) => `log/${logKey(b)}=${100 + (b % 50)}`),
  ];
}

/** The content of a store of `walColumnFamilies`, in the form of `expectedAfter`. */
export async function walContents(store: Store): Promise<string[]> {
  const out: string[] = [];
  for await (const [k, v] of store.iterate('pages')) out.push(`pages/${k.toString()}=${v.toString()}`);
  for await (const [k, v] of store.iterate('ranks')) out.push(`ranks/${k.toString()}=${decodeFloat64s(v).join(',')}`);
  for await (const [k, v] of store.iterate('log')) out.push(`log/${k.toString()}=${v.length}`);
  return out;
}

/** Batches applied in a store of `walColumnFamilies` (its `log` entries). */
export async function batchesIn(store: Store): Promise<number> {
  let n = 0;
  for await (const _ of store.iterate('log')) n++;
  return n;
}

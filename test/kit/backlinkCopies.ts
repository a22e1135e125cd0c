import { join } from 'node:path';
import { Store } from '../../src/storage/index.js';
import { decodeFloat64s } from '../../src/index.js';
import { ColumnFamilies, partitionColumnFamilies, splitLinkKey } from '../../src/actors/partition/schema.js';
import { COPY_RELATIVE_BOUND, decodeBacklink } from '../../src/actors/backlinks/backlinkValue.js';

/** What `checkBacklinkCopies` found. */
export interface BacklinkCopies {
  /** Backlinks (records with a link) over all partitions. */
  readonly backlinks: number;
  /** Backlinks whose source is on the target's partition (no copy: the query reads its ranks there). */
  readonly local: number;
  /** Backlinks from another partition without a copy of their source's x. */
  readonly missing: number;
  /** Backlinks whose copy differs from the source's stored x by more than COPY_RELATIVE_BOUND |x|, with one example. */
  readonly outside: number;
  readonly example?: string;
  /** Largest |x - copy| / |x| seen (0 when x = copy). */
  readonly largest: number;
  /** Records holding a copy and no link. */
  readonly copiesWithoutLink: number;
}

/**
 * Opens every partition store `p<i>` of a stopped job's data dir and compares the copy of
 * its source's metric that each backlink from another partition holds with the source's
 * stored x (ranks, on the source's partition): the staleness bound of docs/ARCHITECTURE.md, "Backlinks carry their source's
 * metric". @throws the store's open errors (a data dir still in use)
 */
export async function checkBacklinkCopies(dataDir: string, partitions: number): Promise<BacklinkCopies> {
  const stores: Store[] = [];
  try {
    for (let p = 0; p < partitions; p++) stores.push(await Store.open({ path: join(dataDir, `p${p}`), columnFamilies: partitionColumnFamilies() }));
    /** Each page's stored x and its partition. */
    const x = new Map<string, { x: number; p: number }>();
    for (const [p, store] of stores.entries()) {
      for await (const [key, value] of store.iterate(ColumnFamilies.ranks)) x.set(key.toString('utf8'), { x: decodeFloat64s(value)[0] ?? 0, p });
    }
    let backlinks = 0;
    let local = 0;
    let missing = 0;
    let outside = 0;
    let largest = 0;
    let copiesWithoutLink = 0;
    let example: string | undefined;
    for (const [p, store] of stores.entries()) {
      for await (const [key, value] of store.iterate(ColumnFamilies.backlinks)) {
        const { link, metric } = decodeBacklink(value);
        if (!link) {
          copiesWithoutLink++;
          continue;
        }
        backlinks++;
        const [target, source] = splitLinkKey(key);
        const from = x.get(source);
        if (from?.p === p) {
          local++;
          continue;
        }
        if (metric === undefined) {
          missing++;
          example ??= `${source} -> ${target}: no copy`;
          continue;
        }
        const xs = from?.x ?? 0;
        const gap = Math.abs(xs - metric);
        const relative = xs === 0 ? (gap === 0 ? 0 : Infinity) : gap / Math.abs(xs);
        if (relative > largest) largest = relative;
        if (gap > COPY_RELATIVE_BOUND * Math.abs(xs)) {
          outside++;
          example ??= `${source} -> ${target}: copy ${metric}, x ${xs}`;
        }
      }
    }
    return { backlinks, local, missing, outside, largest, copiesWithoutLink, ...(example ? { example } : {}) };
  } finally {
    for (const s of stores) await s.close();
  }
}

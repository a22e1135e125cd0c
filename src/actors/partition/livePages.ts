import { Packr } from 'msgpackr';
import type { Snapshot, Store } from '../../storage/index.js';
import { RawChunkCursor } from '../metrics/chunkCursor.js';
import { ColumnFamilies, type PageRecord } from './schema.js';
import { isScoredPage } from './redirects.js';

const packr = new Packr({ useRecords: false });

/**
 * Calls `visit(url, score)` for every live page of a partition (optionally the URLs under
 * `prefix`), in key order, with its unnormalised score x + r (0 for a page without a rank
 * row): one synchronized walk of `pages` and `ranks` (both keyed by URL), no random reads.
 * Deleted pages and aliases (permanent redirects: `PageRecord.aliasOf`, no score of their
 * own) are left out. Reads `snapshot` when given, else a snapshot of its own.
 */
export async function walkLivePages(
  store: Store,
  visit: (url: string, score: number) => void,
  options: { readonly prefix?: string; readonly snapshot?: Snapshot } = {},
): Promise<void> {
  const snapshot = options.snapshot ?? store.snapshot();
  const opts = { snapshot, chunkSize: 4096, ...(options.prefix ? { prefix: options.prefix } : {}) };
  // Raw chunks, compared in place: no Buffer per `ranks` entry and no await per entry.
  const pages = new RawChunkCursor(store.rawChunks(ColumnFamilies.pages, opts));
  const ranks = new RawChunkCursor(store.rawChunks(ColumnFamilies.ranks, opts));
  try {
    while (pages.has || (await pages.load())) {
      const keys = pages.keys;
      const ks = pages.keyStart;
      const ke = pages.keyEnd;
      const record = packr.unpack(pages.values.subarray(pages.valueStart, pages.valueEnd)) as PageRecord;
      let score = 0;
      while (ranks.has || (await ranks.load())) {
        const c = ranks.keys.compare(keys, ks, ke, ranks.keyStart, ranks.keyEnd);
        if (c > 0) break;
        if (c === 0) score = scoreAt(ranks.values, ranks.valueStart, ranks.valueEnd);
        ranks.advance();
      }
      // The pages chunk stays valid while `ranks` loads: the two iterators are apart.
      if (isScoredPage(record)) visit(keys.toString('utf8', ks, ke), score);
      pages.advance();
    }
  } finally {
    await pages.close();
    await ranks.close();
    if (!options.snapshot) snapshot.release();
  }
}

/** x + r of a `ranks` value (float64 LE [x, r]); 0 for a short value. */
export function scoreOf(value: Buffer | undefined): number {
  return value ? scoreAt(value, 0, value.length) : 0;
}

/** `scoreOf` the `ranks` value `bytes[start .. end)` (a raw chunk's values, read in place). */
function scoreAt(bytes: Buffer, start: number, end: number): number {
  const x = end - start >= 8 ? bytes.readDoubleLE(start) : 0;
  const r = end - start >= 16 ? bytes.readDoubleLE(start + 8) : 0;
  return x + r;
}

import { Packr } from 'msgpackr';
import type { Snapshot, Store } from '../../storage/index.js';
import { ChunkCursor } from '../metrics/chunkCursor.js';
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
  const pages = new ChunkCursor(store.chunks(ColumnFamilies.pages, opts));
  const ranks = new ChunkCursor(store.chunks(ColumnFamilies.ranks, opts));
  try {
    while (await pages.ready()) {
      const key = pages.key;
      const record = packr.unpack(pages.value) as PageRecord;
      pages.advance();
      let score = 0;
      while (await ranks.ready()) {
        const c = Buffer.compare(ranks.key, key);
        if (c > 0) break;
        if (c === 0) score = scoreOf(ranks.value);
        ranks.advance();
      }
      if (isScoredPage(record)) visit(key.toString('utf8'), score);
    }
  } finally {
    await pages.close();
    await ranks.close();
    if (!options.snapshot) snapshot.release();
  }
}

/** x + r of a `ranks` value (float64 LE [x, r]); 0 for a short value. */
export function scoreOf(value: Buffer | undefined): number {
  if (!value) return 0;
  const x = value.length >= 8 ? value.readDoubleLE(0) : 0;
  const r = value.length >= 16 ? value.readDoubleLE(8) : 0;
  return x + r;
}

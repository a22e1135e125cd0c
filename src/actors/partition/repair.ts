import { Packr } from 'msgpackr';
import type { Store, WriteBatch } from '../../storage/index.js';
import { encodeFloat64s, encodeInt64 } from '../../index.js';
import { teleportOf } from './redirects.js';
import { ChunkCursor } from '../metrics/chunkCursor.js';
import { ColumnFamilies, Counters, type FrontierEntry, type PageRecord } from './schema.js';

const packr = new Packr({ useRecords: false });
/** Operations per write batch of the reset (bounded memory on large partitions). */
const OPS_PER_BATCH = 16_384;

/** `meta` key prefixes of the metric actor's round bookkeeping that refer to messages in flight. */
const ROUND_STATE_KEYS = ['expected\u0000', 'last-report'];

/** What `resetInFlightState` changed in one partition store. */
export interface InFlightReset {
  /** Outbox rows dropped (messages whose effects the repair derives again). */
  readonly outboxRows: number;
  /** Backlinks deleted (rebuilt from the senders' outlinks). */
  readonly backlinks: number;
  /** `ranks` rows whose residual was set to t - x. */
  readonly ranks: number;
  /** Frontier URLs whose crawl request was out, or whose result was not indexed, queued again. */
  readonly requeued: number;
}

/**
 * The first, local step of a repair (docs/ARCHITECTURE.md, "Crash and restart"): makes one
 * partition store independent of every message that was in flight when the previous run
 * stopped, by dropping or resetting what those messages would have changed. Run on every
 * partition, before its actors start and before anything is consumed; the second step
 * (`repairWebIndex`) then derives the same effects again from the stores, through the broker:
 *
 * - outbox rows (unpublished link operations, contributions, crawl requests): dropped; the
 *   outbox sequences in `meta` go on, so receivers' applied marks stay valid;
 * - `backlinks`: deleted and their counter set to 0; every partition sends its outlinks
 *   again as link operations (the backlinks of q are exactly the outlinks into q);
 * - `ranks`: each residual set to r = t - x (t = 1 - d for a live page, 0 otherwise: an alias has none); one
 *   pass of contributions d x_p w_pq / sum_q w_pq along the outlinks adds d W^T x, which
 *   restores the invariant r = t - x + d W^T x of the push method exactly (docs/ARCHITECTURE.md,
 *   "The metric"); the metric's round bookkeeping of messages in flight (`expected` counts, the
 *   last push report) is dropped;
 * - `frontier`: URLs whose crawl request was out are queued again (their request or its
 *   result may be lost), and so are URLs whose result the crawl policy took in (`fetched`)
 *   while the indexer did not store it (no page record, or one older than that result):
 *   the two consume `fetches/<p>` on their own subscriptions, so a kill can fall between
 *   them. A second result of a URL is harmless (the indexer diffs pages).
 *
 * Idempotent: a run killed during a repair repairs again from the start.
 * @param teleport 1 - d, the residual a live page starts with
 * @throws the store's errors
 */
export async function resetInFlightState(store: Store, teleport: number): Promise<InFlightReset> {
  const w = new BatchWriter(store);
  const snapshot = store.snapshot();
  try {
    let outboxRows = 0;
    for await (const [key] of store.iterate(ColumnFamilies.outbox, { keysOnly: true, snapshot })) {
      (await w.next()).delete(ColumnFamilies.outbox, key);
      outboxRows++;
    }
    for (const prefix of ROUND_STATE_KEYS) {
      for await (const [key] of store.iterate(ColumnFamilies.meta, { prefix, keysOnly: true, snapshot })) {
        (await w.next()).delete(ColumnFamilies.meta, key);
      }
    }
    let backlinks = 0;
    for await (const [key] of store.iterate(ColumnFamilies.backlinks, { keysOnly: true, snapshot })) {
      (await w.next()).delete(ColumnFamilies.backlinks, key);
      backlinks++;
    }
    (await w.next()).put(ColumnFamilies.counters, Counters.backlinks, encodeInt64(0));
    const ranks = await resetResiduals(store, snapshot, teleport, w);
    let requeued = 0;
    for await (const { keys, values } of store.chunks(ColumnFamilies.frontier, { snapshot, chunkSize: 1024 })) {
      const entries = values.map((v) => packr.unpack(v) as FrontierEntry);
      // A result the crawl policy took in (`fetched`) may not have reached the indexer:
      // both consume `fetches/<p>` on their own subscriptions. Its page record then is
      // missing, or older than the result the policy recorded.
      const fetched = keys.flatMap((_, i) => (entries[i]!.state === 'fetched' && entries[i]!.fetchedAt !== undefined ? [i] : []));
      const records = fetched.length > 0 ? await store.multiGet(ColumnFamilies.pages, fetched.map((i) => keys[i]!), { snapshot }) : [];
      const unindexed = new Set(fetched.filter((i, j) => !(records[j] && (packr.unpack(records[j]!) as PageRecord).fetchedAt >= entries[i]!.fetchedAt!)));
      for (let i = 0; i < keys.length; i++) {
        const entry = entries[i]!;
        const lost = (entry.state ?? 'requested') === 'requested' || unindexed.has(i);
        if (!lost) continue;
        (await w.next()).put(ColumnFamilies.frontier, keys[i]!, packr.pack({ ...entry, state: 'queued' } satisfies FrontierEntry));
        requeued++;
      }
    }
    await w.close();
    return { outboxRows, backlinks, ranks, requeued };
  } finally {
    snapshot.release();
  }
}

/**
 * Sets r = t - x in every `ranks` row (t: `teleportOf` the page), and writes [0, t] for a live page without one: one
 * synchronized walk of `pages` and `ranks` (both keyed by URL).
 * @returns rows written
 */
async function resetResiduals(
  store: Store,
  snapshot: ReturnType<Store['snapshot']>,
  teleport: number,
  w: BatchWriter,
): Promise<number> {
  const pages = new ChunkCursor(store.chunks(ColumnFamilies.pages, { snapshot, chunkSize: 4096 }));
  const ranks = new ChunkCursor(store.chunks(ColumnFamilies.ranks, { snapshot, chunkSize: 4096 }));
  let rows = 0;
  const put = async (key: Buffer, x: number, t: number) => {
    (await w.next()).put(ColumnFamilies.ranks, key, encodeFloat64s(x, t - x));
    rows++;
  };
  try {
    // t of the current page: 1 - d for a live page, 0 for a deleted one or an alias (redirects.ts).
    let page = (await pages.ready()) ? pages.key : undefined;
    let pageT = page ? teleportOf(packr.unpack(pages.value) as PageRecord, teleport) : 0;
    const nextPage = async () => {
      pages.advance();
      page = (await pages.ready()) ? pages.key : undefined;
      pageT = page ? teleportOf(packr.unpack(pages.value) as PageRecord, teleport) : 0;
    };
    while (await ranks.ready()) {
      const key = ranks.key;
      const value = ranks.value;
      ranks.advance();
      // Live pages before this key have no `ranks` row.
      while (page && Buffer.compare(page, key) < 0) {
        if (pageT !== 0) await put(Buffer.from(page), 0, pageT);
        await nextPage();
      }
      let t = 0;
      if (page && Buffer.compare(page, key) === 0) {
        t = pageT;
        await nextPage();
      }
      const x = value.length >= 8 ? value.readDoubleLE(0) : 0;
      await put(Buffer.from(key), x, t);
    }
    while (page) {
      if (pageT !== 0) await put(Buffer.from(page), 0, pageT);
      await nextPage();
    }
  } finally {
    await pages.close();
    await ranks.close();
  }
  return rows;
}

/** Write batches of at most OPS_PER_BATCH operations: `next()` gives the batch for one more. */
class BatchWriter {
  #batch: WriteBatch;
  #ops = 0;
  constructor(readonly store: Store) {
    this.#batch = store.batch();
  }

  /** The batch to add one operation to (the previous one is written when full). */
  async next(): Promise<WriteBatch> {
    if (++this.#ops > OPS_PER_BATCH) {
      await this.store.write(this.#batch);
      this.#batch = this.store.batch();
      this.#ops = 1;
    }
    return this.#batch;
  }

  /** Writes what is left. */
  async close(): Promise<void> {
    await this.store.write(this.#batch);
  }
}

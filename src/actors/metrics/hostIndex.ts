import { Packr } from 'msgpackr';
import type { Store } from '../../storage/index.js';
import { hostOf } from '../../index.js';
import { walkLivePages } from '../partition/livePages.js';
import { grown } from './grown.js';
import { ColumnFamilies, HOST_INDEX_TOTAL, type HostIndexTotal, type HostRecord } from '../partition/schema.js';

const packr = new Packr({ useRecords: false });

/**
 * Rewrites a partition's `hosts` index from one consistent walk of its live pages and ranks:
 * per host, its pages, the sum of their scores (authority) and the best page; and the
 * partition's total in `meta`. One write batch, so readers see the old index or the new one.
 * Hosts without live pages any more are deleted. Run by the metric actor when the metric
 * has converged (`WebIndex.converge`), under the graph lock.
 * @param now wall-clock ms recorded as `at`
 * @param onPage called with every live page, in key order, its host (undefined for a URL
 *   without one) and its score: what a HostIndexMemo needs to refresh the index again in part
 * @returns the new partition totals
 */
export async function refreshHostIndex(store: Store, now: number, onPage?: (url: string, host: string | undefined, score: number) => void): Promise<HostIndexTotal> {
  const snapshot = store.snapshot();
  const hosts = new Map<string, { pages: number; sum: number; max: number; best: string }>();
  let total = 0;
  let pages = 0;
  const batch = store.batch();
  try {
    await walkLivePages(
      store,
      (url, score) => {
        total += score;
        pages++;
        let host: string;
        try {
          host = hostOf(url);
        } catch {
          onPage?.(url, undefined, score);
          return; // a URL without a host part: counted in the total, in no host
        }
        onPage?.(url, host, score);
        const h = hosts.get(host);
        if (!h) hosts.set(host, { pages: 1, sum: score, max: score, best: url });
        else {
          h.pages++;
          h.sum += score;
          if (score > h.max || (score === h.max && url < h.best)) {
            h.max = score;
            h.best = url;
          }
        }
      },
      { snapshot },
    );
    for await (const { keys } of store.chunks(ColumnFamilies.hosts, { snapshot, keysOnly: true, chunkSize: 4096 })) {
      for (const k of keys) if (!hosts.has(k.toString('utf8'))) batch.delete(ColumnFamilies.hosts, k);
    }
  } finally {
    snapshot.release();
  }
  for (const [host, h] of hosts) batch.put(ColumnFamilies.hosts, host, packr.pack(h satisfies HostRecord));
  const totals: HostIndexTotal = { total, pages, hosts: hosts.size, at: now, rewritten: hosts.size };
  batch.put(ColumnFamilies.meta, HOST_INDEX_TOTAL, packr.pack(totals));
  await store.write(batch);
  return totals;
}

/** The partition's hosts index: totals (undefined before the first refresh) and every host record. */
export async function readHostIndex(store: Store): Promise<{ totals: HostIndexTotal | undefined; hosts: Array<[string, HostRecord]> }> {
  const snapshot = store.snapshot();
  try {
    const t = await store.get(ColumnFamilies.meta, HOST_INDEX_TOTAL, { snapshot });
    const hosts: Array<[string, HostRecord]> = [];
    for await (const { keys, values } of store.chunks(ColumnFamilies.hosts, { snapshot, chunkSize: 4096 })) {
      for (let i = 0; i < keys.length; i++) hosts.push([keys[i]!.toString('utf8'), packr.unpack(values[i]!) as HostRecord]);
    }
    return { totals: t ? (packr.unpack(t) as HostIndexTotal) : undefined, hosts };
  } finally {
    snapshot.release();
  }
}

/**
 * The hosts index as a partition's last full refresh (`refreshHostIndex`) left it, with each
 * host's live pages as page slots (AdjacencyCache slots, in key order), so that the next
 * refresh rewrites only the hosts whose pages' scores moved since (`touch`), from the metric
 * actor's RankMirror instead of a walk of every live page (issue 18: after a local change,
 * that walk at the end of every converge call was a fixed cost as large as several rounds).
 *
 * Valid only while no page enters or leaves the partition's live pages and nothing but the
 * metric actor writes `ranks`: every such write bumps `AdjacencyCache.ranksEpoch` (a new
 * page, a deletion or an alias changes its teleport residual: the indexer; erasures: the
 * garbage collector), and the memo is tied to one mirror object, which a scan of `ranks`
 * replaces. The metric actor keeps one per incarnation and falls back on the full refresh
 * otherwise. Per host, the pages, the sum (in key order, as the full walk adds them), the
 * highest score and its page are computed again as the full walk does; the partition total is
 * the sum of the hosts' sums and of the hostless pages' scores (rounding aside, the walk's).
 */
export class HostIndexMemo {
  /** Host id + 1 per page slot (0: not a live page; HOSTLESS + 1: a live page without a host). */
  #hostOfSlot = new Int32Array(1024);
  readonly #names: string[] = [];
  readonly #ids = new Map<string, number>();
  /** Live page slots per host id, in key order; and those without a host. */
  readonly #slots: number[][] = [];
  readonly #hostless: number[] = [];
  readonly #records: HostRecord[] = [];
  #hostlessSum = 0;
  readonly #dirty = new Set<number>();
  #hostlessDirty = false;

  /**
   * @param epoch `AdjacencyCache.ranksEpoch` when the full refresh ran
   * @param mirror the RankMirror whose scores the partial refreshes read (identity only)
   */
  constructor(
    readonly epoch: number,
    readonly mirror: object,
  ) {}

  /**
   * Records a live page of the full refresh with the score it read (call in key order, as
   * `refreshHostIndex`'s `onPage`): the host's record is built as the walk builds it.
   */
  page(slot: number, url: string, host: string | undefined, score: number): void {
    if (slot >= this.#hostOfSlot.length) this.#hostOfSlot = grown(this.#hostOfSlot, slot + 1);
    if (host === undefined) {
      this.#hostOfSlot[slot] = HOSTLESS + 1;
      this.#hostless.push(slot);
      this.#hostlessSum += score;
      return;
    }
    let id = this.#ids.get(host);
    if (id === undefined) {
      id = this.#names.length;
      this.#ids.set(host, id);
      this.#names.push(host);
      this.#slots.push([slot]);
      this.#records.push({ pages: 1, sum: score, max: score, best: url });
    } else {
      this.#slots[id]!.push(slot);
      const r = this.#records[id]!;
      const better = score > r.max || (score === r.max && url < r.best);
      this.#records[id] = { pages: r.pages + 1, sum: r.sum + score, max: better ? score : r.max, best: better ? url : r.best };
    }
    this.#hostOfSlot[slot] = id + 1;
  }

  /** Records that `slot`'s score moved (a push's transfer, folded contributions): its host is rewritten by the next refresh. */
  touch(slot: number): void {
    const h = slot < this.#hostOfSlot.length ? this.#hostOfSlot[slot]! - 1 : -1;
    if (h === HOSTLESS) this.#hostlessDirty = true;
    else if (h >= 0) this.#dirty.add(h);
  }

  /**
   * Rewrites the records of the hosts touched since the last refresh and the partition's
   * totals, in one write batch.
   * @param score x + r of a page slot now (the mirror's, which `ranks` holds)
   * @param url a page slot's URL (a host's best page)
   * @returns the new totals (`rewritten`: the hosts touched)
   */
  async refresh(store: Store, now: number, score: (slot: number) => number, url: (slot: number) => string): Promise<HostIndexTotal> {
    const batch = store.batch();
    for (const id of this.#dirty) {
      const record = this.#record(id, score, url);
      this.#records[id] = record;
      batch.put(ColumnFamilies.hosts, this.#names[id]!, packr.pack(record satisfies HostRecord));
    }
    if (this.#hostlessDirty) this.#hostlessSum = this.#hostless.reduce((t, slot) => t + score(slot), 0);
    let total = this.#hostlessSum;
    let pages = this.#hostless.length;
    for (const r of this.#records) {
      total += r.sum;
      pages += r.pages;
    }
    const totals: HostIndexTotal = { total, pages, hosts: this.#records.length, at: now, rewritten: this.#dirty.size };
    batch.put(ColumnFamilies.meta, HOST_INDEX_TOTAL, packr.pack(totals));
    await store.write(batch);
    this.#dirty.clear();
    this.#hostlessDirty = false;
    return totals;
  }

  #record(id: number, score: (slot: number) => number, url: (slot: number) => string): HostRecord {
    const slots = this.#slots[id]!;
    // As the full walk: the first page, then each later one (a tie goes to the lower URL).
    let sum = score(slots[0]!);
    let max = sum;
    let best = url(slots[0]!);
    for (let i = 1; i < slots.length; i++) {
      const s = score(slots[i]!);
      sum += s;
      if (s > max) {
        max = s;
        best = url(slots[i]!);
      } else if (s === max) {
        const u = url(slots[i]!);
        if (u < best) best = u;
      }
    }
    return { pages: slots.length, sum, max, best };
  }
}

/** Host id of the live pages without a host part. */
const HOSTLESS = 2 ** 30;

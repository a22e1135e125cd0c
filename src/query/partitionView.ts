import { Packr } from 'msgpackr';
import type { Store } from '../storage/index.js';
import { decodeFloat64s, hostOf, StoreClosedError, type PartitionId } from '../index.js';
import type { LinkFeatures } from '../actors/messages.js';
import { linkFeatures, linkWeight } from '../actors/indexer/linkValue.js';
import { ColumnFamilies, linkPrefix, type FrontierEntry, type FrontierState, type HostRecord, type PageRecord } from '../actors/partition/schema.js';
import { TopK } from './topK.js';
import { scoreOf, walkLivePages } from '../actors/partition/livePages.js';
import { readHostIndex } from '../actors/metrics/hostIndex.js';
import { isAliasRecordValue } from '../actors/partition/redirects.js';
import { decodeBacklink } from '../actors/backlinks/backlinkValue.js';

/** A page as one partition stores it. */
export interface StoredPage {
  /** Absent when no fetch of the page was stored. */
  readonly record?: PageRecord;
  /** The crawl policy's entry, when the URL is in the frontier. */
  readonly frontier?: FrontierEntry;
  /** Rank estimate x and residual r (unnormalised), when the URL has a rank row. */
  readonly rank?: { readonly x: number; readonly r: number };
  /** Backlinks stored for the URL. */
  readonly backlinks: number;
}

/** One stored link, seen from one end: `url` is the other end. */
export interface StoredLink {
  readonly url: string;
  readonly features: LinkFeatures;
  /** Raw weight from the weight function at index time. */
  readonly weight: number;
}

/** A stored link not decoded yet: `url` is the other end, `value` the link value (`decodeLink`). */
export interface RawLink {
  readonly url: string;
  readonly value: Buffer;
  /**
   * Backlinks only: the copy of the source's unnormalised rank estimate x that the target's
   * partition holds (backlinks/backlinkValue.ts), absent while none has arrived.
   */
  readonly metric?: number;
}

/** The features and weight of a `RawLink`. */
export function decodeLink(link: RawLink): StoredLink {
  return { url: link.url, features: linkFeatures(link.value), weight: linkWeight(link.value) };
}

/** A page with its unnormalised score x + r. */
export interface RawScore {
  readonly url: string;
  readonly raw: number;
}

/** What one partition contributes to totals and rankings. */
export interface PartitionSummary {
  /** Sum of x + r over live pages: the partition's share of the normaliser. */
  readonly total: number;
  /** Live pages. */
  readonly pages: number;
  /** The partition's best pages by x + r, highest first, at most the limit asked. */
  readonly topPages: RawScore[];
  /** The partition's best hosts by the sum of x + r of their live pages (a host lives on one partition). */
  readonly topHosts: Array<{ readonly host: string; readonly pages: number; readonly raw: number }>;
}

/** A host's live pages on its partition. */
export interface HostPages {
  readonly pages: number;
  /** Sum of x + r of its live pages. */
  readonly raw: number;
  readonly top: RawScore[];
}

/** URLs of one frontier state and reason that a crawl has not fetched with an answer ({@link PartitionView.crawlGaps}). */
export interface CrawlGap {
  /** `blocked`, `out-of-scope`, `queued`, `requested`, or `fetched` (the last fetch failed). */
  readonly state: FrontierState;
  /**
   * The frontier row's reason, e.g. `robots.txt unreachable (fetch failed: Headers Timeout
   * Error)`, `not in scope (...)`, `fetch failed: timed out`; for rows without one
   * (queued and requested URLs), {@link UNSTATED_GAP_REASONS}.
   */
  readonly reason: string;
  /** How many URLs. */
  readonly urls: number;
  /** Some of them. */
  readonly examples: readonly string[];
}

/**
 * The reason a {@link CrawlGap} gives for frontier rows that record none: `queued` (a spent
 * crawl budget leaves URLs so), `requested` (a crawl request out, no result applied), and a
 * failed fetch stored without an error text.
 */
export const UNSTATED_GAP_REASONS: Readonly<Partial<Record<FrontierState, string>>> = Object.freeze({
  queued: 'not requested yet',
  requested: 'requested, no result yet',
  fetched: 'last fetch failed',
});

/**
 * Sums the gaps of several partitions by state and reason.
 * @param examples most URLs kept per group
 * @returns the groups, most URLs first (then by state and reason)
 */
export function mergeCrawlGaps(lists: ReadonlyArray<readonly CrawlGap[]>, examples = 3): CrawlGap[] {
  const tally = new GapTally(examples);
  for (const list of lists) for (const g of list) tally.add(g.state, g.reason, g.urls, g.examples);
  return tally.list();
}

/** Counts URLs per (state, reason), keeping the first `examples` of each. */
class GapTally {
  readonly #groups = new Map<string, { state: FrontierState; reason: string; urls: number; examples: string[] }>();
  constructor(readonly examples: number) {}

  add(state: FrontierState, reason: string, urls: number, examples: readonly string[]): void {
    const key = `${state}\u0000${reason}`;
    let g = this.#groups.get(key);
    if (!g) this.#groups.set(key, (g = { state, reason, urls: 0, examples: [] }));
    g.urls += urls;
    for (const url of examples) if (g.examples.length < this.examples) g.examples.push(url);
  }

  /** The groups, most URLs first (then by state and reason). */
  list(): CrawlGap[] {
    return [...this.#groups.values()].sort((a, b) => b.urls - a.urls || a.state.localeCompare(b.state) || a.reason.localeCompare(b.reason));
  }
}

const packr = new Packr({ useRecords: false });

/** The reads the query API makes of a partition: a {@link PartitionView}, or one asked through a cluster (`remotePartitionView`). */
export type PartitionReads = Pick<PartitionView, 'closed' | 'page' | 'outlinks' | 'backlinks' | 'rawScores' | 'hostPages' | 'summary' | 'frontierStates' | 'crawlGaps' | 'hostIndex'>;

/** Names of the {@link PartitionReads} methods a cluster client may ask a partition's owner to run. */
export const PARTITION_READS = ['page', 'outlinks', 'backlinks', 'rawScores', 'hostPages', 'summary', 'frontierStates', 'crawlGaps', 'hostIndex'] as const;

/** One of {@link PARTITION_READS}. */
export type PartitionReadMethod = (typeof PARTITION_READS)[number];

/**
 * Read-only access to one partition's RocksDB store, handed out by the partition's reader
 * actor (`readerActor`) and valid for that actor's incarnation: after it stops, every call
 * rejects with StoreClosedError and the caller asks the reader for a new view. Reads run
 * concurrently on the store (RocksDB reads need no lock); each call reads the latest
 * committed state, so two calls can see different versions.
 */
export class PartitionView {
  #closed = false;

  constructor(readonly partition: PartitionId, readonly store: Store) {}

  /** Marks the view closed (the reader actor stops). */
  close(): void {
    this.#closed = true;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** The page record, frontier entry, rank and backlink count of `url` (canonical). */
  async page(url: string): Promise<StoredPage> {
    this.#check();
    const [[record, frontier, rank], backlinks] = await Promise.all([
      Promise.all([
        this.store.get(ColumnFamilies.pages, url),
        this.store.get(ColumnFamilies.frontier, url),
        this.store.get(ColumnFamilies.ranks, url),
      ]),
      this.#countBacklinks(url),
    ]);
    const xr = rank ? decodeFloat64s(rank) : undefined;
    return {
      backlinks,
      ...(record ? { record: packr.unpack(record) as PageRecord } : {}),
      ...(frontier ? { frontier: packr.unpack(frontier) as FrontierEntry } : {}),
      ...(xr ? { rank: { x: xr[0] ?? 0, r: xr[1] ?? 0 } } : {}),
    };
  }

  /** Outlinks of `url`, in target key order. */
  async outlinks(url: string): Promise<StoredLink[]> {
    return (await this.#links(ColumnFamilies.outlinks, url)).map(decodeLink);
  }

  /**
   * Backlinks of `url` (their sources), in source key order, each with its source's metric
   * as this partition knows it (`metric`): for a source on another partition, the copy of
   * its x kept in the backlink (backlinks/backlinkValue.ts); for a source on this partition,
   * its x + r from this partition's `ranks` (one multi-get); absent for a source of another
   * partition whose copy has not arrived. The link's features are not decoded: a page with
   * thousands of backlinks decodes only the ones it returns. A record holding a copy and no
   * link (the link was removed, or its add has not arrived) is not a backlink and is left out.
   */
  async backlinks(url: string): Promise<RawLink[]> {
    this.#check();
    const out: Array<{ url: string; value: Buffer; metric?: number }> = [];
    const uncopied: number[] = [];
    const skip = Buffer.byteLength(url, 'utf8') + 1;
    for await (const { keys, values } of this.store.chunks(ColumnFamilies.backlinks, { prefix: linkPrefix(url), chunkSize: 4096 })) {
      for (let i = 0; i < keys.length; i++) {
        const { link, metric } = decodeBacklink(values[i]!);
        if (!link) continue;
        if (metric === undefined) uncopied.push(out.length);
        out.push(metric === undefined ? { url: keys[i]!.toString('utf8', skip), value: link } : { url: keys[i]!.toString('utf8', skip), value: link, metric });
      }
    }
    if (uncopied.length > 0) {
      // Sources of this partition have their row here; others (copy not arrived) have none.
      const ranks = await this.store.multiGet(ColumnFamilies.ranks, uncopied.map((i) => out[i]!.url));
      ranks.forEach((v, k) => {
        if (v) out[uncopied[k]!]!.metric = scoreOf(v);
      });
    }
    return out;
  }

  /**
   * x + r of each URL (0 for a URL without a rank row, and for an alias: a permanent
   * redirect has no score of its own), in the order given.
   */
  async rawScores(urls: readonly string[]): Promise<number[]> {
    this.#check();
    if (urls.length === 0) return [];
    const [values, records] = await Promise.all([this.store.multiGet(ColumnFamilies.ranks, [...urls]), this.store.multiGet(ColumnFamilies.pages, [...urls])]);
    const unpack = (v: Buffer) => packr.unpack(v) as PageRecord;
    return values.map((v, i) => (records[i] && isAliasRecordValue(records[i]!, unpack) ? 0 : scoreOf(v)));
  }

  /**
   * The live pages of `host` (a host as `hostOf` gives it: lower case, `:port` when given) with
   * their best `limit`: those under `http://host/` and `https://host/`, read by prefix. When the
   * partition's hosts index counts more pages of the host than that (a graph file's URLs are
   * kept as written, so `http://WWW.Example.test/` is a page of host `www.example.test` under
   * no such prefix; found by a new user: `/v1/top/hosts` listed hosts that `/v1/hosts/HOST`
   * did not find), every live page of the partition is walked and taken by its `hostOf`.
   */
  async hostPages(host: string, limit: number): Promise<HostPages> {
    this.#check();
    const walk = async (prefixes: ReadonlyArray<string | undefined>, take: (url: string) => boolean): Promise<HostPages> => {
      let pages = 0;
      let sum = 0;
      const top = new TopK<RawScore>(limit, (a, b) => a.raw - b.raw || (a.url > b.url ? -1 : 1));
      for (const prefix of prefixes) {
        await this.#walkPages(prefix, (url, score) => {
          if (!take(url)) return;
          pages++;
          sum += score;
          top.offer({ url, raw: score });
        });
      }
      return { pages, raw: sum, top: top.sorted() };
    };
    const byPrefix = await walk([`http://${host}/`, `https://${host}/`], () => true);
    const indexed = await this.store.get(ColumnFamilies.hosts, host);
    const counted = indexed ? (packr.unpack(indexed) as HostRecord).pages : 0;
    if (counted <= byPrefix.pages) return byPrefix;
    return walk([undefined], (url) => {
      try {
        return hostOf(url) === host;
      } catch {
        return false;
      }
    });
  }

  /** The partition's hosts index (src/actors/metrics/hostIndex.ts), as of its last refresh. */
  hostIndex(): ReturnType<typeof readHostIndex> {
    this.#check();
    return readHostIndex(this.store);
  }

  /**
   * Totals and the best `limit` pages and `hostLimit` hosts (default `limit`) of the
   * partition: one walk of `pages` and `ranks` in step.
   */
  async summary(limit: number, hostLimit = limit): Promise<PartitionSummary> {
    this.#check();
    let total = 0;
    let pages = 0;
    const top = new TopK<RawScore>(limit, (a, b) => a.raw - b.raw || (a.url > b.url ? -1 : 1));
    const hosts = new Map<string, { pages: number; raw: number }>();
    await this.#walkPages(undefined, (url, score) => {
      total += score;
      pages++;
      top.offer({ url, raw: score });
      let host: string;
      try {
        host = hostOf(url);
      } catch {
        return;
      }
      const h = hosts.get(host);
      if (h) {
        h.pages++;
        h.raw += score;
      } else hosts.set(host, { pages: 1, raw: score });
    });
    const topHosts = new TopK<{ host: string; pages: number; raw: number }>(hostLimit, (a, b) => a.raw - b.raw || (a.host > b.host ? -1 : 1));
    for (const [host, h] of hosts) topHosts.offer({ host, ...h });
    return { total, pages, topPages: top.sorted(), topHosts: topHosts.sorted() };
  }

  /** Frontier entries by state (`queued`, `requested`, `fetched`, `blocked`, `out-of-scope`). */
  async frontierStates(): Promise<Record<string, number>> {
    this.#check();
    const out: Record<string, number> = {};
    for await (const { values } of this.store.chunks(ColumnFamilies.frontier, { chunkSize: 4096 })) {
      for (const v of values) {
        const state = (packr.unpack(v) as FrontierEntry).state ?? 'requested';
        out[state] = (out[state] ?? 0) + 1;
      }
    }
    return out;
  }

  /**
   * The frontier URLs a crawl has not fetched with an answer, grouped by state and reason:
   * `blocked` (robots.txt disallows them, or was unreachable: RFC 9309 section 2.3.1.4),
   * `out-of-scope`, `queued` and `requested` (not fetched yet), and `fetched` ones whose last
   * fetch failed (no answer, 429 or 5xx; a retry is scheduled). A crawl that ends quiet with
   * such URLs has left them for later; this says which and why.
   * @param examples most URLs listed per group (in key order)
   * @returns the groups, most URLs first
   * @throws StoreClosedError once the view is closed
   */
  async crawlGaps(examples = 3): Promise<CrawlGap[]> {
    this.#check();
    const tally = new GapTally(examples);
    for await (const { keys, values } of this.store.chunks(ColumnFamilies.frontier, { chunkSize: 4096 })) {
      values.forEach((v, i) => {
        const entry = packr.unpack(v) as FrontierEntry;
        const state = entry.state ?? 'requested';
        if (state === 'fetched' && !(entry.failures !== undefined && entry.failures > 0)) return;
        const reason = entry.reason ?? UNSTATED_GAP_REASONS[state] ?? state;
        tally.add(state, reason, 1, [keys[i]!.toString('utf8')]);
      });
    }
    return tally.list();
  }

  /** Calls `visit` for each live page (optionally under `prefix`) with its x + r (src/actors/partition/livePages.ts). */
  #walkPages(prefix: string | undefined, visit: (url: string, raw: number) => void): Promise<void> {
    return walkLivePages(this.store, visit, prefix ? { prefix } : {});
  }

  async #links(cf: string, url: string): Promise<RawLink[]> {
    this.#check();
    const out: RawLink[] = [];
    const skip = Buffer.byteLength(url, 'utf8') + 1;
    for await (const { keys, values } of this.store.chunks(cf, { prefix: linkPrefix(url), chunkSize: 4096 })) {
      for (let i = 0; i < keys.length; i++) out.push({ url: keys[i]!.toString('utf8', skip), value: values[i]! });
    }
    return out;
  }

  /** Backlinks of `url`: records with a link (a copy without one is not counted; see `backlinks`). */
  async #countBacklinks(url: string): Promise<number> {
    let n = 0;
    for await (const { values } of this.store.chunks(ColumnFamilies.backlinks, { prefix: linkPrefix(url), chunkSize: 8192 })) {
      for (const v of values) if (decodeBacklink(v).link) n++;
    }
    return n;
  }

  #check(): void {
    if (this.#closed) throw new StoreClosedError('partition view closed: its reader restarted; ask for a new view');
  }
}


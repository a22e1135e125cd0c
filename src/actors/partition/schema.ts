import type { ColumnFamilyOptions } from '../../storage/index.js';
import { float64Add, int64Add, record, ttl } from '../../index.js';

/**
 * The column families of one partition's RocksDB store and how their keys and values are
 * encoded. Keys of `pages`, `outlinks`, `ranks` start with the page URL (UTF-8, as given),
 * so their iterators walk pages in the same order: the metric actor traverses them in step
 * without random reads. A 0x00 byte separates the two URLs of a link key; URLs never hold
 * one, and it sorts before every other byte, so a page's links come right after the page.
 * `outbox` and `meta` hold the framework's stream bookkeeping (`StreamOutbox` rows, seq
 * big-endian; `StreamMarks` marks and outbox sequences, int64 LE) under the framework's keys,
 * in these two families (streams.ts).
 *
 * | family    | key                  | value                                          | merge       |
 * |-----------|----------------------|------------------------------------------------|-------------|
 * | pages     | url                  | msgpack PageRecord                             | (put)       |
 * | outlinks  | source 0x00 target   | msgpack LinkFeatures                           | (put)       |
 * | backlinks | target 0x00 source   | record {v: link value, m: source's x copy}     | record lww  |
 * | ranks     | url                  | float64 LE [x, r]: rank estimate, residual     | float64 add |
 * | pending   | url                  | empty: discovered, not yet looked at by policy | (put)       |
 * | frontier  | url                  | msgpack FrontierEntry                          | (put)       |
 * | robots    | origin               | msgpack RobotsRecord (robots.txt cache)        | (put), TTL  |
 * | gcLog     | removedAt (BE) url   | msgpack GcRecord: what the GC removed and why  | (put), TTL  |
 * | counters  | name                 | int64 LE                                       | int64 add   |
 * | rounds    | round (uint32 BE)    | float64 LE [messages applied, mass applied]    | float64 add |
 * | outbox    | owner|topic 0x00 seq | payload bytes to publish                       | (put)       |
 * | hosts     | host                 | msgpack HostRecord: pages, sum and max score   | (put)       |
 * | meta      | name                 | applied marks, outbox sequences, shape, rounds | (put)       |
 */
export const ColumnFamilies = Object.freeze({
  pages: 'pages',
  outlinks: 'outlinks',
  backlinks: 'backlinks',
  ranks: 'ranks',
  pending: 'pending',
  frontier: 'frontier',
  counters: 'counters',
  rounds: 'rounds',
  outbox: 'outbox',
  meta: 'meta',
  robots: 'robots',
  gcLog: 'gcLog',
  hosts: 'hosts',
} as const);

/**
 * Cached robots.txt records nobody read for this long are dropped at compaction (the crawl
 * policy refetches a robots.txt after a day, so a record this old belongs to a host that is
 * no longer crawled). The filter compares `fetchedAt` with the wall clock.
 */
export const ROBOTS_RETENTION_MS = 30 * 24 * 3600 * 1000;

/** GC records are kept this long (compared with `removedAt`, wall clock), then compacted away. */
export const GC_LOG_RETENTION_MS = 90 * 24 * 3600 * 1000;

/**
 * Largest memtable of `ranks` (`ColumnFamilyOptions.memtableBytes`): 2 MiB instead of the
 * budget's share (16 MiB with the web index's default budget for 16 partitions). Each push
 * merges [dx, dr] into every page it changed, so a partition's `ranks` memtable held tens of
 * entries per page, which every insert's skip-list search passes (with cache misses); a
 * flush folds them into one value per page. On the first 60,000 pages of cnr-2000 (16
 * partitions, 1e-6), side by side with 16 MiB: the libuv pool threads' CPU in the converge
 * 7.16 s against 7.58 s, the process's 15.44 s against 16.26 s (-5%); 0.5 and 1 MiB measured
 * as 2 MiB (docs/ARCHITECTURE.md, "Where the converge's extra time goes").
 */
export const RANKS_MEMTABLE_BYTES = 2 * 2 ** 20;

/** Options of every column family, for `Store.open`. */
export function partitionColumnFamilies(): Record<string, ColumnFamilyOptions> {
  return {
    [ColumnFamilies.pages]: {},
    // Written a page (or a message's run of link operations) at a time in key order: insert
    // hints (so no range deletes; the GC deletes key by key).
    [ColumnFamilies.outlinks]: { memtableInsertHint: true },
    // Records (backlinks/backlinkValue.ts): the link's fields from the backlinks actor and
    // the copy of the source's metric from the metric actors merge without a read.
    [ColumnFamilies.backlinks]: { mergeOperator: record({ v: 'lww', m: 'lww' }), memtableInsertHint: true },
    // A push merges its pages in key order: insert hints spare most memtable key
    // comparisons (ranks therefore takes no range deletes; the GC deletes key by key).
    // Every push merges [dx, dr] into each page it changed: small memtables (RANKS_MEMTABLE_BYTES).
    [ColumnFamilies.ranks]: { mergeOperator: float64Add(), memtableInsertHint: true, memtableBytes: RANKS_MEMTABLE_BYTES },
    [ColumnFamilies.pending]: {},
    [ColumnFamilies.frontier]: {},
    [ColumnFamilies.counters]: { mergeOperator: int64Add() },
    [ColumnFamilies.rounds]: { mergeOperator: float64Add() },
    [ColumnFamilies.outbox]: {},
    [ColumnFamilies.meta]: {},
    [ColumnFamilies.robots]: { compactionFilter: ttl({ field: 'fetchedAt', ttlMs: ROBOTS_RETENTION_MS }) },
    [ColumnFamilies.gcLog]: { compactionFilter: ttl({ field: 'removedAt', ttlMs: GC_LOG_RETENTION_MS }) },
    [ColumnFamilies.hosts]: {},
  };
}

/**
 * One host in the `hosts` index (src/actors/metrics/hostIndex.ts): its live pages and their
 * unnormalised scores x + r, as of the index's last refresh. Normalised scores divide by
 * the index's total (`HostIndexTotal`, summed over partitions).
 */
export interface HostRecord {
  readonly pages: number;
  /** Sum of the pages' scores: the host's authority. */
  readonly sum: number;
  /** Highest page score, and that page. */
  readonly max: number;
  readonly best: string;
}

/** `meta` key of the hosts index's partition totals (msgpack HostIndexTotal). */
export const HOST_INDEX_TOTAL = 'hosts-total';

/** Totals of one partition's hosts index. */
export interface HostIndexTotal {
  /** Sum of the scores of every live page of the partition. */
  readonly total: number;
  readonly pages: number;
  readonly hosts: number;
  /** Wall-clock ms of the refresh. */
  readonly at: number;
  /**
   * Host records the refresh wrote: every host for a full refresh (a walk of every live
   * page), only those whose pages' scores moved since the last one for a partial one
   * (src/actors/metrics/hostIndex.ts, HostIndexMemo). Absent in totals stored before it was counted.
   */
  readonly rewritten?: number;
}

/** Names in the `counters` family. */
export const Counters = Object.freeze({
  pages: 'pages',
  outlinks: 'outlinks',
  backlinks: 'backlinks',
  /** Pages stored with only their first `maxOutlinksPerPage` outlinks (the indexer's cap). */
  outlinksTruncated: 'outlinksTruncated',
} as const);

/** Stored per page in `pages`. */
export interface PageRecord {
  readonly url: string;
  /** HTTP status; 0 when the fetch failed before a response. */
  readonly status: number;
  /** ms since the epoch. */
  readonly fetchedAt: number;
  readonly contentType?: string;
  /** FNV-1a of the body, hex; absent without a body. */
  readonly contentHash?: string;
  readonly outlinkCount: number;
  /** Why the page has no content (network error, oversized, malformed, ...), or what was left out of it (outlinks truncated). */
  readonly error?: string;
  /** Distinct outlinks the page named when more than the indexer's `maxOutlinksPerPage` (then `outlinkCount` is what was kept). */
  readonly outlinksFound?: number;
  /** 404/410 answers in a row. */
  readonly missCount?: number;
  /** The page left the graph (gone `deleteAfter` times); the record is its tombstone. */
  readonly deleted?: boolean;
  /**
   * A permanent redirect (301, 308) stored with its target as one outlink: the URL is an
   * alias of this target in the link graph, with no teleport and no score of its own
   * (`src/actors/partition/redirects.ts`). Absent for any other page.
   */
  readonly aliasOf?: string;
}

/** Stored per URL in `frontier`: the crawl policy's view of it. */
export interface FrontierEntry {
  /** ms since the epoch when the last crawl request was sent; 0 when never. */
  readonly requestedAt: number;
  /**
   * Where the URL is (absent in rows written before issue 7: read as `requested`):
   * - `queued`: waiting for its host's turn (politeness, robots.txt, budget);
   * - `requested`: a crawl request is out, no result yet;
   * - `fetched`: a result came back; `dueAt` is the next crawl;
   * - `blocked`: robots.txt disallows it (`reason`); looked at again at `dueAt`;
   * - `out-of-scope`: its host is not on the crawl's allow-list; never requested.
   */
  readonly state?: FrontierState;
  /** ms since the epoch when the URL was first seen. */
  readonly discoveredAt?: number;
  /** ms since the epoch when the next crawl is due (fetched and blocked entries). */
  readonly dueAt?: number;
  /** Score estimate when queued (unnormalised rank x + r; seeds get `SEED_PRIORITY`). */
  readonly priority?: number;
  /** ms since the epoch of the last result, its status (0: no response) and error. */
  readonly fetchedAt?: number;
  readonly status?: number;
  /** Results received for this URL. */
  readonly fetches?: number;
  /** Failed results in a row (status 0, 429 or 5xx): the retry delay doubles with each. */
  readonly failures?: number;
  /** Why the URL is blocked or out of scope, or why its last fetch failed. */
  readonly reason?: string;
}

/** The states of a frontier entry; see `FrontierEntry.state`. */
export type FrontierState = 'queued' | 'requested' | 'fetched' | 'blocked' | 'out-of-scope';

/** Stored per origin (`http://host[:port]`) in `robots`: the cached robots.txt. */
export interface RobotsRecord {
  readonly origin: string;
  /** ms since the epoch. */
  readonly fetchedAt: number;
  /** HTTP status of the robots.txt answer; 0 when there was none. */
  readonly status: number;
  /** The robots.txt text (2xx only). */
  readonly body?: string;
  readonly error?: string;
}

/** Stored in `gcLog` for every page the garbage collector removed. */
export interface GcRecord {
  readonly url: string;
  /** ms since the epoch. */
  readonly removedAt: number;
  /** `not-seen` (older than the GC's max age) or `host-dropped`. */
  readonly reason: 'not-seen' | 'host-dropped';
  /** The page's `fetchedAt` when it was removed. */
  readonly lastFetchedAt: number;
  /** Outlinks removed with it (link remove operations sent). */
  readonly outlinks: number;
}

const SEP = 0;
const utf8d = new TextDecoder();

/** `a 0x00 b` as bytes: the key of a link in `outlinks` (a = source) or `backlinks` (a = target). */
export function linkKey(a: string, b: string): Buffer {
  const na = Buffer.byteLength(a, 'utf8');
  const key = Buffer.allocUnsafe(na + 1 + Buffer.byteLength(b, 'utf8'));
  key.write(a, 0, 'utf8');
  key[na] = SEP;
  key.write(b, na + 1, 'utf8');
  return key;
}

/** Splits a link key into its two URLs. @throws RangeError when it has no 0x00. */
export function splitLinkKey(key: Uint8Array): [string, string] {
  const i = key.indexOf(SEP);
  if (i < 0) throw new RangeError('link key without separator');
  return [utf8d.decode(key.subarray(0, i)), utf8d.decode(key.subarray(i + 1))];
}

/** The prefix `url 0x00` under which all links of `url` sit. */
export function linkPrefix(url: string): Buffer {
  return Buffer.concat([Buffer.from(url, 'utf8'), Buffer.of(SEP)]);
}

/** Key of a round in `rounds`: uint32 big-endian. */
export function roundKey(round: number): Buffer {
  const key = Buffer.allocUnsafe(4);
  key.writeUInt32BE(round, 0);
  return key;
}

import { msgpackCodec, type Codec } from '../runtime/codec.js';

/**
 * The message types of the four namespaces, one codec each. Each broker message is a batch:
 * it carries one `(producer, sequence)` pair for exactly-once effects (see broker.ts).
 */

/** Features of one link, known at index time; the reasonable surfer weighs links by them. */
export interface LinkFeatures {
  /** Anchor text, whitespace collapsed, at most 256 characters. */
  readonly anchor: string;
  /** Position of the link among the page's links, in [0, 1): 0 is the first link. */
  readonly position: number;
  /** rel tokens that change a link's weight: nofollow, ugc, sponsored. */
  readonly rel: readonly string[];
  /** True when source and target have the same host. */
  readonly sameHost: boolean;
  /** Where the link sits: inside `<nav>`, inside `<footer>`, or the body. */
  readonly region: 'nav' | 'footer' | 'body';
}

/** An outlink found on a page: target URL (canonical) and features. */
export interface Outlink {
  readonly target: string;
  readonly features: LinkFeatures;
}

/** `crawl-requests/<p>`: URLs of partition p's hosts to fetch. */
export interface CrawlRequestBatch {
  readonly type: 'crawl-requests';
  readonly urls: readonly string[];
}

/**
 * `fetches/<p>`: what a crawler got for one URL. `body` is set for HTML pages that answered
 * 2xx; `outlinks` is set instead when the page comes from a graph file (`shardflow rank`),
 * which has links but no HTML.
 */
export interface FetchResult {
  readonly url: string;
  /** HTTP status, or 0 when the fetch failed before a response (`error` says why). */
  readonly status: number;
  /** ms since the epoch. */
  readonly fetchedAt: number;
  readonly contentType?: string;
  readonly body?: string;
  readonly outlinks?: readonly Outlink[];
  /** Why the page has no content: network error, oversized body, invalid URL, ... */
  readonly error?: string;
}

/** A batch of fetch results for partition p. */
export interface FetchBatch {
  readonly type: 'fetches';
  readonly results: readonly FetchResult[];
}

/** One change to the link graph, sent to the partition that owns `target`'s host. */
export type LinkOp =
  | { readonly op: 'add'; readonly source: string; readonly target: string; readonly features: LinkFeatures }
  | { readonly op: 'update'; readonly source: string; readonly target: string; readonly features: LinkFeatures }
  | { readonly op: 'remove'; readonly source: string; readonly target: string };

/** `links/<q>`: link operations whose targets live on partition q. */
export interface LinkOpBatch {
  readonly type: 'links';
  readonly ops: readonly LinkOp[];
}

/**
 * `metrics/<q>`: rank contributions to pages of partition q, summed per target by the
 * sender (the combiner). `deltas[i]` is added to the residual of the page whose key (its
 * URL, UTF-8) is `keys[i]`: keys travel as msgpack binary so the receiver merges them into
 * RocksDB without decoding and re-encoding strings.
 */
export interface ContributionBatch {
  readonly type: 'metrics';
  /** Round of the metric computation that produced it. */
  readonly round: number;
  readonly keys: readonly Uint8Array[];
  readonly deltas: readonly number[];
}

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null;
const isStrArray = (v: unknown): v is string[] => Array.isArray(v) && v.every((x) => typeof x === 'string');

/** Codec of `crawl-requests/<p>` batches. */
export const crawlRequestCodec: Codec<CrawlRequestBatch> = msgpackCodec('crawl-requests', (v): v is CrawlRequestBatch =>
  isObj(v) && v.type === 'crawl-requests' && isStrArray(v.urls));

/** Codec of `fetches/<p>` batches. */
export const fetchCodec: Codec<FetchBatch> = msgpackCodec('fetches', (v): v is FetchBatch =>
  isObj(v) && v.type === 'fetches' && Array.isArray(v.results) &&
  v.results.every((r) => isObj(r) && typeof r.url === 'string' && typeof r.status === 'number' && typeof r.fetchedAt === 'number'));

/** Codec of `links/<q>` batches. */
export const linkOpCodec: Codec<LinkOpBatch> = msgpackCodec('links', (v): v is LinkOpBatch =>
  isObj(v) && v.type === 'links' && Array.isArray(v.ops) &&
  v.ops.every((o) => isObj(o) && (o.op === 'add' || o.op === 'update' || o.op === 'remove') &&
    typeof o.source === 'string' && typeof o.target === 'string' && (o.op === 'remove' || isObj(o.features))));

/** Codec of `metrics/<q>` batches. */
export const contributionCodec: Codec<ContributionBatch> = msgpackCodec('metrics', (v): v is ContributionBatch =>
  isObj(v) && v.type === 'metrics' && typeof v.round === 'number' && Array.isArray(v.keys) && v.keys.every((k) => k instanceof Uint8Array) &&
  Array.isArray(v.deltas) && v.deltas.length === v.keys.length && v.deltas.every((d) => typeof d === 'number'));

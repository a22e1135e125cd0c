import { gatherKeys, type PackedKeys } from '../storage/index.js';
import { msgpackCodec, UndecodableMessageError, type Codec } from '../index.js';

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
  /**
   * True when source and target are of the same site (registrable domain, `siteOf`):
   * `a.example.com` and `b.example.com`, not `a.github.io` and `b.github.io`. Absent in
   * links stored before it was recorded and in graph files: unknown.
   */
  readonly sameSite?: boolean;
  /** Where the link sits: inside `<nav>`, inside `<footer>`, or the body. */
  readonly region: 'nav' | 'footer' | 'body';
  /**
   * The later occurrences of a link to the same target on the same page, in document order
   * (absent: the link occurs once). The fields above are the first occurrence's; the edge's
   * weight is the sum of its occurrences' weights (`edgeWeight`).
   */
  readonly repeats?: readonly LinkOccurrence[];
  /** True when the target is the page itself (after canonicalisation). Absent: false. */
  readonly selfLink?: boolean;
  /**
   * The HTTP status (301, 302, 303, 307, 308) when the link is a redirect's `Location`: set
   * by the fetcher only, never from HTML. A page whose one outlink has it passes its rank on
   * undamped, and a 301/308 makes the page an alias of the target
   * (`src/actors/partition/redirects.ts`). Absent: an ordinary link (or a redirect stored
   * before this field).
   */
  readonly redirect?: number;
}

/** One more occurrence of a link on a page: the per-occurrence part of `LinkFeatures`. */
export interface LinkOccurrence {
  readonly anchor: string;
  readonly position: number;
  readonly rel: readonly string[];
  readonly region: LinkFeatures['region'];
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
  /**
   * A graph file's URL named only as a link target (not in its pages file, no links of its
   * own): stored as a page without outlinks when the partition holds no page of that URL; a
   * page already stored (live or deleted) is left as it is, its outlinks kept (`rank --update`).
   */
  readonly ifAbsent?: true;
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
 * URL, UTF-8) is key i of `keys`. Keys travel packed (one byte string and the end offset
 * of each key) and deltas as one float64 array, so that a message of 4096 contributions is
 * three byte strings on the wire, and the receiver merges them into RocksDB in one native
 * call without one JS object per key.
 */
export interface ContributionBatch {
  readonly type: 'metrics';
  /** Round of the metric computation that produced it. */
  readonly round: number;
  readonly keys: PackedKeys;
  readonly deltas: Float64Array;
  /**
   * Metric rounds: the sender's target dictionary (AdjacencyCache.dictionary) and the index
   * it gives each key, which always names the same key; lets the receiver find its slot for
   * a page without hashing the key again. Absent on corrections of graph changes.
   */
  readonly source?: { readonly dictionary: string; readonly indexes: Uint32Array };
  /**
   * Copies of source pages' metrics for backlinks of partition q (backlinks/backlinkValue.ts),
   * in runs, one per source page: run j gives `values[j]` (source j's x) to the backlinks
   * `target 0x00 source_j` (their `backlinks` keys) of the next `runs[j]` keys of
   * `targets`, whose pages are on partition q. Each key travels once per run, not twice
   * per copy. Absent when the message carries none.
   */
  readonly copies?: CopyRuns;
}

/** The `copies` of a ContributionBatch: runs of backlinks that share their source and its x. */
export interface CopyRuns {
  /** The source page of each run (URL, UTF-8). */
  readonly sources: PackedKeys;
  /** The source's x (unnormalised rank estimate) of each run. */
  readonly values: Float64Array;
  /** How many consecutive `targets` each run takes (they sum to the targets' count). */
  readonly runs: Uint32Array;
  /**
   * The target pages (URLs, UTF-8), run after run. Keys given with `starts` that share
   * their start and end (picked out of one buffer) are one key: it travels once.
   */
  readonly targets: PackedKeys;
}

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null;
const isStrArray = (v: unknown): v is string[] => Array.isArray(v) && v.every((x) => typeof x === 'string');

/** Codec of `crawl-requests/<p>` batches. */
export const crawlRequestCodec: Codec<CrawlRequestBatch> = msgpackCodec('crawl-requests', (v): v is CrawlRequestBatch =>
  isObj(v) && v.type === 'crawl-requests' && isStrArray(v.urls));

/**
 * A batch's links on the wire: each distinct `LinkFeatures` object (by identity) once, in
 * `features`, and each link its index in it. Links of graph files share one object per
 * same-host flag (`graphPage`), so a batch of 64 pages carries two instead of one per link,
 * and the decoded links share them again, which `encodeLinkValue` looks up by identity.
 * Crawled links have an object each: the table is then as long as the links.
 */
class FeaturesTable {
  readonly features: LinkFeatures[] = [];
  readonly #index = new Map<LinkFeatures, number>();

  indexOf(f: LinkFeatures): number {
    let i = this.#index.get(f);
    if (i === undefined) {
      i = this.features.length;
      this.features.push(f);
      this.#index.set(f, i);
    }
    return i;
  }
}

/**
 * Entry `index` of a batch's features table.
 * @throws UndecodableMessageError (naming `where`) when `index` is not an index of the table
 */
function tableFeatures(features: readonly LinkFeatures[], index: unknown, where: string): LinkFeatures {
  const f = Number.isInteger(index) ? features[index as number] : undefined;
  if (f === undefined) throw new UndecodableMessageError(`${where} has feature index ${String(index)} of ${features.length}`);
  return f;
}

/**
 * A fetch result on the wire: its outlinks as targets and feature indexes (FeaturesTable),
 * either in arrays of its own (`outlinkTargets`, `outlinkFeatureOf`: the form of batches
 * written before the joined form, and of batches with a URL holding a 0x00) or as a count
 * of the batch's joined columns (`outlinkCount`: FetchBatchWire).
 */
type FetchResultWire = Omit<FetchResult, 'outlinks'> & { readonly outlinkTargets?: readonly string[]; readonly outlinkFeatureOf?: readonly number[]; readonly outlinkCount?: number };

interface FetchBatchWire {
  readonly type: 'fetches';
  readonly results: readonly (FetchResult | FetchResultWire)[];
  /** The features table of the results' outlinks (absent in batches written before it: each result then has `outlinks`). */
  readonly features?: readonly LinkFeatures[];
  /**
   * The joined form: the targets of every result's outlinks, in order, joined by 0x00
   * (`joinUrls`), each result taking the next `outlinkCount`; one msgpack string for the
   * batch instead of one per link (as `links/<q>` batches do: LinkOpBatchJoined).
   */
  readonly targetsJoined?: string;
  /** The joined form: index in `features` per outlink (uint32 LE), in the order of `targetsJoined`. */
  readonly featureOfBytes?: Uint8Array;
}

const fetchWire = msgpackCodec('fetches', (v): v is FetchBatchWire =>
  isObj(v) && v.type === 'fetches' && Array.isArray(v.results) && (v.features === undefined || (Array.isArray(v.features) && v.features.every(isObj))) &&
  (v.targetsJoined === undefined ? v.featureOfBytes === undefined : typeof v.targetsJoined === 'string' && v.featureOfBytes instanceof Uint8Array && v.features !== undefined) &&
  v.results.every((r) => isObj(r) && typeof r.url === 'string' && typeof r.status === 'number' && typeof r.fetchedAt === 'number'));

/**
 * Codec of `fetches/<p>` batches. The outlinks travel as a features table and per link its
 * target and index (FeaturesTable), in the batch's joined columns (FetchBatchWire), or in
 * arrays per result when a URL holds a 0x00; batches of the earlier forms (arrays per
 * result, `outlinks` objects) still decode.
 * @throws UndecodableMessageError (decode) when a result's targets and feature indexes differ
 *   in length, the joined columns hold another number of links than the results' counts,
 *   or an index is not one of the table's.
 */
export const fetchCodec: Codec<FetchBatch> = {
  encode: (value) => {
    const table = new FeaturesTable();
    const targets: string[] = [];
    const featureOf: number[] = [];
    const results = value.results.map((r): FetchResult | FetchResultWire => {
      if (r.outlinks === undefined) return r;
      const { outlinks, ...rest } = r;
      for (const o of outlinks) {
        targets.push(o.target);
        featureOf.push(table.indexOf(o.features));
      }
      return { ...rest, outlinkCount: outlinks.length };
    });
    const targetsJoined = joinUrls(targets);
    if (targetsJoined !== undefined) return fetchWire.encode({ type: 'fetches', results, features: table.features, targetsJoined, featureOfBytes: wireBytes(Uint32Array.from(featureOf)) });
    // A URL with a 0x00: arrays per result.
    let next = 0;
    const arrays = results.map((r): FetchResult | FetchResultWire => {
      if (!('outlinkCount' in r) || r.outlinkCount === undefined) return r;
      const { outlinkCount: n, ...rest } = r;
      next += n;
      return { ...rest, outlinkTargets: targets.slice(next - n, next), outlinkFeatureOf: featureOf.slice(next - n, next) };
    });
    return fetchWire.encode({ type: 'fetches', results: arrays, features: table.features });
  },
  decode: (bytes) => {
    const wire = fetchWire.decode(bytes);
    const features = wire.features;
    if (features === undefined) return wire as FetchBatch;
    if (wire.targetsJoined !== undefined) return decodeJoinedFetches(wire, features);
    const results = wire.results.map((r): FetchResult => {
      if (!('outlinkTargets' in r) && !('outlinkFeatureOf' in r)) return r as FetchResult;
      const { outlinkTargets: targets, outlinkFeatureOf: of, ...rest } = r as FetchResultWire;
      if (!Array.isArray(targets) || !Array.isArray(of) || targets.length !== of.length) {
        throw new UndecodableMessageError(`fetches: ${r.url}: outlinkTargets and outlinkFeatureOf must be arrays of one length`);
      }
      const outlinks = new Array<Outlink>(targets.length);
      for (let i = 0; i < targets.length; i++) {
        const target: unknown = targets[i];
        if (typeof target !== 'string') throw new UndecodableMessageError(`fetches: ${r.url}: outlink ${i} has no target string`);
        outlinks[i] = { target, features: tableFeatures(features, of[i], `fetches: ${r.url}: outlink ${i}`) };
      }
      return { ...rest, outlinks };
    });
    return { type: 'fetches', results };
  },
  // (the guard of the wire form accepts both forms: a FetchBatch is the earlier one)
  check: fetchWire.check as Codec<FetchBatch>['check'],
};

/** The fetch results of a batch in the joined form. @throws UndecodableMessageError as `fetchCodec.decode` says */
function decodeJoinedFetches(wire: FetchBatchWire, features: readonly LinkFeatures[]): FetchBatch {
  let total = 0;
  for (const r of wire.results) {
    const n = (r as FetchResultWire).outlinkCount;
    if (n === undefined) continue;
    if (!Number.isInteger(n) || n < 0) throw new UndecodableMessageError(`fetches: ${r.url}: outlinkCount ${String(n)} is not a count`);
    total += n;
  }
  const targets = splitUrls(wire.targetsJoined!, total, 'fetches: targetsJoined');
  const featureOf = fromWire(Uint32Array, wire.featureOfBytes!, 'featureOfBytes', 'fetches');
  if (featureOf.length !== total) throw new UndecodableMessageError(`fetches: featureOfBytes holds ${featureOf.length} indexes for ${total} outlinks`);
  let next = 0;
  const results = wire.results.map((r): FetchResult => {
    if (!('outlinkCount' in r) || r.outlinkCount === undefined) return r as FetchResult;
    const { outlinkCount: n, ...rest } = r;
    const outlinks = new Array<Outlink>(n);
    for (let i = 0; i < n; i++, next++) outlinks[i] = { target: targets[next]!, features: tableFeatures(features, featureOf[next], `fetches: ${r.url}: outlink ${i}`) };
    return { ...rest, outlinks };
  });
  return { type: 'fetches', results };
}

/**
 * Link operations on the wire, the earlier column form: sources once per run, features by
 * table index (FeaturesTable), one msgpack string or number per operation and column.
 * Still decoded (outbox rows and broker messages written by earlier versions).
 */
interface LinkOpBatchWire {
  readonly type: 'links';
  /** 0 add, 1 update, 2 remove, per operation. */
  readonly kinds: readonly number[];
  /** Sources, one per run of operations with the same source. */
  readonly sources: readonly string[];
  /** Index in `sources` per operation. */
  readonly sourceOf: readonly number[];
  readonly targets: readonly string[];
  readonly features: readonly LinkFeatures[];
  /** Index in `features` per operation, -1 for a remove. */
  readonly featureOf: readonly number[];
}

/**
 * Link operations on the wire, the joined form (what `linkOpCodec` writes): the URL columns
 * as one string each, joined by 0x00 (no URL of the batch holds one: `joinUrls`), and the
 * number columns as binary (little-endian). A batch of 512 operations is then six msgpack
 * values instead of about 2,000: msgpackr writes a long string with one native UTF-8 encoding,
 * where it encodes each short string in a JS loop (8% of a cnr-2000 load's main thread, with
 * the fetches' targets), and the receiver splits it with one native `split`.
 */
interface LinkOpBatchJoined {
  readonly type: 'links';
  /** 0 add, 1 update, 2 remove, one byte per operation. */
  readonly kindBytes: Uint8Array;
  /** The sources of the runs of operations with the same source, joined by 0x00. */
  readonly sourcesJoined: string;
  /** Operations per run (uint32 LE), as many as sources; they sum to the operations. */
  readonly sourceRuns: Uint8Array;
  /** The targets, one per operation, joined by 0x00. */
  readonly targetsJoined: string;
  readonly features: readonly LinkFeatures[];
  /** Index in `features` per operation (int32 LE), -1 for a remove. */
  readonly featureOfBytes: Uint8Array;
}

const OP_KINDS = ['add', 'update', 'remove'] as const;

const isLinkOpObjects = (v: unknown): v is LinkOpBatch =>
  isObj(v) && v.type === 'links' && Array.isArray(v.ops) &&
  v.ops.every((o) => isObj(o) && (o.op === 'add' || o.op === 'update' || o.op === 'remove') &&
    typeof o.source === 'string' && typeof o.target === 'string' && (o.op === 'remove' || isObj(o.features)));

const isLinkOpColumns = (v: unknown): v is LinkOpBatchWire =>
  isObj(v) && v.type === 'links' && Array.isArray(v.kinds) && isStrArray(v.sources) && Array.isArray(v.sourceOf) && isStrArray(v.targets) &&
  Array.isArray(v.features) && v.features.every(isObj) && Array.isArray(v.featureOf);

const isLinkOpJoined = (v: unknown): v is LinkOpBatchJoined =>
  isObj(v) && v.type === 'links' && v.kindBytes instanceof Uint8Array && typeof v.sourcesJoined === 'string' && v.sourceRuns instanceof Uint8Array &&
  typeof v.targetsJoined === 'string' && Array.isArray(v.features) && v.features.every(isObj) && v.featureOfBytes instanceof Uint8Array;

const linkOpWire = msgpackCodec('links', (v): v is LinkOpBatch | LinkOpBatchWire | LinkOpBatchJoined => isLinkOpJoined(v) || isLinkOpObjects(v) || isLinkOpColumns(v));
/** What a sender of `links/<q>` batches gives: `LinkOp` objects (their `check`). */
const linkOpObjects = msgpackCodec('links', isLinkOpObjects);

/**
 * `urls` joined by 0x00, or undefined when one of them holds a 0x00 (it would split): the
 * caller then sends them as an array. Graph files and WHATWG URL serialisation (which
 * percent-encodes control characters) give no such URL; a link key (`linkKey`) could not
 * hold one either.
 */
function joinUrls(urls: readonly string[]): string | undefined {
  for (let i = 0; i < urls.length; i++) if (urls[i]!.includes('\u0000')) return undefined;
  return urls.join('\u0000');
}

/**
 * The `count` strings joined by `joinUrls`.
 * @throws UndecodableMessageError (naming `what`) when the string holds another number of them
 */
function splitUrls(joined: string, count: number, what: string): string[] {
  const parts = count === 0 ? [] : joined.split('\u0000');
  if (parts.length !== count || (count === 0 && joined.length > 0)) throw new UndecodableMessageError(`${what}: ${count} URLs expected, the joined string holds ${count === 0 ? 'some' : parts.length}`);
  return parts;
}

/**
 * Codec of `links/<q>` batches: the joined form on the wire (LinkOpBatchJoined), or the
 * column form (LinkOpBatchWire) when a URL holds a 0x00; decoded to `LinkOp` objects;
 * batches of the earlier forms (column form, `ops` objects) still decode.
 * @throws UndecodableMessageError (decode) when the columns differ in length, a joined
 *   string holds another number of URLs, or a kind, source index, run or feature index is
 *   out of range.
 */
export const linkOpCodec: Codec<LinkOpBatch> = {
  encode: (value) => {
    const n = value.ops.length;
    const kinds = new Uint8Array(n);
    const sources: string[] = [];
    const runs: number[] = [];
    const sourceOf = new Array<number>(n);
    const targets = new Array<string>(n);
    const featureOf = new Int32Array(n);
    const table = new FeaturesTable();
    for (let i = 0; i < n; i++) {
      const o = value.ops[i]!;
      if (sources.length === 0 || sources[sources.length - 1] !== o.source) {
        sources.push(o.source);
        runs.push(0);
      }
      runs[runs.length - 1]!++;
      sourceOf[i] = sources.length - 1;
      targets[i] = o.target;
      kinds[i] = o.op === 'add' ? 0 : o.op === 'update' ? 1 : 2;
      featureOf[i] = o.op === 'remove' ? -1 : table.indexOf(o.features);
    }
    const sourcesJoined = joinUrls(sources);
    const targetsJoined = sourcesJoined === undefined ? undefined : joinUrls(targets);
    if (sourcesJoined === undefined || targetsJoined === undefined) {
      return linkOpWire.encode({ type: 'links', kinds: [...kinds], sources, sourceOf, targets, features: table.features, featureOf: [...featureOf] });
    }
    return linkOpWire.encode({ type: 'links', kindBytes: kinds, sourcesJoined, sourceRuns: wireBytes(Uint32Array.from(runs)), targetsJoined, features: table.features, featureOfBytes: wireBytes(featureOf) });
  },
  decode: (bytes) => {
    const wire = linkOpWire.decode(bytes);
    if ('ops' in wire) return wire;
    if ('kindBytes' in wire) return decodeJoinedLinkOps(wire);
    const { kinds, sources, sourceOf, targets, features, featureOf } = wire;
    const n = kinds.length;
    if (sourceOf.length !== n || targets.length !== n || featureOf.length !== n) throw new UndecodableMessageError('links: kinds, sourceOf, targets and featureOf differ in length');
    const ops = new Array<LinkOp>(n);
    for (let i = 0; i < n; i++) {
      const op = Number.isInteger(kinds[i]) ? OP_KINDS[kinds[i]!] : undefined;
      const source = sources[sourceOf[i]!];
      if (op === undefined || typeof source !== 'string' || !Number.isInteger(sourceOf[i])) throw new UndecodableMessageError(`links: operation ${i} has kind ${String(kinds[i])} (0, 1 or 2) and source index ${String(sourceOf[i])} of ${sources.length}`);
      if (op === 'remove') {
        ops[i] = { op, source, target: targets[i]! };
        continue;
      }
      ops[i] = { op, source, target: targets[i]!, features: tableFeatures(features, featureOf[i], `links: operation ${i}`) };
    }
    return { type: 'links', ops };
  },
  check: linkOpObjects.check,
};

/** `LinkOp` objects of a batch in the joined form. @throws UndecodableMessageError as `linkOpCodec.decode` says */
function decodeJoinedLinkOps(wire: LinkOpBatchJoined): LinkOpBatch {
  const n = wire.kindBytes.length;
  const runs = fromWire(Uint32Array, wire.sourceRuns, 'sourceRuns', 'links');
  const featureOf = fromWire(Int32Array, wire.featureOfBytes, 'featureOfBytes', 'links');
  if (featureOf.length !== n) throw new UndecodableMessageError('links: kindBytes and featureOfBytes differ in length');
  const sources = splitUrls(wire.sourcesJoined, runs.length, 'links: sourcesJoined');
  const targets = splitUrls(wire.targetsJoined, n, 'links: targetsJoined');
  const ops = new Array<LinkOp>(n);
  let i = 0;
  for (let s = 0; s < runs.length; s++) {
    const source = sources[s]!;
    const end = i + runs[s]!;
    if (end > n) throw new UndecodableMessageError(`links: sourceRuns sum past the ${n} operations`);
    for (; i < end; i++) {
      const kind = wire.kindBytes[i]!;
      if (kind === 2) ops[i] = { op: 'remove', source, target: targets[i]! };
      else if (kind <= 1) ops[i] = { op: OP_KINDS[kind]!, source, target: targets[i]!, features: tableFeatures(wire.features, featureOf[i], `links: operation ${i}`) } as LinkOp;
      else throw new UndecodableMessageError(`links: operation ${i} has kind ${kind} (0, 1 or 2)`);
    }
  }
  if (i !== n) throw new UndecodableMessageError(`links: sourceRuns sum to ${i}, not the ${n} operations`);
  return { type: 'links', ops };
}

/**
 * `metrics/<q>` on the wire: msgpack `{ type, round, keyBytes, keyEnds, deltas }`, the last
 * two as binary holding little-endian uint32 / float64 arrays.
 */
interface ContributionWire {
  readonly type: 'metrics';
  readonly round: number;
  readonly keyBytes: Uint8Array;
  readonly keyEnds: Uint8Array;
  readonly deltas: Uint8Array;
  readonly dictionary?: string;
  /** Little-endian uint32 array. */
  readonly indexes?: Uint8Array;
  /**
   * The copies' runs (CopyRuns): sources packed like keyBytes/keyEnds, their x as LE
   * float64, the run lengths as LE uint32, the targets packed like keyBytes/keyEnds.
   */
  readonly copySourceBytes?: Uint8Array;
  readonly copySourceEnds?: Uint8Array;
  readonly copyValues?: Uint8Array;
  readonly copyRuns?: Uint8Array;
  readonly copyTargetBytes?: Uint8Array;
  readonly copyTargetEnds?: Uint8Array;
  /** LE uint32, one per copy: the index of its target among copyTargetBytes / copyTargetEnds (each distinct target once). */
  readonly copyTargetIndexes?: Uint8Array;
  /**
   * The form written before runs (decoded still, e.g. from an outbox or a broker written
   * by an earlier version): one backlink key (`target 0x00 source`) per copy, packed, with
   * `copyValues` one x per key.
   */
  readonly copyKeyBytes?: Uint8Array;
  readonly copyKeyEnds?: Uint8Array;
}

const contributionWire = msgpackCodec('metrics', (v): v is ContributionWire =>
  isObj(v) && v.type === 'metrics' && typeof v.round === 'number' && v.keyBytes instanceof Uint8Array &&
  v.keyEnds instanceof Uint8Array && v.deltas instanceof Uint8Array &&
  (v.dictionary === undefined ? v.indexes === undefined : typeof v.dictionary === 'string' && v.indexes instanceof Uint8Array) &&
  allBytes(v, ['copySourceBytes', 'copySourceEnds', 'copyRuns', 'copyTargetBytes', 'copyTargetEnds', 'copyTargetIndexes', 'copyKeyBytes', 'copyKeyEnds', 'copyValues']));

/** True when each of `fields` of `v` is absent or bytes. */
function allBytes(v: Record<string, unknown>, fields: readonly string[]): boolean {
  for (const f of fields) if (v[f] !== undefined && !(v[f] instanceof Uint8Array)) return false;
  return true;
}

const littleEndian = new Uint8Array(Uint32Array.of(1).buffer)[0] === 1;

/** Bytes of a typed array, little-endian (the wire order). */
function wireBytes(a: Uint32Array | Int32Array | Float64Array): Uint8Array {
  // (on a big-endian host the arrays would need swapping; none is supported)
  if (!littleEndian) throw new Error('metrics/<q> and links/<q> messages need a little-endian host');
  return new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
}

/**
 * A typed array over wire bytes: a view of them when they are aligned (the decoded value
 * then shares the message's memory, as `keyBytes` does), else an aligned copy.
 * @throws UndecodableMessageError `<namespace>: <what> is not a whole number of ...` when
 *   the length is not a multiple of the element size, or on a big-endian host
 */
function fromWire<A extends Uint32Array | Int32Array | Float64Array>(
  View: { new (buffer: ArrayBuffer, byteOffset: number, length: number): A; readonly BYTES_PER_ELEMENT: number },
  bytes: Uint8Array,
  what: string,
  namespace = 'metrics',
): A {
  const size = View.BYTES_PER_ELEMENT;
  if (!littleEndian) throw new UndecodableMessageError('metrics/<q> and links/<q> messages need a little-endian host');
  if (bytes.byteLength % size !== 0) throw new UndecodableMessageError(`${namespace}: ${what} is not a whole number of ${size}-byte values`);
  // A view when the bytes are aligned (no allocation: each one adds to V8's external memory,
  // which starts major GCs), else a copy.
  if (bytes.byteOffset % size === 0) return new View(bytes.buffer as ArrayBuffer, bytes.byteOffset, bytes.byteLength / size);
  const raw = new View(new ArrayBuffer(bytes.byteLength), 0, bytes.byteLength / size);
  new Uint8Array(raw.buffer).set(bytes);
  return raw;
}

/**
 * Codec of `metrics/<q>` batches.
 * @throws UndecodableMessageError (decode) when keyEnds, deltas (and indexes) differ in
 *   length, or keyEnds decrease or pass the end of keyBytes; for the copies, as
 *   `decodeCopies` says (an incomplete form, columns of different lengths, runs that do not
 *   sum to the targets, ends out of their bytes).
 */
export const contributionCodec: Codec<ContributionBatch> = {
  encode: (value) =>
    contributionWire.encode({
      type: 'metrics',
      round: value.round,
      keyBytes: value.keys.bytes,
      keyEnds: wireBytes(value.keys.ends),
      deltas: wireBytes(value.deltas),
      ...(value.source ? { dictionary: value.source.dictionary, indexes: wireBytes(value.source.indexes) } : {}),
      ...(value.copies ? copiesWire(value.copies) : {}),
    }),
  decode: (bytes) => {
    const wire = contributionWire.decode(bytes);
    if (!littleEndian) throw new UndecodableMessageError('metrics/<q> messages need a little-endian host');
    const ends = fromWire(Uint32Array, wire.keyEnds, 'keyEnds');
    const deltas = fromWire(Float64Array, wire.deltas, 'deltas');
    if (ends.length !== deltas.length) throw new UndecodableMessageError('metrics: keyEnds and deltas differ in length');
    checkEnds(ends, wire.keyBytes.byteLength, 'keyEnds');
    const copies = decodeCopies(wire);
    let source: ContributionBatch['source'];
    if (wire.dictionary !== undefined && wire.indexes !== undefined) {
      const indexes = fromWire(Uint32Array, wire.indexes, 'indexes');
      if (indexes.length !== ends.length) throw new UndecodableMessageError('metrics: indexes and keyEnds differ in length');
      source = { dictionary: wire.dictionary, indexes };
    }
    return { type: 'metrics', round: wire.round, keys: { bytes: wire.keyBytes, ends }, deltas, ...(source ? { source } : {}), ...(copies ? { copies } : {}) };
  },
};

/**
 * The copies of a `metrics/<q>` message, from either wire form (runs, or one backlink key
 * per copy as written before runs: each key `target 0x00 source` becomes a run of one, as
 * views of the key's two parts).
 * @throws UndecodableMessageError when a form is incomplete, its columns differ in length,
 *   runs do not sum to the targets, ends decrease or pass their bytes, or a legacy key has
 *   no 0x00.
 */
function decodeCopies(wire: ContributionWire): CopyRuns | undefined {
  const runFields = [wire.copySourceBytes, wire.copySourceEnds, wire.copyRuns, wire.copyTargetBytes, wire.copyTargetEnds, wire.copyTargetIndexes];
  const legacy = wire.copyKeyBytes !== undefined || wire.copyKeyEnds !== undefined;
  if (runFields.every((f) => f === undefined) && !legacy) {
    if (wire.copyValues !== undefined) throw new UndecodableMessageError('metrics: copyValues without copies');
    return undefined;
  }
  if (wire.copyValues === undefined) throw new UndecodableMessageError('metrics: copies without copyValues');
  const values = fromWire(Float64Array, wire.copyValues, 'copyValues');
  if (legacy) {
    if (wire.copyKeyBytes === undefined || wire.copyKeyEnds === undefined || runFields.some((f) => f !== undefined)) throw new UndecodableMessageError('metrics: copy keys need copyKeyBytes and copyKeyEnds alone');
    const ends = fromWire(Uint32Array, wire.copyKeyEnds, 'copyKeyEnds');
    if (ends.length !== values.length) throw new UndecodableMessageError('metrics: copyKeyEnds and copyValues differ in length');
    checkEnds(ends, wire.copyKeyBytes.byteLength, 'copyKeyEnds');
    const bytes = wire.copyKeyBytes;
    const targetStarts = new Uint32Array(ends.length);
    const targetEnds = new Uint32Array(ends.length);
    const sourceStarts = new Uint32Array(ends.length);
    for (let i = 0; i < ends.length; i++) {
      const start = i === 0 ? 0 : ends[i - 1]!;
      const zero = bytes.subarray(start, ends[i]!).indexOf(0);
      if (zero < 0) throw new UndecodableMessageError(`metrics: copy key ${i} has no 0x00 between target and source`);
      targetStarts[i] = start;
      targetEnds[i] = start + zero;
      sourceStarts[i] = start + zero + 1;
    }
    return { sources: { bytes, starts: sourceStarts, ends }, values, runs: new Uint32Array(ends.length).fill(1), targets: { bytes, starts: targetStarts, ends: targetEnds } };
  }
  if (runFields.some((f) => f === undefined)) throw new UndecodableMessageError('metrics: copies need copySourceBytes, copySourceEnds, copyRuns, copyTargetBytes, copyTargetEnds and copyTargetIndexes');
  const sourceEnds = fromWire(Uint32Array, wire.copySourceEnds!, 'copySourceEnds');
  const runs = fromWire(Uint32Array, wire.copyRuns!, 'copyRuns');
  const distinctEnds = fromWire(Uint32Array, wire.copyTargetEnds!, 'copyTargetEnds');
  const indexes = fromWire(Uint32Array, wire.copyTargetIndexes!, 'copyTargetIndexes');
  if (sourceEnds.length !== values.length || runs.length !== values.length) throw new UndecodableMessageError('metrics: copySourceEnds, copyValues and copyRuns differ in length');
  checkEnds(sourceEnds, wire.copySourceBytes!.byteLength, 'copySourceEnds');
  checkEnds(distinctEnds, wire.copyTargetBytes!.byteLength, 'copyTargetEnds');
  let total = 0;
  for (let j = 0; j < runs.length; j++) total += runs[j]!;
  if (total !== indexes.length) throw new UndecodableMessageError(`metrics: copyRuns sum to ${total}, not the ${indexes.length} copies`);
  // Copy i's target: distinct target indexes[i], as a view (starts and ends into the bytes).
  const starts = new Uint32Array(indexes.length);
  const ends = new Uint32Array(indexes.length);
  for (let i = 0; i < indexes.length; i++) {
    const d = indexes[i]!;
    if (d >= distinctEnds.length) throw new UndecodableMessageError(`metrics: copy ${i} names target ${d} of ${distinctEnds.length}`);
    starts[i] = d === 0 ? 0 : distinctEnds[d - 1]!;
    ends[i] = distinctEnds[d]!;
  }
  return { sources: { bytes: wire.copySourceBytes!, ends: sourceEnds }, values, runs, targets: { bytes: wire.copyTargetBytes!, starts, ends } };
}

/**
 * The wire fields of `copies`: keys picked out with `starts` are packed one after another,
 * and targets with the same start and end travel once (an index per copy names them).
 */
function copiesWire(copies: CopyRuns): Partial<ContributionWire> {
  const sources = copies.sources.starts ? gatherKeys(copies.sources.bytes, copies.sources.starts, copies.sources.ends) : copies.sources;
  const { targets } = copies;
  const n = targets.ends.length;
  const indexes = new Uint32Array(n);
  let distinct: PackedKeys;
  if (targets.starts) {
    // Distinct (start, end) pairs in order of first use.
    const seen = new Map<number, number>();
    const starts: number[] = [];
    const ends: number[] = [];
    for (let i = 0; i < n; i++) {
      const start = targets.starts[i]!;
      const end = targets.ends[i]!;
      let d = seen.get(start);
      if (d === undefined || ends[d] !== end) {
        d = starts.length;
        seen.set(start, d);
        starts.push(start);
        ends.push(end);
      }
      indexes[i] = d;
    }
    distinct = gatherKeys(targets.bytes, Uint32Array.from(starts), Uint32Array.from(ends));
  } else {
    for (let i = 0; i < n; i++) indexes[i] = i;
    distinct = targets;
  }
  return {
    copySourceBytes: sources.bytes,
    copySourceEnds: wireBytes(sources.ends),
    copyValues: wireBytes(copies.values),
    copyRuns: wireBytes(copies.runs),
    copyTargetBytes: distinct.bytes,
    copyTargetEnds: wireBytes(distinct.ends),
    copyTargetIndexes: wireBytes(indexes),
  };
}

/** @throws UndecodableMessageError unless `ends` are non-decreasing and at most `limit` (the packed bytes' length). */
function checkEnds(ends: Uint32Array, limit: number, what: string): void {
  let previous = 0;
  for (let i = 0; i < ends.length; i++) {
    const end = ends[i]!;
    if (end < previous || end > limit) throw new UndecodableMessageError(`metrics: ${what} must be non-decreasing and within their key bytes`);
    previous = end;
  }
}

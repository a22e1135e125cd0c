import { createHash } from 'node:crypto';
import { Packr } from 'msgpackr';
import type { Store, WriteBatch } from '../../storage/index.js';
import { applyExactlyOnce, decodeFloat64s, encodeFloat64s, encodeInt64, type Behavior, type Deliveries, type StreamOutbox } from '../../index.js';
import { Namespaces } from '../namespaces.js';
import { fetchCodec, type FetchResult, type LinkFeatures, type LinkOp, type Outlink } from '../messages.js';
import { DEFAULT_MAX_OUTLINKS, extractLinksChunked } from '../crawler/extractLinks.js';
import type { PartitionEnv } from '../partition/env.js';
import { closeSubscribed, openSubscribed, type SubscribedState } from '../partition/subscribedState.js';
import { ColumnFamilies, Counters, linkKey, linkPrefix, splitLinkKey, type PageRecord } from '../partition/schema.js';
import type { WeightFunction } from '../metrics/weights.js';
import { diffOutlinks } from './diffOutlinks.js';
import { edgeWeight } from './edgeWeight.js';
import { encodeLinkValue, linkFeatures, linkWeight } from './linkValue.js';
import { enqueueContributions } from '../metrics/contributions.js';
import { enqueueLinkOps } from '../partition/linkOps.js';
import { isPermanentRedirect, isScoredPage, pageDamping, passesUndamped, teleportOf } from '../partition/redirects.js';

/** Options of the indexer beyond its partition. */
export interface IndexerOptions {
  /** Raw link weight at index time (stored with each outlink). */
  readonly weigh: WeightFunction;
  /**
   * Teleport residual given to a page when it is first stored: 1 - d (d the damping
   * factor). Every page enters the metric this way, exactly once (docs/ARCHITECTURE.md, "The metric").
   */
  readonly teleport: number;
  /** Damping factor d, for the corrections of changed outlinks. */
  readonly damping: number;
  /** A page answering 404 or 410 this many times in a row is deleted. Default 2. */
  readonly deleteAfter?: number;
  /**
   * Most distinct outlinks stored per page: a page with more keeps its first ones (document
   * order; for graph files, file order), its record says so in `error` and
   * `outlinksFound`, the `outlinksTruncated` counter counts it and a warning is logged.
   * Default `DEFAULT_MAX_OUTLINKS` (10,000; its docstring gives the reason).
   */
  readonly maxOutlinksPerPage?: number;
}

type IndexerState = SubscribedState & { readonly outbox: StreamOutbox };

/**
 * Messages of the indexer: fetch results from `fetches/<p>`, and `republish-links`, the
 * repair step that sends every stored outlink again as an `add` link operation to the
 * backlinks actor of its target (after `resetInFlightState` emptied `backlinks`); replies
 * the number of link operations sent.
 */
export type IndexerMessage = Deliveries | { readonly type: 'republish-links' };

/** Link operations per write batch of `republish-links`. */
const REPUBLISH_OPS_PER_BATCH = 8192;

const packr = new Packr({ useRecords: false });

/**
 * The indexer of one partition: consumes `fetches/<p>`, stores each page record and its
 * outlinks, diffs the outlinks against the stored version, and places the link operations
 * (add, update, remove) in `links/<q>`, q the partition of the target's host, through the
 * outbox, all in one write batch per delivery batch with the applied marks.
 *
 * Page lifecycle: a new page enters the metric with its teleport residual; a page whose
 * outlinks change sends metric corrections to the old and new targets; a page that answers
 * 404 or 410 `deleteAfter` times in a row (default 2) is deleted: its outlinks are removed
 * (so are their backlinks, through the link operations), its teleport is taken back and
 * its record kept as a tombstone (`deleted`). A redirect answer replaces the page's
 * outlinks (its Location, or none for a broken chain); a 301/308 with its Location is
 * stored as an alias of it (`PageRecord.aliasOf`: no teleport, not in the page counter),
 * and the corrections use the row's damping factor (1 for a redirect:
 * partition/redirects.ts). All of it runs under the partition's graph
 * lock, so no metric push of this partition sees a page half changed.
 *
 * Outcomes of bad input, all stored in the page record (`status`, `error`) and logged:
 * no response (status 0), a 5xx or another 4xx, or an oversized body keeps the page's
 * previous outlinks (a new page has none); a 2xx body that is not HTML has no links;
 * malformed HTML keeps the links the forgiving parser found and records how many end tags
 * it had to imply; hrefs that do not parse are skipped and counted; a page with more than
 * `maxOutlinksPerPage` distinct outlinks is stored with its first ones and the truncation
 * recorded (see the option).
 *
 * Bounded work per page: links are parsed in slices that yield to the event loop
 * (`extractLinksChunked`), at most `maxOutlinksPerPage` are diffed, written and sent, and
 * every step after the parse is linear in the links kept, so one huge page neither blocks
 * the other partitions' actors nor costs more than its capped links.
 *
 * @throws RangeError (from the factory) when `maxOutlinksPerPage` is not a number >= 1
 */
export function indexer(env: PartitionEnv, options: IndexerOptions): Behavior<IndexerMessage, IndexerState, unknown> {
  const owner = 'indexer';
  const deleteAfter = options.deleteAfter ?? 2;
  const maxOutlinks = options.maxOutlinksPerPage ?? DEFAULT_MAX_OUTLINKS;
  if (!(maxOutlinks >= 1)) throw new RangeError(`maxOutlinksPerPage must be >= 1, got ${maxOutlinks}`);
  return {
    kind: 'indexer',
    start: (ctx) => openSubscribed(env, ctx, { owner, namespace: Namespaces.fetches, receiverQueueSize: 64, batching: { maxCount: 32, maxDelayMs: 2 }, withOutbox: true }) as Promise<IndexerState>,
    async receive(state, d) {
      if (d.type === 'republish-links') return env.graphLock.runExclusive(() => republishLinks(state));
      if (d.consumer !== state.consumer) return; // from a previous incarnation: redelivered to this one
      const { store, outbox } = state;
      const overlay = new Map<string, IndexedPage>();
      await env.graphLock.runExclusive(() => applyExactlyOnce({ ...state, counters: env.counters, namespace: Namespaces.fetches }, d, fetchCodec, async (batch, value) => {
        const ops: LinkOp[] = [];
        const corrections = new Map<string, number>();
        // One multiGet for the records of the message's pages: most pages of a first crawl
        // or a graph load are new, and then no other read is needed.
        const fresh = [...new Set(value.results.map((r) => r.url))].filter((u) => !overlay.has(u));
        const records = new Map<string, Buffer | undefined>();
        (await store.multiGet(ColumnFamilies.pages, fresh)).forEach((v, i) => records.set(fresh[i]!, v));
        // Rank estimates x of the same pages, for the corrections (the graph lock keeps
        // them unchanged until this batch commits).
        const ranks = new Map<string, number>();
        (await store.multiGet(ColumnFamilies.ranks, fresh)).forEach((v, i) => ranks.set(fresh[i]!, v && v.length >= 8 ? v.readDoubleLE(0) : 0));
        // (appended one by one: a spread of a page's operations as call arguments overflows
        // the stack beyond about 120,000 of them, and the delivery was retried without end)
        for (const result of value.results) {
          for (const op of await indexPage(store, batch, result, overlay, corrections, records, ranks)) ops.push(op);
        }
        await enqueueContributions(outbox, batch, env.partitioner, 0, corrections);
        await enqueueLinkOps(outbox, batch, env.partitioner, ops);
      }));
    },
    stop: (state) => closeSubscribed(env, state),
  };

  /**
   * Sends every outlink of the partition as an `add` link operation through the outbox, in
   * write batches of REPUBLISH_OPS_PER_BATCH, walking `outlinks` in key order.
   * @returns link operations sent
   */
  async function republishLinks(state: IndexerState): Promise<number> {
    const { store, outbox } = state;
    let ops: LinkOp[] = [];
    let sent = 0;
    const send = async () => {
      if (ops.length === 0) return;
      const batch = store.batch();
      await enqueueLinkOps(outbox, batch, env.partitioner, ops);
      await store.write(batch);
      await outbox.publish();
      sent += ops.length;
      ops = [];
    };
    for await (const [key, value] of store.iterate(ColumnFamilies.outlinks)) {
      const [source, target] = splitLinkKey(key);
      ops.push({ op: 'add', source, target, features: linkFeatures(value) });
      if (ops.length >= REPUBLISH_OPS_PER_BATCH) await send();
    }
    await send();
    return sent;
  }

  /**
   * Adds one page's effects to `batch`: its record, its outlinks, the teleport residual of
   * a new page, and the metric corrections of changed outlinks (into `corrections`).
   * @returns the page's link operations
   */
  async function indexPage(
    store: Store,
    batch: WriteBatch,
    result: FetchResult,
    overlay: Map<string, IndexedPage>,
    corrections: Map<string, number>,
    records: ReadonlyMap<string, Buffer | undefined>,
    ranks: ReadonlyMap<string, number>,
  ): Promise<LinkOp[]> {
    const url = result.url;
    const previous = overlay.get(url) ?? (await readPage(store, url, records));
    // A graph file's link target that is stored already keeps what it has (`FetchResult.ifAbsent`).
    if (result.ifAbsent === true && previous !== undefined) return [];
    const live = previous !== undefined && !previous.record.deleted;

    let next: readonly Outlink[] | undefined;
    let error = result.error;
    let contentHash: string | undefined;
    let missCount = 0;
    let deleted = false;
    let found: number | undefined;
    // A deleted page that answers 404 or 410 again stays deleted (found by a new user: each
    // --recrawl stored the deleted pages again as live pages of status 404, and the next one
    // deleted them again: the page count swung between 80 and 65).
    const staysDeleted = previous?.record.deleted === true && (result.status === 404 || result.status === 410);
    if (staysDeleted) {
      missCount = previous.record.missCount ?? deleteAfter;
      deleted = true;
      next = [];
    } else if (result.status === 404 || result.status === 410) {
      missCount = (live ? previous.record.missCount ?? 0 : 0) + 1;
      // A page that is gone `deleteAfter` times in a row leaves the graph; before that
      // its outlinks are kept (a transient fault must not move rank around).
      deleted = live && missCount >= deleteAfter;
      next = deleted ? [] : live ? undefined : [];
      env.log.info({ url, status: result.status, reason: error, missCount, deleted }, deleted ? 'page deleted' : 'page gone');
    } else if (result.status >= 300 && result.status < 400) {
      // A redirect is an answer, not a fault: its one link (its Location), or none when the
      // chain is broken (a loop, too long, no usable Location), replaces what it had.
      next = result.outlinks ?? [];
    } else if (result.outlinks) {
      next = result.outlinks;
      if (next.length > maxOutlinks) {
        found = next.length;
        // As extractLinks does: a trailing rel=canonical target keeps its place.
        const last = next[next.length - 1]!;
        next = last.features.rel.includes('canonical') ? [...next.slice(0, maxOutlinks - 1), last] : next.slice(0, maxOutlinks);
      }
    } else if (result.body !== undefined && result.status >= 200 && result.status < 300) {
      contentHash = createHash('sha1').update(result.body).digest('hex');
      const extracted = await extractLinksChunked(result.body, url, { maxOutlinks });
      next = extracted.outlinks;
      found = extracted.truncated?.found;
      const notes: string[] = [];
      // As the X-Robots-Tag one is (found by a new user: the meta's links went with no word).
      if (extracted.noFollow) notes.push('nofollow (meta robots)');
      if (extracted.impliedEndTags > 0) notes.push(`malformed HTML: ${extracted.impliedEndTags} implied end tags`);
      if (extracted.rejected.length > 0) notes.push(`${extracted.rejected.length} hrefs rejected (first: ${extracted.rejected[0]!.reason})`);
      if (notes.length > 0) {
        error = [error, ...notes].filter(Boolean).join('; ');
        env.log.info({ url, notes }, 'page indexed with warnings');
      }
    } else if (result.status >= 200 && result.status < 300 && !result.error) {
      next = []; // a 2xx body that is not HTML has no links
    } else {
      // No response, a 5xx or another 4xx, an oversized body: keep what we had.
      next = live ? undefined : [];
      env.log.info({ url, status: result.status, reason: error }, 'page stored without content');
    }
    if (found !== undefined && next !== undefined) {
      const why = outlinksTruncated(found, next.length);
      error = [error, why].filter(Boolean).join('; ');
      batch.merge(ColumnFamilies.counters, Counters.outlinksTruncated, encodeInt64(1));
      env.log.warn({ url, found, kept: next.length, maxOutlinksPerPage: maxOutlinks, reason: why }, 'outlinks truncated');
    }

    const before = live ? previous.outlinks : new Map<string, StoredLink>();
    const ops = next ? diffOutlinks(url, featuresOf(before), next) : [];
    const after = new Map(before);
    let delta = 0;
    const putTargets: string[] = [];
    const putValues: Buffer[] = [];
    for (const op of ops) {
      if (op.op === 'remove') {
        batch.delete(ColumnFamilies.outlinks, linkKey(url, op.target));
        after.delete(op.target);
        delta--;
      } else {
        const weight = edgeWeight(options.weigh, op.features);
        putTargets.push(op.target);
        putValues.push(encodeLinkValue(weight, op.features));
        after.set(op.target, { features: op.features, weight });
        if (op.op === 'add') delta++;
      }
    }
    // Keys `url 0x00 target`, built natively (one call for the page's links), in key order
    // (sorted natively) for the memtable insert hint of `outlinks`.
    if (putTargets.length > 0) batch.putPairs(ColumnFamilies.outlinks, url, putTargets, putValues, { keyOrder: true });
    if (ops.length > 0) {
      env.adjacency.invalidate(url);
      // Also for a page stored for the first time: in continuous mode it may already have
      // received contributions and pushed them into x as a dangling page.
      await addCorrections(store, url, before, after, corrections, ranks.get(url));
    }

    // A permanent redirect with its one link is an alias of the target (redirects.ts).
    const redirectTarget = after.size === 1 && passesUndamped(featuresOf(after).values()) ? after.keys().next().value! : undefined;
    const aliasOf = redirectTarget !== undefined && isPermanentRedirect(result.status) ? redirectTarget : undefined;
    const record: PageRecord = {
      url,
      status: result.status,
      fetchedAt: result.fetchedAt,
      outlinkCount: after.size,
      ...(result.contentType ? { contentType: result.contentType } : {}),
      ...(contentHash ? { contentHash } : {}),
      ...(error ? { error } : {}),
      ...(found !== undefined ? { outlinksFound: found } : {}),
      ...(missCount > 0 ? { missCount } : {}),
      ...(deleted ? { deleted: true } : {}),
      ...(aliasOf !== undefined ? { aliasOf } : {}),
    };
    batch.put(ColumnFamilies.pages, url, packr.pack(record));
    // The teleport residual t_p follows the page: 1 - d when it enters the graph (new, or
    // back after its deletion), 0 when it leaves it (deleted) or is an alias; a change of
    // t_p adds t'_p - t_p to r_p (docs/ARCHITECTURE.md, "The metric"). The page counter
    // counts pages with a score (not aliases).
    const stored = live ? previous.record : undefined;
    const dt = teleportOf(record, options.teleport) - teleportOf(stored, options.teleport);
    if ((!live && !staysDeleted) || dt !== 0) {
      batch.merge(ColumnFamilies.ranks, url, encodeFloat64s(0, dt));
      env.adjacency.ranksChanged();
    }
    const dPages = (isScoredPage(record) ? 1 : 0) - (isScoredPage(stored) ? 1 : 0);
    if (dPages !== 0) batch.merge(ColumnFamilies.counters, Counters.pages, encodeInt64(dPages));
    if (delta !== 0) batch.merge(ColumnFamilies.counters, Counters.outlinks, encodeInt64(delta));
    overlay.set(url, { record, outlinks: after });
    return ops;
  }

  /**
   * When p's normalised weights change from w to w' (and its damping factor from d_p to
   * d'_p: d, or 1 for a redirect), the invariant y = x + (I - M^T)^-1 r, M = diag(d_p) W,
   * holds again after x_p (d'_p w'_q - d_p w_q) is added to r_q for every target q (docs/ARCHITECTURE.md, "The metric"): so the graph changes without a global recomputation. Must
   * run under the partition's graph lock, so that no push of p interleaves.
   */
  async function addCorrections(store: Store, url: string, before: Map<string, StoredLink>, after: Map<string, StoredLink>, out: Map<string, number>, prefetchedX: number | undefined): Promise<void> {
    let x = prefetchedX;
    if (x === undefined) {
      const ranks = await store.get(ColumnFamilies.ranks, url);
      x = ranks ? decodeFloat64s(ranks)[0] ?? 0 : 0;
    }
    if (x === 0) return;
    const total = (m: Map<string, StoredLink>) => { let t = 0; for (const l of m.values()) t += l.weight; return t; };
    const w0 = total(before);
    const w1 = total(after);
    // A redirect passes its rank on undamped (redirects.ts): the row of M = diag(d_p) W
    // changes with the page's damping factor d_p as well as with its weights.
    const scale0 = pageDamping(featuresOf(before).values(), options.damping) * x;
    const scale1 = pageDamping(featuresOf(after).values(), options.damping) * x;
    for (const target of new Set([...before.keys(), ...after.keys()])) {
      const old = w0 > 0 ? (scale0 * (before.get(target)?.weight ?? 0)) / w0 : 0;
      const now = w1 > 0 ? (scale1 * (after.get(target)?.weight ?? 0)) / w1 : 0;
      if (now !== old) out.set(target, (out.get(target) ?? 0) + (now - old));
    }
  }
}

/**
 * The reason stored in a page's `error` when its outlinks were cut to the cap, e.g.
 * `outlinks truncated: first 10000 of 200000 distinct targets kept (maxOutlinksPerPage)`.
 */
export function outlinksTruncated(found: number, kept: number): string {
  return `outlinks truncated: first ${kept} of ${found} distinct targets kept (maxOutlinksPerPage)`;
}

/** A stored outlink: features and raw weight. */
interface StoredLink {
  readonly features: LinkFeatures;
  readonly weight: number;
}

/** A page as the indexer knows it: record and outlinks (target -> link). */
interface IndexedPage {
  readonly record: PageRecord;
  readonly outlinks: Map<string, StoredLink>;
}

async function readPage(store: Store, url: string, records: ReadonlyMap<string, Buffer | undefined>): Promise<IndexedPage | undefined> {
  const stored = records.has(url) ? records.get(url) : await store.get(ColumnFamilies.pages, url);
  if (!stored) return undefined;
  const outlinks = new Map<string, StoredLink>();
  for await (const [key, value] of store.iterate(ColumnFamilies.outlinks, { prefix: linkPrefix(url) })) {
    outlinks.set(splitLinkKey(key)[1], { features: linkFeatures(value), weight: linkWeight(value) });
  }
  return { record: packr.unpack(stored) as PageRecord, outlinks };
}

function featuresOf(links: Map<string, StoredLink>): Map<string, LinkFeatures> {
  const out = new Map<string, LinkFeatures>();
  for (const [t, l] of links) out.set(t, l.features);
  return out;
}

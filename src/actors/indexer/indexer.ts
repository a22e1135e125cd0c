import { createHash } from 'node:crypto';
import { Packr } from 'msgpackr';
import type { Behavior } from '../../runtime/actor/index.js';
import { partitionId } from '../../runtime/ids.js';
import { Namespaces, topic } from '../../runtime/topics.js';
import { encodeFloat64s, encodeInt64 } from '../../operators/mergeOperators.js';
import type { Store, WriteBatch } from '../../storage/index.js';
import { fetchCodec, linkOpCodec, type FetchResult, type LinkFeatures, type LinkOp, type Outlink } from '../messages.js';
import { extractLinks } from '../crawler/extractLinks.js';
import type { PartitionEnv } from '../partition/env.js';
import { applyExactlyOnce, type Deliveries } from '../partition/inbox.js';
import { closeSubscribed, openSubscribed, type SubscribedState } from '../partition/subscribedState.js';
import type { Outbox } from '../partition/outbox.js';
import { ColumnFamilies, Counters, linkKey, linkPrefix, splitLinkKey, type PageRecord } from '../partition/schema.js';
import type { WeightFunction } from '../metrics/weights.js';
import { diffOutlinks } from './diffOutlinks.js';
import { encodeLinkValue, linkFeatures } from './linkValue.js';

/** Options of the indexer beyond its partition. */
export interface IndexerOptions {
  /** Raw link weight at index time (stored with each outlink). */
  readonly weigh: WeightFunction;
  /**
   * Teleport residual given to a page when it is first stored: 1 - d (d the damping
   * factor). Every page enters the metric this way, exactly once (DESIGN.md, push form).
   */
  readonly teleport: number;
}

type IndexerState = SubscribedState & { readonly outbox: Outbox };

const packr = new Packr({ useRecords: false });
const LINK_OPS_PER_MESSAGE = 512;

/**
 * The indexer of one partition: consumes `fetches/<p>`, stores each page record and its
 * outlinks, diffs the outlinks against the stored version, and places the link operations
 * (add, update, remove) in `links/<q>`, q the partition of the target's host, through the
 * outbox, all in one write batch per delivery batch with the applied marks.
 *
 * Outcomes of bad input, all stored in the page record (`status`, `error`) and logged:
 * a fetch that failed (status 0) keeps the page's previous outlinks; a 4xx/5xx answer, a
 * non-HTML body or an oversized body stores the page with no outlinks (removing the
 * previous ones); malformed HTML keeps the links the forgiving parser found and records
 * how many end tags it had to imply; hrefs that do not parse are skipped and counted.
 */
export function indexer(env: PartitionEnv, options: IndexerOptions): Behavior<Deliveries, IndexerState> {
  const owner = 'indexer';
  return {
    kind: 'indexer',
    start: (ctx) => openSubscribed(env, ctx, { owner, namespace: Namespaces.fetches, receiverQueueSize: 64, batching: { maxCount: 32, maxDelayMs: 2 }, withOutbox: true }) as Promise<IndexerState>,
    async receive(state, d) {
      if (d.consumer !== state.consumer) return; // from a previous incarnation: redelivered to this one
      const { store, outbox } = state;
      const overlay = new Map<string, { record: PageRecord; outlinks: Map<string, LinkFeatures> }>();
      await applyExactlyOnce({ ...state, counters: env.counters, namespace: Namespaces.fetches }, d, fetchCodec, async (batch, value) => {
        const ops: LinkOp[] = [];
        for (const result of value.results) ops.push(...(await indexPage(store, batch, result, overlay)));
        const byPartition = new Map<number, LinkOp[]>();
        for (const op of ops) {
          const q = env.partitioner.forUrl(op.target);
          let list = byPartition.get(q);
          if (!list) byPartition.set(q, (list = []));
          list.push(op);
        }
        for (const [q, list] of byPartition) {
          for (let i = 0; i < list.length; i += LINK_OPS_PER_MESSAGE) {
            await outbox.enqueue(batch, topic(Namespaces.links, partitionId(q)), linkOpCodec.encode({ type: 'links', ops: list.slice(i, i + LINK_OPS_PER_MESSAGE) }));
          }
        }
      });
    },
    stop: (state) => closeSubscribed(env, state),
  };

  /** Adds one page's effects to `batch`; returns its link operations. */
  async function indexPage(
    store: Store,
    batch: WriteBatch,
    result: FetchResult,
    overlay: Map<string, { record: PageRecord; outlinks: Map<string, LinkFeatures> }>,
  ): Promise<LinkOp[]> {
    const url = result.url;
    let previous = overlay.get(url);
    if (!previous) {
      const stored = await store.get(ColumnFamilies.pages, url);
      if (stored) {
        const outlinks = new Map<string, LinkFeatures>();
        for await (const [key, value] of store.iterate(ColumnFamilies.outlinks, { prefix: linkPrefix(url) })) {
          outlinks.set(splitLinkKey(key)[1], linkFeatures(value));
        }
        previous = { record: packr.unpack(stored) as PageRecord, outlinks };
      }
    }

    let next: readonly Outlink[] | undefined;
    let error = result.error;
    let contentHash: string | undefined;
    if (result.status === 0) {
      next = undefined; // no response: keep what we had
    } else if (result.outlinks) {
      next = result.outlinks;
    } else if (result.body !== undefined && result.status >= 200 && result.status < 300) {
      contentHash = createHash('sha1').update(result.body).digest('hex');
      const found = extractLinks(result.body, url);
      next = found.outlinks;
      const notes: string[] = [];
      if (found.impliedEndTags > 0) notes.push(`malformed HTML: ${found.impliedEndTags} implied end tags`);
      if (found.rejected.length > 0) notes.push(`${found.rejected.length} hrefs rejected (first: ${found.rejected[0]!.reason})`);
      if (notes.length > 0) {
        error = [error, ...notes].filter(Boolean).join('; ');
        env.log.info({ url, notes }, 'page indexed with warnings');
      }
    } else {
      next = [];
      if (error) env.log.info({ url, status: result.status, reason: error }, 'page stored without content');
    }

    const before = previous?.outlinks ?? new Map<string, LinkFeatures>();
    const ops = next ? diffOutlinks(url, before, next) : [];
    const after = new Map(before);
    let delta = 0;
    for (const op of ops) {
      const key = linkKey(url, op.target);
      if (op.op === 'remove') {
        batch.delete(ColumnFamilies.outlinks, key);
        after.delete(op.target);
        delta--;
      } else {
        batch.put(ColumnFamilies.outlinks, key, encodeLinkValue(options.weigh(op.features), op.features));
        after.set(op.target, op.features);
        if (op.op === 'add') delta++;
      }
    }
    const record: PageRecord = {
      url,
      status: result.status,
      fetchedAt: result.fetchedAt,
      outlinkCount: after.size,
      ...(result.contentType ? { contentType: result.contentType } : {}),
      ...(contentHash ? { contentHash } : {}),
      ...(error ? { error } : {}),
    };
    batch.put(ColumnFamilies.pages, url, packr.pack(record));
    if (!previous) {
      batch.merge(ColumnFamilies.counters, Counters.pages, encodeInt64(1));
      batch.merge(ColumnFamilies.ranks, url, encodeFloat64s(0, options.teleport));
    }
    if (delta !== 0) batch.merge(ColumnFamilies.counters, Counters.outlinks, encodeInt64(delta));
    overlay.set(url, { record, outlinks: after });
    return ops;
  }
}

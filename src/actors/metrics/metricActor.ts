import { Packr } from 'msgpackr';
import type { Behavior } from '../../runtime/actor/index.js';
import { partitionId } from '../../runtime/ids.js';
import { Namespaces, topic } from '../../runtime/topics.js';
import { decodeFloat64s, decodeInt64, encodeFloat64s } from '../../operators/mergeOperators.js';
import type { Store } from '../../storage/index.js';
import { contributionCodec } from '../messages.js';
import type { PartitionEnv } from '../partition/env.js';
import { applyExactlyOnce, type Deliveries } from '../partition/inbox.js';
import { closeSubscribed, openSubscribed, type SubscribedState } from '../partition/subscribedState.js';
import type { Outbox } from '../partition/outbox.js';
import { ColumnFamilies, Counters, roundKey } from '../partition/schema.js';
import { linkWeight } from '../indexer/linkValue.js';
import { ChunkCursor } from './chunkCursor.js';

/** Messages of the metric actor (contributions arrive as `Deliveries` from `metrics/<p>`). */
export type MetricMessage =
  | Deliveries
  /** Push every page whose |residual| exceeds `threshold`; replies `PushReport`. Idempotent per round. */
  | { readonly type: 'push'; readonly round: number; readonly threshold: number; readonly damping: number }
  /** Replies `RoundApplied` for `round`. */
  | { readonly type: 'applied'; readonly round: number }
  /** Replies `PartitionScores`: every page with its unnormalised score x + r. */
  | { readonly type: 'scores' }
  /** Replies `PartitionCounts`. */
  | { readonly type: 'counts' };

/** What a partition did in one push round. */
export interface PushReport {
  readonly round: number;
  /** Messages sent to `metrics/<q>`, indexed by q. */
  readonly sent: number[];
  /** Pages pushed. */
  readonly pushed: number;
  /** Sum of |r| over pages not pushed (below the threshold). */
  readonly remaining: number;
  /** Sum of x over all pages after the push. */
  readonly sumX: number;
  /** Link contributions before combining, and entries after combining per target. */
  readonly contributions: number;
  readonly combined: number;
}

/** Contributions a partition applied for one round: messages and sum of |delta|. */
export interface RoundApplied {
  readonly messages: number;
  readonly mass: number;
}

/** Unnormalised scores of a partition's pages: `scores[i]` is x + r of `urls[i]`. */
export interface PartitionScores {
  readonly urls: string[];
  readonly scores: number[];
}

/** Counters of a partition's store. */
export interface PartitionCounts {
  readonly pages: number;
  readonly outlinks: number;
  readonly backlinks: number;
}

type MetricState = SubscribedState & { readonly outbox: Outbox };

const packr = new Packr({ useRecords: false });
const CONTRIBUTIONS_PER_MESSAGE = 4096;
const SEP = 0;

/**
 * The metric actor of one partition: the reasonable surfer in the push form of DESIGN.md.
 * Per page p, `ranks` holds [x_p, r_p]. A push of p merges [r_p, -r_p] into p (x += r,
 * r -= r, as a merge, so contributions that arrive meanwhile are kept) and sends
 * d * r_p * w_pq / sum_q(w_pq) to each outlink target q; a dangling page keeps its mass in
 * x. The traversal walks `ranks` and `outlinks` in step (both keyed by the page URL first),
 * so it makes no random reads; contributions to one target are summed before sending (a
 * combiner) and batched per target partition into `metrics/<q>`. The merges, the outbox
 * rows and the round's report are one write batch: a push is atomic and, replayed after a
 * crash, returns the stored report instead of pushing again.
 *
 * Incoming contributions are folded into r with float64 add merges, with exactly-once
 * marks, and counted per round in `rounds` for the coordinator's barrier.
 */
export function metricActor(env: PartitionEnv): Behavior<MetricMessage, MetricState, unknown> {
  const owner = 'metrics';
  return {
    kind: 'metrics',
    start: (ctx) => openSubscribed(env, ctx, { owner, namespace: Namespaces.metrics, receiverQueueSize: 256, batching: { maxCount: 64, maxDelayMs: 1 }, withOutbox: true }) as Promise<MetricState>,
    async receive(state, message) {
      switch (message.type) {
        case 'deliveries':
          if (message.consumer !== state.consumer) return undefined;
          await applyExactlyOnce({ ...state, counters: env.counters, namespace: Namespaces.metrics }, message, contributionCodec, (batch, value) => {
            let mass = 0;
            for (let i = 0; i < value.urls.length; i++) {
              const delta = value.deltas[i]!;
              batch.merge(ColumnFamilies.ranks, value.urls[i]!, encodeFloat64s(0, delta));
              mass += Math.abs(delta);
            }
            batch.merge(ColumnFamilies.rounds, roundKey(value.round), encodeFloat64s(1, mass));
          });
          return undefined;
        case 'push':
          return push(state, message.round, message.threshold, message.damping);
        case 'applied': {
          const v = await state.store.get(ColumnFamilies.rounds, roundKey(message.round));
          const f = v ? decodeFloat64s(v) : undefined;
          return { messages: f?.[0] ?? 0, mass: f?.[1] ?? 0 } satisfies RoundApplied;
        }
        case 'scores':
          return scores(state.store);
        case 'counts':
          return counts(state.store);
      }
    },
    stop: (state) => closeSubscribed(env, state),
  };

  async function push(state: MetricState, round: number, threshold: number, damping: number): Promise<PushReport> {
    const { store, outbox } = state;
    const reportKey = `pushed\u0000${round}`;
    const done = await store.get(ColumnFamilies.meta, reportKey);
    if (done) return packr.unpack(done) as PushReport;

    const snapshot = store.snapshot();
    const ranks = new ChunkCursor(store.chunks(ColumnFamilies.ranks, { snapshot, chunkSize: 2048 }));
    const links = new ChunkCursor(store.chunks(ColumnFamilies.outlinks, { snapshot, chunkSize: 4096 }));
    const batch = store.batch();
    const combined = new Map<string, number>();
    let pushed = 0;
    let remaining = 0;
    let sumX = 0;
    let contributions = 0;
    const targets: string[] = [];
    const weights: number[] = [];
    try {
      while (await ranks.ready()) {
        const url = ranks.key;
        const [x = 0, r = 0] = decodeFloat64s(ranks.value);
        ranks.advance();
        // Outlinks of `url` are the keys `url 0x00 target`; skip any of earlier sources.
        targets.length = 0;
        weights.length = 0;
        while (await links.ready()) {
          const key = links.key;
          const cmp = compareSource(key, url);
          if (cmp > 0) break;
          if (cmp === 0) {
            targets.push(key.toString('utf8', url.length + 1));
            weights.push(linkWeight(links.value));
          }
          links.advance();
        }
        if (!(Math.abs(r) > threshold)) {
          remaining += Math.abs(r);
          sumX += x;
          continue;
        }
        pushed++;
        sumX += x + r;
        batch.merge(ColumnFamilies.ranks, url, encodeFloat64s(r, -r));
        let total = 0;
        for (const w of weights) total += w;
        if (!(total > 0)) continue; // dangling: the mass stays in x
        const scale = (damping * r) / total;
        for (let i = 0; i < targets.length; i++) {
          const w = weights[i]!;
          if (w === 0) continue;
          const t = targets[i]!;
          combined.set(t, (combined.get(t) ?? 0) + scale * w);
          contributions++;
        }
      }
    } finally {
      await ranks.close();
      await links.close();
      snapshot.release();
    }

    const perPartition: Array<{ urls: string[]; deltas: number[] }> = Array.from({ length: env.partitioner.partitions }, () => ({ urls: [], deltas: [] }));
    for (const [t, delta] of combined) {
      const part = perPartition[env.partitioner.forUrl(t)]!;
      part.urls.push(t);
      part.deltas.push(delta);
    }
    const sent = perPartition.map(() => 0);
    for (let q = 0; q < perPartition.length; q++) {
      const { urls, deltas } = perPartition[q]!;
      for (let i = 0; i < urls.length; i += CONTRIBUTIONS_PER_MESSAGE) {
        const payload = contributionCodec.encode({ type: 'metrics', round, urls: urls.slice(i, i + CONTRIBUTIONS_PER_MESSAGE), deltas: deltas.slice(i, i + CONTRIBUTIONS_PER_MESSAGE) });
        await outbox.enqueue(batch, topic(Namespaces.metrics, partitionId(q)), payload);
        sent[q]!++;
      }
    }
    const report: PushReport = { round, sent, pushed, remaining, sumX, contributions, combined: combined.size };
    batch.put(ColumnFamilies.meta, reportKey, packr.pack(report));
    await store.write(batch);
    await outbox.publish();
    return report;
  }
}

/** Compares the source URL of link key `key` (bytes before 0x00) with `url`. */
function compareSource(key: Buffer, url: Buffer): number {
  const n = url.length;
  const c = Buffer.compare(key.subarray(0, Math.min(n, key.length)), url);
  if (c !== 0) return c;
  if (key.length <= n) return -1;
  // key starts with url: it is url's own link when the next byte is the separator;
  // otherwise the source is longer than url and sorts after it.
  return key[n] === SEP ? 0 : 1;
}

async function scores(store: Store): Promise<PartitionScores> {
  const pages = new ChunkCursor(store.chunks(ColumnFamilies.pages, { keysOnly: true, chunkSize: 4096 }));
  const ranks = new ChunkCursor(store.chunks(ColumnFamilies.ranks, { chunkSize: 4096 }));
  const urls: string[] = [];
  const values: number[] = [];
  try {
    while (await pages.ready()) {
      const url = pages.key;
      pages.advance();
      let score = 0;
      while (await ranks.ready()) {
        const c = Buffer.compare(ranks.key, url);
        if (c > 0) break;
        if (c === 0) {
          const [x = 0, r = 0] = decodeFloat64s(ranks.value);
          score = x + r;
        }
        ranks.advance();
      }
      urls.push(url.toString('utf8'));
      values.push(score);
    }
  } finally {
    await pages.close();
    await ranks.close();
  }
  return { urls, scores: values };
}

async function counts(store: Store): Promise<PartitionCounts> {
  const [pages, outlinks, backlinks] = await store.multiGet(ColumnFamilies.counters, [Counters.pages, Counters.outlinks, Counters.backlinks]);
  const n = (v: Buffer | undefined) => (v ? Number(decodeInt64(v)) : 0);
  return { pages: n(pages), outlinks: n(outlinks), backlinks: n(backlinks) };
}

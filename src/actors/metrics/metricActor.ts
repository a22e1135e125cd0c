import { randomUUID } from 'node:crypto';
import { Packr } from 'msgpackr';
import type { Broker, BrokerMessage } from '../../runtime/brokers/index.js';
import type { PackedKeys, Snapshot, Store, WriteBatch } from '../../storage/index.js';
import { ActorStoppedError, decodeFloat64s, decodeInt64, encodeInt64, isShardflowError, messageKey, type ActorContext, type Behavior, type Cancel, type Deliveries, type StreamOutbox } from '../../index.js';
import { Namespaces } from '../namespaces.js';
import { contributionCodec, type ContributionBatch } from '../messages.js';
import { PendingContributions } from './pendingContributions.js';
import type { PartitionEnv } from '../partition/env.js';
import { closeSubscribed, openSubscribed, type SubscribedState } from '../partition/subscribedState.js';
import { ColumnFamilies, Counters, linkPrefix, roundKey } from '../partition/schema.js';
import { emptyTargetContributions, enqueuePartitionContributions, type PartitionContributions } from './contributions.js';
import type { Adjacency, AdjacencyCache } from './adjacencyCache.js';
import { linkWeight, linkWeightAt } from '../indexer/linkValue.js';
import { RawChunkCursor } from './chunkCursor.js';
import { RankMirror } from './rankMirror.js';
import { grown } from './grown.js';
import { SlotDeltas } from './slotDeltas.js';
import { MetricCopies, PendingCopies } from './metricCopies.js';
import { HostIndexMemo, refreshHostIndex } from './hostIndex.js';
import type { HostIndexTotal } from '../partition/schema.js';
import { addResidual, emptyHistogram } from './residualHistogram.js';
import { SlotQueue } from './residualFrontier.js';
import { walkLivePages } from '../partition/livePages.js';
import { undampedLinkValue } from '../partition/redirects.js';

/** Messages of the metric actor (contributions arrive as `Deliveries` from `metrics/<p>`). */
export type MetricMessage =
  | Deliveries
  /**
   * Push every page whose |residual| exceeds `threshold`; replies `PushReport`, or
   * `PushDeferred` while contributions of an earlier round, lost by a restart, are not
   * folded again yet (ask again once it resolves). The last round pushed, asked again (after
   * a restart or a lost reply), replies its stored report instead of pushing twice.
   * `barrier` is the coordinator's previous barrier at this partition (the round and the
   * messages of it this partition was to apply): recorded as an `await-applied` records it
   * before the push, so that an incarnation restored from a checkpoint taken before it had
   * folded them (a cluster host does not hold a barrier's reply for a checkpoint,
   * docs/checkpoints.md, "The web index") defers this push until the broker has delivered
   * them again.
   */
  | { readonly type: 'push'; readonly round: number; readonly threshold: number; readonly damping: number; readonly barrier?: RoundBarrierAt }
  /**
   * The repair pass (docs/ARCHITECTURE.md, "Crash and restart"): sends d x_p w_pq / sum w_pq
   * along every outlink as contributions of `round`, without changing `ranks`; replies its
   * `PushReport` (stored like a push's, so asked again it is not sent twice). Run after
   * `resetInFlightState` set every r to t - x, it makes r = t - x + d W^T x again.
   */
  | { readonly type: 'repair'; readonly round: number; readonly damping: number }
  /** Commits the pending contributions (sent to itself after a delay; also done before reads of `ranks`). */
  | { readonly type: 'flush' }
  /** Replies `RoundApplied` for `round`. */
  | { readonly type: 'applied'; readonly round: number }
  /**
   * Replies at once with a `Barrier` whose `ready` resolves when this partition has applied
   * at least `expected` messages of `round` (the round's barrier without polling). `ready`
   * rejects with ActorStoppedError if the actor stops first: ask again. `expected` is kept
   * in `meta` until that many messages of the round are committed, so that an incarnation
   * started after a restart knows which rounds it must fold again before it pushes.
   */
  | {
      readonly type: 'await-applied';
      readonly round: number;
      readonly expected: number;
      /**
       * For a host whose replies wait for checkpoints (a cluster worker with `--checkpoints`):
       * reply only once a checkpoint holds the messages counted (the coordinator's last
       * barrier before it stops). The metric actor itself answers the same either way.
       */
      readonly durable?: boolean;
    }
  /** Replies `PartitionScores`: every page with its unnormalised score x + r. */
  | { readonly type: 'scores' }
  /** Replies `PartitionCounts`. */
  | { readonly type: 'counts' }
  /**
   * Replies `RedirectLinks`: every page of this partition whose outlinks are one undamped
   * redirect link, with its target (what the coordinator's stopping bound needs: the longest
   * chain of undamped hops, coordinator.ts).
   */
  | { readonly type: 'redirects' }
  /** Replies the highest round this partition has pushed (0 for none), so rounds are numbered on after a restart. */
  | { readonly type: 'last-round' }
  /**
   * Replies the `PushReport` of the last push, or `undefined` when there is none or its
   * messages went with an earlier process's in-memory broker (they can never all arrive).
   */
  | { readonly type: 'last-report' }
  /** Rewrites the partition's `hosts` index (hostIndex.ts) at wall-clock `now`; replies `HostIndexTotal`. */
  | { readonly type: 'index-hosts'; readonly now: number };

/** What a partition did in one push round. */
export interface PushReport {
  readonly round: number;
  /** Messages sent to `metrics/<q>`, indexed by q. */
  readonly sent: number[];
  /** Payload bytes of those messages, indexed by q (absent in reports stored before it was counted). */
  readonly bytes?: number[];
  /** Pages pushed. */
  readonly pushed: number;
  /** Sum of |r| over pages not pushed (below the threshold). */
  readonly remaining: number;
  /**
   * `remaining` by magnitude: per power-of-two bucket of |r|, the sum of |r| of the pages in
   * it (residualHistogram.ts), from which the coordinator sets the next threshold (absent in
   * reports stored before it was counted, and in a repair's).
   */
  readonly residuals?: number[];
  /** Sum of x over all pages after the push. */
  readonly sumX: number;
  /** Link contributions before combining, and entries after combining per target. */
  readonly contributions: number;
  readonly combined: number;
  /**
   * Sum of |delta| of the graph changes' corrections (round 0) this partition had folded when
   * the push began: the coordinator counts the ones folded later as residual of the round.
   */
  readonly corrections: number;
  /**
   * Backlinks sent a copy of their source's x by this push (metricCopies.ts), and the
   * messages and payload bytes that carried the copies to other partitions (also in `sent`
   * and `bytes`; a partition's copies ride in its last contribution message, whose
   * contributions count in those bytes too); absent in reports stored before copies were sent.
   */
  readonly copies?: number;
  readonly copyMessages?: number;
  readonly copyBytes?: number;
  /**
   * Pages of this partition whose outlinks are one undamped redirect link
   * (partition/redirects.ts), after the push; absent in reports stored before it was
   * counted. When any partition has some, the coordinator asks for them (`redirects`).
   */
  readonly undamped?: number;
}

/**
 * The redirects of one partition: `sources[i]` passes its rank undamped to `targets[i]`
 * (URLs; a target may be on any partition).
 */
export interface RedirectLinks {
  readonly sources: string[];
  readonly targets: string[];
}

/** Contributions a partition applied for one round: messages and sum of |delta|. */
export interface RoundApplied {
  readonly messages: number;
  readonly mass: number;
  /** Sum of |delta| of the corrections (round 0) the partition had folded by then (see `PushReport.corrections`). */
  readonly corrections: number;
}

/**
 * Reply to `push` while this partition has not folded again every message of an earlier
 * round that a restart lost: `deferred` resolves when it has (or rejects if the actor stops
 * first); then ask again. A push must include them, or their mass would come back after the
 * push that should have passed it on, where no round's residual counts it.
 */
export interface PushDeferred {
  readonly deferred: Promise<void>;
}

/** A barrier as the coordinator set it for one partition: `expected` messages of `round` sent to it. */
export interface RoundBarrierAt {
  readonly round: number;
  readonly expected: number;
}

/** Reply to `await-applied`: a promise, so that the actor's mailbox is not held while waiting. */
export interface Barrier {
  readonly ready: Promise<RoundApplied>;
}

/** Unnormalised scores of a partition's pages (deleted ones left out): `scores[i]` is x + r of `urls[i]`. */
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

/** The counters of every partition added up. */
export function sumCounts(counts: readonly PartitionCounts[]): PartitionCounts {
  return counts.reduce((a, c) => ({ pages: a.pages + c.pages, outlinks: a.outlinks + c.outlinks, backlinks: a.backlinks + c.backlinks }), { pages: 0, outlinks: 0, backlinks: 0 });
}

type MetricState = SubscribedState & {
  readonly outbox: StreamOutbox;
  readonly rounds: RoundBook;
  /** The in-memory copy of `ranks`, when valid (see RankMirror). */
  readonly mirror: { current: RankMirror | undefined };
  /** Contributions folded and not yet committed (written by the next flush). */
  readonly pending: PendingContributions;
  /** The current push's [dx, dr] per slot, emptied at the start of each push (see SlotDeltas). */
  readonly deltas: SlotDeltas;
  /** The push's frontier in scan order (SlotQueue), reset at each push that uses the mirror. */
  readonly queue: SlotQueue;
  /** Copies of source metrics folded and not yet committed (merged into `backlinks` by the next flush). */
  readonly copies: PendingCopies;
  /** The scheduled `flush`, COMMIT_INTERVAL_MS after the first contribution folded since the last commit. */
  flushTimer: Cancel | undefined;
  /**
   * The highest round pushed (its report is stored; no round above it has one), read from
   * `meta` once, so that a push of a new round skips looking for a stored report.
   */
  lastPushed: number | undefined;
  /** The hosts index as this incarnation last refreshed it in full, for partial refreshes (HostIndexMemo). */
  hostMemo: HostIndexMemo | undefined;
};

const packr = new Packr({ useRecords: false });
/** Unacked bound of the metric actor's consumer of `metrics/<p>`. */
const METRICS_RECEIVER_QUEUE = 256;
/**
 * How the metric actor's acks wait for checkpoints: no idle checkpoint after a fold's commit
 * (PartitionCheckpointer.hold). Nobody waits for these acks: a round's barrier counts folds,
 * not acks, and the next push's checkpoint (one per round) releases them, or half the bound,
 * or the interval, or the coordinator's last (`durable`) barrier.
 */
const METRICS_HOLD = { idle: false } as const;
/** Folded messages that force a commit (half the consumer's unacked bound of 256). */
const MAX_PENDING_MESSAGES = 128;
/**
 * Longest time folded contributions wait for their commit (the commit interval; Kafka
 * Streams' default is 30 s, 100 ms under exactly-once). Rounds of cnr-2000 reach
 * MAX_PENDING_MESSAGES in about 2 s.
 */
const COMMIT_INTERVAL_MS = 2000;
const SEP = 0;
const LAST_ROUND = 'last-round';
/** `meta` key of the last push's report: the coordinator asks for round k + 1 only after every report of k. */
const LAST_REPORT = 'last-report';
/** Rounds between prunings of `rounds` entries no barrier needs any more. */
const PRUNE_EVERY_ROUNDS = 64;

/**
 * The metric actor of one partition: the reasonable surfer in the push form (docs/ARCHITECTURE.md, "The metric").
 * Per page p, `ranks` holds [x_p, r_p]. A push of p merges [r_p, -r_p] into p (x += r,
 * r -= r, as a merge, so contributions that arrive meanwhile are kept) and sends
 * d * r_p * w_pq / sum_q(w_pq) to each outlink target q (r_p in full for a redirect, whose
 * one link is undamped: `Adjacency.undamped`, partition/redirects.ts); a dangling page keeps its mass in
 * x. The traversal walks `ranks` and `outlinks` in step (both keyed by the page URL first),
 * so it makes no random reads. Contributions to pages of this partition are applied in place
 * (one summed [dx, dr] merge per page, SlotDeltas): a page later in the scan is pushed with
 * them in the same push (Gauss-Seidel order within the partition), so a round goes as far as
 * several synchronous ones where links stay on their host, and so on their partition. Only
 * pages over the threshold are pushed (the push of Andersen, Chung and Lang, FOCS 2006, as the
 * incremental PageRank of Ohsaka et al., KDD 2015, and the dynamic frontier of DF-P PageRank,
 * Sahu, Kothapalli, Banerjee 2024, push only what a change reached); with a valid RankMirror a
 * push visits only its ResidualFrontier's candidates (residualFrontier.ts), in scan order, so
 * a round costs what it pushes and what reached the partition. A first-in first-out
 * frontier that pushed again, in the same push, every page its own contributions took over
 * the threshold was measured and dropped: on cnr-2000 it cut rounds but pushed a recrawled
 * host's region more often (758 k pushes against 472 k) and took 2.2x the seconds' share
 * (docs/ARCHITECTURE.md, "Cost of an update"). Contributions to other partitions are summed
 * per target (a combiner) and batched per target partition into `metrics/<q>`. The merges, the outbox
 * rows and the round's report are one write batch: a push is atomic and, replayed after a
 * crash, returns the stored report instead of pushing again.
 *
 * Incoming contributions are folded in memory (PendingContributions), summed per page, and
 * counted per round for the coordinator's barrier. A push uses r plus the pending delta but
 * writes only the transfer [r_eff, -r_eff] of each pushed page; the pending deltas are
 * committed by a flush (one [0, delta] merge per page, with the messages' exactly-once
 * marks and `rounds` counts, then the acks) when MAX_PENDING_MESSAGES wait,
 * COMMIT_INTERVAL_MS after the first, and before `ranks` is read (scores, hosts). Between
 * commits the stored r of a pushed page is minus its pending delta: `ranks` shows the
 * committed messages only.
 */
export function metricActor(env: PartitionEnv): Behavior<MetricMessage, MetricState, unknown> {
  const owner = 'metrics';
  return {
    kind: 'metrics',
    async start(ctx) {
      const opened = await openSubscribed(env, ctx, { owner, namespace: Namespaces.metrics, receiverQueueSize: METRICS_RECEIVER_QUEUE, batching: { maxCount: 64, maxDelayMs: 0 }, withOutbox: true });
      await dropLegacyReports(opened.store);
      const rounds = new RoundBook(opened.store, brokerToken(env.broker), env.broker.kind !== 'memory');
      const dropped = await rounds.load();
      if (dropped.length > 0) {
        env.log.warn({ partition: env.partition, rounds: dropped }, 'metric rounds left uncommitted by an earlier process: the in-memory broker lost their messages, so scores may miss their contributions until recomputed');
      }
      return { ...opened, rounds, mirror: { current: undefined }, pending: new PendingContributions(), deltas: new SlotDeltas(), queue: new SlotQueue(() => 0), copies: new PendingCopies(), flushTimer: undefined, lastPushed: undefined, hostMemo: undefined } as MetricState;
    },
    async receive(state, message, ctx) {
      switch (message.type) {
        case 'deliveries':
          if (message.consumer !== state.consumer) return undefined;
          await fold(state, message, ctx);
          return undefined;
        case 'flush':
          state.flushTimer = undefined;
          return flush(state);
        case 'push': {
          if (message.barrier && message.barrier.round < message.round) {
            // The previous barrier, recorded again: restored from a checkpoint older than its
            // folds, this incarnation would otherwise push without the messages it counted.
            await state.rounds.get(message.barrier.round);
            await state.rounds.expect(message.barrier.round, message.barrier.expected);
          }
          const deferred = state.rounds.lagging(message.round);
          if (deferred) return { deferred } satisfies PushDeferred;
          return env.graphLock.runExclusive(() => push(state, message.round, message.threshold, message.damping));
        }
        case 'repair':
          return env.graphLock.runExclusive(() => repairPush(state, message.round, message.damping));
        case 'applied':
          return state.rounds.get(message.round);
        case 'await-applied':
          // Load the round's count while the mailbox is held, so that no delivery is applied
          // between reading the committed count and registering the waiter.
          await state.rounds.get(message.round);
          await state.rounds.get(0); // loaded, so that the reply can carry the corrections folded by then
          await state.rounds.expect(message.round, message.expected);
          return { ready: state.rounds.await(message.round, message.expected) } satisfies Barrier;
        case 'scores':
          await flush(state);
          return scores(state.store);
        case 'counts':
          return counts(state.store);
        case 'redirects':
          return env.graphLock.runExclusive(() => redirectLinks(state));
        case 'index-hosts':
          await flush(state);
          return env.graphLock.runExclusive(() => indexHosts(state, message.now));
        case 'last-round':
          return lastPushed(state);
        case 'last-report': {
          const stored = await readLastReport(state.store);
          return stored && state.rounds.trusts(stored.token) ? stored.report : undefined;
        }
      }
    },
    async stop(state) {
      state.flushTimer?.();
      // Folded contributions that did not commit come back from the broker (they were not
      // acked), but the flow counters took them as settled when folded: count them in flight
      // again, so that the coordinator does not stop (and scores are not read) before their
      // copies are folded again.
      for (const m of state.pending.uncommitted) env.counters.onSent(Namespaces.metrics, messageKey(m));
      state.rounds.close();
      await closeSubscribed(env, state);
    },
  };

  async function push(state: MetricState, round: number, threshold: number, damping: number): Promise<PushReport> {
    const { store, outbox } = state;
    const last = await lastPushed(state);
    const again = await reportAskedAgain(state, round, last);
    if (again) return again;

    const corrections = (await state.rounds.get(0)).mass;
    const cache = env.adjacency;
    const fill = !cache.complete;
    // Use the mirror when nothing else wrote `ranks` since it was built; otherwise scan
    // (and build a new one). Dropped while this push's write is in flight.
    const held = state.mirror.current;
    state.mirror.current = undefined;
    const mirror = held && !fill && held.epoch === cache.ranksEpoch ? held : undefined;
    const next = mirror ?? new RankMirror(cache.ranksEpoch);
    const snapshot = mirror ? undefined : store.snapshot();
    const batch = store.batch();
    const combiner = Combiner.of(cache);
    const own = Number(env.partition);
    const pending = state.pending;
    /** This push's [dx, dr] per slot: the transfers of pushed pages and the contributions to this partition's pages. */
    const deltas = state.deltas;
    deltas.clear(); // what an earlier push left, even one that failed
    let pushed = 0;
    let contributions = 0;
    /** Residual of `slot` now: stored, plus the pending delta, plus this push's changes. */
    const residual = (slot: number) => (next.has(slot) ? next.r(slot) : 0) + pending.delta(slot) + deltas.dr(slot);
    /**
     * Pushes one page (|r| above the threshold): the transfer [r, -r] moves r into x, and
     * d r w_pq goes to each target q. `r` is the committed residual plus the pending delta
     * plus what this push gave it, and the pending delta stays pending: the stored r becomes
     * minus that delta until the commit adds it back (a transfer is correct whatever is
     * pending, so the push need not commit the folded messages, and their redelivery after a
     * crash adds the delta exactly once). A target of this partition gets its share in place
     * (Gauss-Seidel within the partition: with hosts on partitions, most links of a web
     * graph), so that the scan pushes it with that share when it comes to it later in this
     * push, and else the next round; other targets' shares are combined into messages. A
     * dangling page keeps its mass in x.
     */
    /** Called with each local target of a pushed page after its share was added (the mirror's frontier queues it). */
    let reached: ((slot: number) => void) | undefined;
    const pushPage = (slot: number, r: number, adj: Adjacency) => {
      pushed++;
      deltas.add(slot, r, -r);
      const mass = adj.undamped ? r : damping * r;
      const { targets, weights } = adj;
      // The targets' local slots, found once per cached adjacency: per link, two array reads.
      const local = (adj.local ??= cache.localSlots(targets, own));
      // One loop per kind of target inside each accumulator, not a call per link: a call
      // that is not inlined boxes its float64 argument (a heap number per link). The
      // targets of an adjacency are distinct, so each local one is checked for the queue
      // after its share was added, as before.
      combiner.addRemote(targets, local, weights, mass);
      deltas.addShares(local, weights, mass);
      if (reached !== undefined) {
        for (let i = 0; i < local.length; i++) if (local[i]! >= 0) reached(local[i]!);
      }
      contributions += targets.length;
    };
    /**
     * The outlinks of a page the cache lost (invalidated), read from the store. Call sites
     * take the cached adjacency first and await only this: an async lookup per pushed page
     * cost a promise and a microtask turn each (about a sixth of a round's main thread on a
     * 60,000-page cnr-2000 subgraph, with their garbage).
     */
    const readBack = (slot: number) => readAdjacency(store, cache.slotUrl(slot), snapshot, cache);
    try {
      if (mirror) {
        // Ranks from the mirror, and only the pages that may be over the threshold (its
        // frontier: the residual buckets from the threshold's up, and the pages contributions
        // reached since the last push), in the order of a scan (the mirror's position, a
        // min-heap): a page of this partition that a push takes over the threshold is queued
        // when it comes later in that order, so the push makes the scan's decisions
        // (Gauss-Seidel order within the partition) without visiting every page.
        const queue = state.queue;
        queue.reset((slot) => { const p = mirror.position(slot); return p >= 0 ? p : mirror.slots.length + slot; });
        for (const slot of mirror.frontier.candidates(threshold)) queue.add(slot);
        let at = -1;
        reached = (slot) => {
          if (!queue.has(slot) && queue.key(slot) > at && Math.abs(residual(slot)) > threshold) queue.add(slot);
        };
        for (let slot = queue.pop(); slot >= 0; slot = queue.pop()) {
          at = queue.key(slot);
          const r = residual(slot);
          if (Math.abs(r) > threshold) pushPage(slot, r, cache.slotAdjacency(slot) ?? (await readBack(slot)));
        }
        reached = undefined;
      } else if (fill) {
        // The synchronized traversal: walk `outlinks` in step with `ranks` (same key order)
        // and cache every page's outlinks on the way, and the order of the pages.
        const order: number[] = [];
        await walkRanksWithOutlinks(store, snapshot!, (url, x, r, targets, weights, undamped) => {
          const slot = cache.slotOf(url);
          order.push(slot);
          next.set(slot, x, r);
          const adj = cache.set(url, targets, weights, undamped);
          const re = residual(slot);
          if (Math.abs(re) > threshold) pushPage(slot, re, adj);
        }, (source) => cache.markUnresolved(source));
        cache.order = Int32Array.from(order);
      } else {
        // Outlinks come from the cache: scan `ranks` in place, without an object per entry,
        // and find each page's slot by position in the cache's order (comparing key bytes;
        // the URL is decoded only for a page the order does not hold yet).
        const order = cache.order;
        const seen: number[] = [];
        let reordered = false;
        let j = 0;
        for await (const c of store.rawChunks(ColumnFamilies.ranks, { snapshot, chunkSize: 8192 })) {
          const { keys, keyOffsets, values, valueOffsets } = c;
          for (let i = 0; i < c.count; i++) {
            const ko = keyOffsets[i]!;
            const kend = keyOffsets[i + 1]!;
            let slot = -1;
            if (j < order.length) {
              let cmp = cache.compareSlotKey(order[j]!, keys, ko, kend);
              // Pages of the order before this key are gone from `ranks`.
              while (cmp < 0 && ++j < order.length) cmp = cache.compareSlotKey(order[j]!, keys, ko, kend);
              if (j < order.length && cmp === 0) slot = order[j++]!;
            }
            if (slot < 0) {
              reordered = true;
              slot = cache.slotOf(keys.toString('utf8', ko, kend));
            }
            seen.push(slot);
            const vo = valueOffsets[i]!;
            const vlen = valueOffsets[i + 1]! - vo;
            next.set(slot, vlen >= 8 ? values.readDoubleLE(vo) : 0, vlen >= 16 ? values.readDoubleLE(vo + 8) : 0);
            const re = residual(slot);
            if (Math.abs(re) > threshold) pushPage(slot, re, cache.slotAdjacency(slot) ?? (await readBack(slot)));
          }
        }
        if (reordered || seen.length !== order.length) cache.order = Int32Array.from(seen);
      }
      // Pages reached by pending contributions that have no `ranks` entry yet (x = 0; the
      // mirror's frontier lists them). Pages without one that only this push reached wait
      // for the next round (counted below).
      for (const slot of mirror ? [] : pending.slots) {
        if (next.has(slot)) continue;
        const r = residual(slot);
        if (Math.abs(r) > threshold) pushPage(slot, r, cache.slotAdjacency(slot) ?? (await readBack(slot)));
      }
      // Pages whose outlinks changed and were not pushed: read back, so that the count of
      // redirects below (and the coordinator's chain bound) is the graph's.
      await readAdjacencies(store, cache.unresolvedUrls(), snapshot, cache);
    } finally {
      snapshot?.release();
    }
    // What the coordinator's bound needs: the sum of |r| left in the partition (pending
    // deltas included) and the sum of x, over every page with an entry or a delta, but
    // redirects: an alias has no score and is left out of the normaliser, and what a
    // redirect holds its target gets too, so its x is no lower bound of scored mass.
    // With the mirror, from its frontier: only the pages whose r or x moved are accounted
    // again (those contributions reached since the last push, and those this push changed).
    let remaining = 0;
    let sumX = 0;
    let residuals = emptyHistogram();
    const undamped = cache.undampedSlots();
    const frontier = next.frontier;
    if (mirror) {
      const again = (slot: number) => frontier.account(slot, residual(slot), (next.has(slot) ? next.x(slot) : 0) + deltas.dx(slot));
      for (const slot of frontier.touched) again(slot);
      for (const slot of deltas.slots) again(slot);
      remaining = frontier.remaining();
      residuals = frontier.histogram();
      sumX = frontier.sumX();
      for (const slot of undamped) sumX -= frontier.x(slot);
    } else {
      const account = (slot: number, x: number) => {
        const r = residual(slot);
        remaining += Math.abs(r);
        addResidual(residuals, r);
        frontier.account(slot, r, x + deltas.dx(slot));
        if (!undamped.has(slot)) sumX += x + deltas.dx(slot);
      };
      for (const slot of next.slots) account(slot, next.x(slot));
      for (const slot of pending.slots) if (!next.has(slot)) account(slot, 0);
      for (const slot of deltas.slots) if (!next.has(slot) && !pending.has(slot)) account(slot, 0);
    }
    frontier.clearTouched();
    const merged = deltas.sortedSlots();
    if (merged.length > 0) batch.mergeFloat64s(ColumnFamilies.ranks, slotKeys(cache, merged), deltas.operands(merged), 2);
    if (fill) cache.complete = true;

    // Copies of the pages' x for their backlinks (metricCopies.ts), for every page whose x
    // moved past the bound since its copy was last sent (every page, the first time).
    // With the mirror, x moved only on the pages this push changed, and a copy is owed
    // otherwise only by the pages whose outlinks changed (AdjacencyCache.takeCopyOwed).
    const copies = new MetricCopies(cache, own);
    const adjacencyNow = (slot: number) => readAdjacency(store, cache.slotUrl(slot), undefined, cache);
    const owed = cache.takeCopyOwed();
    if (mirror) {
      // The pages this push changed (each once in `deltas.slots`), then those whose outlinks
      // changed (`owed`, possibly repeated) that it did not change; no array of both (it
      // was 66 MB of a 60,000-page converge's allocations).
      const dueX = (slot: number) => {
        const x = (next.has(slot) ? next.x(slot) : 0) + deltas.dx(slot);
        return copies.due(slot, x) ? x : undefined;
      };
      // Indexed: a for-of with an await in its body allocates an iterator result per page.
      const changed = deltas.slots;
      for (let i = 0; i < changed.length; i++) {
        const slot = changed[i]!;
        const x = dueX(slot);
        if (x !== undefined) copies.send(slot, x, cache.slotAdjacency(slot) ?? (await adjacencyNow(slot)));
      }
      const checked = new Set<number>();
      for (const slot of owed) {
        if (deltas.has(slot) || !next.has(slot) || checked.has(slot)) continue;
        checked.add(slot);
        const x = dueX(slot);
        if (x !== undefined) copies.send(slot, x, cache.slotAdjacency(slot) ?? (await adjacencyNow(slot)));
      }
    } else {
      for (const slot of next.slots) {
        const x = next.x(slot) + deltas.dx(slot);
        if (copies.due(slot, x)) copies.send(slot, x, cache.slotAdjacency(slot) ?? (await adjacencyNow(slot)));
      }
      for (const slot of deltas.slots) {
        if (next.has(slot) || !copies.due(slot, deltas.dx(slot))) continue;
        copies.send(slot, deltas.dx(slot), cache.slotAdjacency(slot) ?? (await adjacencyNow(slot)));
      }
    }

    const { per, count } = combiner.byPartition(env.partitioner.partitions);
    const bytes = new Array<number>(per.length).fill(0);
    const sent = await enqueuePartitionContributions(outbox, batch, round, per, cache, bytes, copies);
    const copied = await copies.write(outbox, batch, round, sent, bytes);
    const report: PushReport = { round, sent, bytes, pushed, remaining, residuals, sumX, contributions, combined: count, corrections, copies: copies.links, copyMessages: copied.messages, copyBytes: copied.bytes, undamped: undamped.size };
    recordReport(state, batch, report, last);
    // Continuous mode runs rounds without end: every PRUNE_EVERY_ROUNDS, drop the counts of
    // rounds before the previous one whose messages are all committed (no barrier or
    // restart reads them again; redelivered copies of committed messages stop at the marks).
    const prune = round % PRUNE_EVERY_ROUNDS === 0 ? state.rounds.prunable(round - 1) : 0;
    if (prune > 1) batch.deleteRange(ColumnFamilies.rounds, roundKey(1), roundKey(prune));
    await store.write(batch);
    copies.commit();
    if (prune > 1) state.rounds.forget(prune);
    state.lastPushed = Math.max(last, round);
    const memo = state.hostMemo;
    for (const slot of merged) {
      next.add(slot, deltas.dx(slot), deltas.dr(slot));
      memo?.touch(slot);
    }
    state.mirror.current = next;
    await outbox.publish();
    return report;
  }

  /**
   * Rewrites the partition's hosts index (`index-hosts`; call after a flush, under the graph
   * lock): only the hosts whose pages' scores moved since the last refresh, from the mirror,
   * while the HostIndexMemo of that refresh is valid (the same mirror, `ranksEpoch` unmoved:
   * no page came or went, nothing else wrote `ranks`); else a full refresh (a walk of every
   * live page), which starts a new memo when a mirror is there to read scores from later.
   */
  async function indexHosts(state: MetricState, now: number): Promise<HostIndexTotal> {
    const cache = env.adjacency;
    const mirror = state.mirror.current;
    const memo = state.hostMemo;
    const epoch = cache.ranksEpoch;
    if (memo && mirror && memo.mirror === mirror && memo.epoch === epoch && mirror.epoch === epoch) {
      const score = (slot: number) => (mirror.has(slot) ? mirror.x(slot) + mirror.r(slot) : 0);
      return memo.refresh(state.store, now, score, (slot) => cache.slotUrl(slot));
    }
    state.hostMemo = undefined;
    const next = mirror && mirror.epoch === epoch ? new HostIndexMemo(epoch, mirror) : undefined;
    const totals = await refreshHostIndex(state.store, now, next ? (url, host, score) => next.page(cache.slotOf(url), url, host, score) : undefined);
    state.hostMemo = next;
    return totals;
  }

  /**
   * The partition's redirects (`RedirectLinks`), from the adjacency cache: pages whose
   * outlinks changed since they were read are read back first. A cache not filled yet (no
   * push since the partition started) is filled with the redirects of one scan of `outlinks`.
   */
  async function redirectLinks(state: MetricState): Promise<RedirectLinks> {
    const cache = env.adjacency;
    const snapshot = state.store.snapshot();
    try {
      if (!cache.complete) {
        for await (const c of state.store.chunks(ColumnFamilies.outlinks, { snapshot, chunkSize: 8192 })) {
          c.keys.forEach((key, i) => skippedLink(key, c.values[i]!, (source) => cache.markUnresolved(source)));
        }
      }
      await readAdjacencies(state.store, cache.unresolvedUrls(), snapshot, cache);
    } finally {
      snapshot.release();
    }
    const sources: string[] = [];
    const targets: string[] = [];
    for (const slot of cache.undampedSlots()) {
      const adj = cache.slotAdjacency(slot)!;
      sources.push(cache.slotUrl(slot));
      targets.push(cache.targetKeys.text(adj.targets[0]!));
    }
    return { sources, targets };
  }

  /**
   * Sends the contributions of x (d x_p w_pq / sum w_pq to every target q of every page p) as
   * messages of `round`, in one synchronized walk of `ranks` and `outlinks`; `ranks` is not
   * written. The outbox rows and the report are one write batch, as for a push.
   */
  async function repairPush(state: MetricState, round: number, damping: number): Promise<PushReport> {
    const { store, outbox } = state;
    const last = await lastPushed(state);
    const again = await reportAskedAgain(state, round, last);
    if (again) return again;
    const cache = env.adjacency;
    const snapshot = store.snapshot();
    const batch = store.batch();
    const combiner = Combiner.of(cache);
    const copies = new MetricCopies(cache, Number(env.partition));
    let pushed = 0;
    let sumX = 0;
    let contributions = 0;
    try {
      await walkRanksWithOutlinks(store, snapshot, (url, x, r, targets, weights, undamped) => {
        sumX += x + r;
        const adj = cache.set(url, targets, weights, undamped);
        // The repair dropped the outboxes: copies go again to every backlink (a new process's cache has none sent).
        const slot = cache.slotOf(url);
        if (copies.due(slot, x)) copies.send(slot, x, adj);
        if (x === 0 || targets.length === 0) return;
        contributions += combiner.add(adj, adj.undamped ? x : damping * x);
        pushed++;
      });
    } finally {
      snapshot.release();
    }
    const { per, count } = combiner.byPartition(env.partitioner.partitions);
    const bytes = new Array<number>(per.length).fill(0);
    const sent = await enqueuePartitionContributions(outbox, batch, round, per, cache, bytes, copies);
    const copied = await copies.write(outbox, batch, round, sent, bytes);
    const report: PushReport = { round, sent, bytes, pushed, remaining: 0, sumX, contributions, combined: count, corrections: (await state.rounds.get(0)).mass, copies: copies.links, copyMessages: copied.messages, copyBytes: copied.bytes };
    recordReport(state, batch, report, last);
    await store.write(batch);
    copies.commit();
    state.lastPushed = Math.max(last, round);
    await outbox.publish();
    return report;
  }

  /**
   * The last round pushed may be asked again (after a restart or a lost reply): its stored
   * report, so that it is returned instead of pushing (or repairing) twice.
   * @returns undefined for any other round
   */
  async function reportAskedAgain(state: MetricState, round: number, last: number): Promise<PushReport | undefined> {
    if (round !== last) return undefined;
    const stored = await readLastReport(state.store);
    return stored?.report.round === round ? stored.report : undefined;
  }

  /** Adds a push's report and the last round pushed to `batch` (committed with the push). */
  function recordReport(state: MetricState, batch: WriteBatch, report: PushReport, last: number): void {
    batch.put(ColumnFamilies.meta, LAST_REPORT, packr.pack([report, state.rounds.token]));
    batch.put(ColumnFamilies.meta, LAST_ROUND, encodeInt64(Math.max(last, report.round)));
  }

  /** The highest round this partition pushed (0 for none), from `meta` on first use. */
  async function lastPushed(state: MetricState): Promise<number> {
    if (state.lastPushed === undefined) {
      const v = await state.store.get(ColumnFamilies.meta, LAST_ROUND);
      state.lastPushed = v ? Number(decodeInt64(v)) : 0;
    }
    return state.lastPushed;
  }

  /**
   * Folds contribution messages into the pending deltas (memory only); a flush commits them
   * when MAX_PENDING_MESSAGES wait (the consumer's unacked bound must not stop delivery
   * before a round's barrier is reached), COMMIT_INTERVAL_MS after the first of them, or
   * before `ranks` is read. A message is settled in the flow counters when folded (it is
   * applied: the round barrier counts it) and acked after the commit; until then a crash
   * makes the broker redeliver it.
   */
  async function fold(state: MetricState, deliveries: Deliveries, ctx: ActorContext<MetricMessage>): Promise<void> {
    const { pending, consumer } = state;
    const cache = env.adjacency;
    for (const m of deliveries.messages) {
      const verdict = await state.marks.classify(m.producer, m.sequence);
      if (verdict.kind !== 'new') {
        // committed before (a redelivery after a lost ack), or from a fenced-off older
        // producer incarnation: dead-lettered with the reason, its mark left as it is
        // (with checkpoints, both wait for one: the mark that skips it may not be in one yet)
        const settle = () => (verdict.kind === 'applied' ? consumer.ack(m) : consumer.deadLetter(m, verdict.reason));
        if (env.checkpoints) env.checkpoints.hold(consumer, 1, settle, METRICS_RECEIVER_QUEUE, METRICS_HOLD);
        else await settle();
        env.counters.onSettled(Namespaces.metrics, messageKey(m));
        continue;
      }
      if (pending.holds(m.producer, m.sequence)) {
        pending.held(m);
        continue;
      }
      let value: ContributionBatch;
      try {
        value = contributionCodec.decode(m.payload);
      } catch (err) {
        if (!isShardflowError(err)) throw err;
        pending.undecodable(m, err.message);
        env.counters.onSettled(Namespaces.metrics, messageKey(m));
        continue;
      }
      await state.rounds.get(value.round); // the committed count, before adding to it
      const frontier = state.mirror.current?.frontier; // a push without a mirror scans every page
      const { keys, deltas, source } = value;
      if (value.copies) state.copies.add(value.copies);
      let mass = 0;
      for (let i = 0; i < deltas.length; i++) {
        const start = i === 0 ? 0 : keys.ends[i - 1]!;
        const end = keys.ends[i]!;
        const slot = source ? cache.remoteSlot(source.dictionary, source.indexes[i]!, keys.bytes, start, end) : cache.slotOfKey(keys.bytes, start, end);
        const delta = deltas[i]!;
        pending.add(slot, delta);
        frontier?.touch(slot);
        mass += Math.abs(delta);
      }
      pending.folded(m, value.round, mass);
      state.rounds.applied(value.round, mass);
      env.counters.onSettled(Namespaces.metrics, messageKey(m));
    }
    if (pending.messages >= MAX_PENDING_MESSAGES) await flush(state);
    else if (!pending.empty && state.flushTimer === undefined && !ctx.signal.aborted) {
      state.flushTimer = ctx.clock.setTimeout(() => {
        if (!ctx.signal.aborted) ctx.self.tell({ type: 'flush' }).catch(() => undefined);
      }, COMMIT_INTERVAL_MS);
    }
  }

  /** Commits the pending contributions (one [0, delta] merge per page) with their marks and round counts, then acks them. */
  async function flush(state: MetricState): Promise<void> {
    state.flushTimer?.();
    state.flushTimer = undefined;
    const { pending, store } = state;
    if (pending.empty) return;
    const cache = env.adjacency;
    const mirror = state.mirror.current;
    state.mirror.current = undefined;
    // Slots were given in `ranks` key order by the first traversal: sorted, the merges come
    // in about key order (memtable insert hints).
    const slots = Int32Array.from(pending.slots).sort();
    const operands = new Float64Array(2 * slots.length);
    for (let i = 0; i < slots.length; i++) operands[2 * i + 1] = pending.delta(slots[i]!);
    const batch = store.batch();
    if (slots.length > 0) batch.mergeFloat64s(ColumnFamilies.ranks, slotKeys(cache, slots), operands, 2);
    pending.record(batch, state.marks);
    state.copies.record(batch);
    state.rounds.recordCommit(batch, pending.rounds);
    await store.write(batch); // a failure restarts the actor, whose stop() counts them in flight again
    state.copies.committed();
    state.rounds.committed(pending.rounds);
    const settle = pending.committed();
    if (mirror) {
      const memo = state.hostMemo;
      for (let i = 0; i < slots.length; i++) {
        mirror.add(slots[i]!, 0, operands[2 * i + 1]!);
        memo?.touch(slots[i]!);
      }
      state.mirror.current = mirror;
    }
    await settleCommitted(state, settle);
  }

  /** Acks (or dead-letters) messages whose effects committed; with checkpoints, once a checkpoint holds the commit. */
  async function settleCommitted(state: MetricState, settle: ReadonlyArray<{ message: BrokerMessage; reason?: string }>): Promise<void> {
    const { consumer } = state;
    const run = async () => {
      for (const { message, reason } of settle) {
        if (reason !== undefined) await consumer.deadLetter(message, reason);
        else await consumer.ack(message);
      }
    };
    if (env.checkpoints) env.checkpoints.hold(consumer, settle.length, run, METRICS_RECEIVER_QUEUE, METRICS_HOLD);
    else await run();
  }
}

/**
 * The synchronized traversal (docs/ARCHITECTURE.md, "The metric"): walks `ranks` and `outlinks` of `snapshot` in step
 * (both keyed by the page URL first; outlinks are `source 0x00 target`), no random reads, and
 * calls `visit` for every `ranks` row with its URL, x, r and the page's outlink targets and raw
 * weights (arrays reused between calls: copy what you keep). `redirectWithoutRanks`, when
 * given, is called with the source URL of every redirect link whose page has no `ranks` row
 * (an alias no rank reached yet is still part of a redirect chain). Both families are read
 * as raw chunks, compared and decoded in place: an entry costs no Buffer and no await (the
 * chunked cursors' Buffer per key and value and await per entry were a fifth of a fresh
 * converge's allocations on a 60,000-page subgraph of cnr-2000).
 */
async function walkRanksWithOutlinks(
  store: Store,
  snapshot: Snapshot,
  visit: (url: string, x: number, r: number, targets: readonly string[], weights: readonly number[], undamped: boolean) => void,
  redirectWithoutRanks?: (source: string) => void,
): Promise<void> {
  const ranks = new RawChunkCursor(store.rawChunks(ColumnFamilies.ranks, { snapshot, chunkSize: 4096 }));
  const links = new RawChunkCursor(store.rawChunks(ColumnFamilies.outlinks, { snapshot, chunkSize: 8192 }));
  const targets: string[] = [];
  const weights: number[] = [];
  try {
    while (ranks.has || (await ranks.load())) {
      const keys = ranks.keys;
      const ks = ranks.keyStart;
      const ke = ranks.keyEnd;
      const values = ranks.values;
      const vs = ranks.valueStart;
      const vlen = ranks.valueEnd - vs;
      const x = vlen >= 8 ? values.readDoubleLE(vs) : 0;
      const r = vlen >= 16 ? values.readDoubleLE(vs + 8) : 0;
      // Outlinks of the page are `url 0x00 target`; skip any of earlier sources.
      targets.length = 0;
      weights.length = 0;
      let firstUndamped = false;
      while (links.has || (await links.load())) {
        const lkeys = links.keys;
        const ls = links.keyStart;
        const le = links.keyEnd;
        const cmp = compareSource(lkeys, ls, le, keys, ks, ke);
        if (cmp > 0) break;
        if (cmp === 0) {
          targets.push(lkeys.toString('utf8', ls + (ke - ks) + 1, le));
          weights.push(linkWeightAt(links.values, links.valueStart));
          if (targets.length === 1) firstUndamped = undampedLinkValue(links.values.subarray(links.valueStart, links.valueEnd));
        } else if (redirectWithoutRanks) skippedLink(lkeys.subarray(ls, le), links.values.subarray(links.valueStart, links.valueEnd), redirectWithoutRanks);
        links.advance();
      }
      // The ranks chunk stays valid while `links` loads: the two iterators are apart.
      visit(keys.toString('utf8', ks, ke), x, r, targets, weights, targets.length === 1 && firstUndamped);
      ranks.advance();
    }
    if (redirectWithoutRanks) {
      // Sources after the last `ranks` row.
      for (; links.has || (await links.load()); links.advance()) {
        skippedLink(links.keys.subarray(links.keyStart, links.keyEnd), links.values.subarray(links.valueStart, links.valueEnd), redirectWithoutRanks);
      }
    }
  } finally {
    await ranks.close();
    await links.close();
  }
}

/** Calls `report` with the source URL of outlink key `key` (`source 0x00 target`) when its value is a redirect's. */
function skippedLink(key: Buffer, value: Buffer, report: (source: string) => void): void {
  if (undampedLinkValue(value)) report(key.toString('utf8', 0, key.indexOf(SEP)));
}

/**
 * Sums contributions per target id in a typed array (a combiner, as in Pregel: Malewicz et al., SIGMOD 2010), so each
 * target gets one entry per round however many pages link to it.
 */
class Combiner {
  /** One per adjacency cache (a partition's), reused by its pushes: they run one at a time, under the graph lock. */
  static readonly #byCache = new WeakMap<AdjacencyCache, Combiner>();
  #acc: Float64Array<ArrayBuffer>;
  #seen: Uint8Array<ArrayBuffer>;
  readonly #touched: number[] = [];
  private constructor(readonly cache: AdjacencyCache) {
    this.#acc = new Float64Array(Math.max(1024, cache.targetCount));
    this.#seen = new Uint8Array(this.#acc.length);
  }

  /**
   * The cache's combiner, emptied: its arrays are as long as the partition's target ids, so
   * allocating them for every push cost a round after a local change more than the few
   * targets it touched (the entries an earlier push left, even one that failed, are cleared).
   */
  static of(cache: AdjacencyCache): Combiner {
    let c = Combiner.#byCache.get(cache);
    if (!c) Combiner.#byCache.set(cache, (c = new Combiner(cache)));
    c.#clear();
    return c;
  }

  #clear(): void {
    for (const id of this.#touched) {
      this.#acc[id] = 0;
      this.#seen[id] = 0;
    }
    this.#touched.length = 0;
  }

  /** Adds mass * w_pq to each target of `adj`. @returns links used */
  add(adj: Adjacency, mass: number): number {
    const { targets, weights } = adj;
    // Every id in `adj` was assigned by the cache: size once, then a loop over locals (the
    // hottest loop of a round: one pass per link of every pushed page).
    if (this.cache.targetCount > this.#acc.length) this.#grow(this.cache.targetCount);
    const acc = this.#acc;
    const seen = this.#seen;
    const touched = this.#touched;
    const n = targets.length;
    for (let i = 0; i < n; i++) {
      const id = targets[i]!;
      if (seen[id] === 0) {
        seen[id] = 1;
        touched.push(id);
      }
      acc[id]! += mass * weights[i]!;
    }
    return n;
  }

  /**
   * Adds mass * weights[i] to each target `targets[i]` on another partition (`local[i]` < 0:
   * `Adjacency.local`), in the order of the links.
   */
  addRemote(targets: Int32Array, local: Int32Array, weights: Float64Array, mass: number): void {
    for (let i = 0; i < targets.length; i++) {
      if (local[i]! >= 0) continue;
      const id = targets[i]!;
      if (id >= this.#acc.length) this.#grow(Math.max(id + 1, this.cache.targetCount));
      if (this.#seen[id] === 0) {
        this.#seen[id] = 1;
        this.#touched.push(id);
      }
      this.#acc[id]! += mass * weights[i]!;
    }
  }

  /** Summed deltas per target, grouped by the target's partition (zero sums left out). */
  byPartition(partitions: number): { per: PartitionContributions[]; count: number } {
    const per = emptyTargetContributions(partitions);
    let count = 0;
    for (const id of this.#touched) {
      const v = this.#acc[id]!;
      if (v === 0) continue;
      const part = per[this.cache.partitionOf(id)]!;
      part.ids.push(id);
      part.deltas.push(v);
      part.indexes.push(this.cache.indexInPartition(id));
      count++;
    }
    return { per, count };
  }

  #grow(n: number): void {
    this.#acc = grown(this.#acc, n);
    this.#seen = grown(this.#seen, n);
  }
}

/** The keys of `slots`, picked out of the cache's KeyArena (no copy). */
function slotKeys(cache: AdjacencyCache, slots: ArrayLike<number>): PackedKeys {
  const starts = new Uint32Array(slots.length);
  const ends = new Uint32Array(slots.length);
  const arena = cache.slotKeys;
  for (let i = 0; i < slots.length; i++) {
    starts[i] = arena.start(slots[i]!);
    ends[i] = arena.end(slots[i]!);
  }
  return { bytes: arena.bytes, starts, ends };
}

/** Reads one page's outlinks from the store (a page changed since the cache was filled). */
async function readAdjacency(store: Store, url: string, snapshot: Snapshot | undefined, cache: AdjacencyCache): Promise<Adjacency> {
  const targets: string[] = [];
  const weights: number[] = [];
  let first: Buffer | undefined;
  const prefix = linkPrefix(url);
  for await (const [key, value] of store.iterate(ColumnFamilies.outlinks, snapshot ? { prefix, snapshot } : { prefix })) {
    targets.push(key.toString('utf8', prefix.length));
    weights.push(linkWeight(value));
    first ??= value;
  }
  return cache.set(url, targets, weights, targets.length === 1 && undampedLinkValue(first!));
}

/** Pages whose outlinks `readAdjacencies` reads at once (native iterators, each its own prefix). */
const READ_BACK_CONCURRENCY = 32;

/**
 * Reads back the outlinks of `urls` (pages changed since the cache was filled), up to
 * READ_BACK_CONCURRENCY at a time: one by one, the read-back of the pages a large change
 * recrawled held the first round after it for seconds (cnr-2000, 27,407 pages recrawled:
 * the probe round took 32.7 s).
 */
async function readAdjacencies(store: Store, urls: readonly string[], snapshot: Snapshot | undefined, cache: AdjacencyCache): Promise<void> {
  let next = 0;
  let failed: { error: unknown } | undefined;
  const worker = async () => {
    while (next < urls.length && !failed) {
      try {
        await readAdjacency(store, urls[next++]!, snapshot, cache);
      } catch (error) {
        failed ??= { error };
      }
    }
  };
  // Every read ends before this returns, a failed one too: the caller releases `snapshot` next.
  await Promise.all(Array.from({ length: Math.min(READ_BACK_CONCURRENCY, urls.length) }, worker));
  if (failed) throw failed.error;
}

/**
 * Deletes the per-round push reports (`pushed\0<round>`) that stores written before the
 * single `last-report` key keep; one range delete, only when there is one.
 */
async function dropLegacyReports(store: Store): Promise<void> {
  const prefix = 'pushed\u0000';
  for await (const _ of store.iterate(ColumnFamilies.meta, { prefix })) {
    await store.write(store.batch().deleteRange(ColumnFamilies.meta, prefix, 'pushed\u0001'));
    return;
  }
}

/** The last push's report and the broker client it was sent through (see brokerToken). */
async function readLastReport(store: Store): Promise<{ report: PushReport; token: string } | undefined> {
  const v = await store.get(ColumnFamilies.meta, LAST_REPORT);
  if (!v) return undefined;
  const stored = packr.unpack(v) as [PushReport, string] | PushReport;
  // A bare report was written before reports carried their broker client: unknown token.
  return Array.isArray(stored) ? { report: stored[0], token: stored[1] } : { report: stored, token: '' };
}

/** `meta` key prefix of a round's expected message count (see RoundBook.expect). */
const EXPECTED = 'expected\u0000';

const brokerTokens = new WeakMap<Broker, string>();
/** A random id per broker client: which one an expected count was written under. */
function brokerToken(broker: Broker): string {
  let token = brokerTokens.get(broker);
  if (token === undefined) brokerTokens.set(broker, (token = randomUUID()));
  return token;
}

/**
 * What this partition applied per round (messages, mass), read from `rounds` once per round
 * and kept up to date in memory, with the barrier waiters of the coordinator.
 *
 * It also keeps the expected message count of each round whose messages are not all
 * committed yet (from the coordinator's barrier, in `meta` until they are): folded messages
 * that a restart lost come back from the broker at no set time, and a new incarnation must
 * fold them before it pushes (see `lagging`).
 */
class RoundBook {
  /** Per round: messages and mass applied (committed, plus folded by this incarnation), and messages committed. */
  readonly #known = new Map<number, { messages: number; mass: number; committed: number }>();
  /** Round → expected messages, for rounds with fewer committed. */
  readonly #expected = new Map<number, number>();
  readonly #waiters = new Map<number, Array<{ expected: number; resolve: (a: RoundApplied) => void; reject: (e: unknown) => void }>>();
  #closed = false;
  /**
   * @param token the broker client's id (see brokerToken), stored with each expected count
   *   and push report: one written under another client is from an earlier process
   * @param redelivers true for a durable broker, which delivers an earlier process's
   *   uncommitted messages again (the in-memory one lost them)
   */
  constructor(
    readonly store: Store,
    readonly token: string,
    readonly redelivers: boolean,
  ) {}

  /** True when the messages behind what was written under `token` can still all arrive. */
  trusts(token: string): boolean {
    return token === this.token || this.redelivers;
  }

  /**
   * Loads the expected counts a previous incarnation left (rounds not all committed). Those
   * it cannot `trust` are deleted, since waiting for them would never end.
   * @returns the rounds deleted
   */
  async load(): Promise<number[]> {
    const rounds: Array<[number, number, string]> = [];
    for await (const [key, value] of this.store.iterate(ColumnFamilies.meta, { prefix: EXPECTED })) {
      rounds.push([Number(key.toString('utf8', EXPECTED.length)), Number(decodeInt64(value.subarray(0, 8))), value.toString('utf8', 8)]);
    }
    const dropped: number[] = [];
    for (const [round, expected, token] of rounds) {
      if (!this.trusts(token)) {
        dropped.push(round);
        continue;
      }
      await this.get(round);
      this.#expected.set(round, expected);
    }
    if (dropped.length > 0) {
      const batch = this.store.batch();
      for (const round of dropped) batch.delete(ColumnFamilies.meta, EXPECTED + round);
      await this.store.write(batch);
    }
    return dropped;
  }

  async get(round: number): Promise<RoundApplied> {
    let k = this.#known.get(round);
    if (!k) {
      const v = await this.store.get(ColumnFamilies.rounds, roundKey(round));
      const f = v ? decodeFloat64s(v) : undefined;
      k = this.#known.get(round) ?? { messages: f?.[0] ?? 0, mass: f?.[1] ?? 0, committed: f?.[0] ?? 0 };
      this.#known.set(round, k);
    }
    return this.#applied(k);
  }

  /** A round's counts as replied, with the corrections (round 0) folded so far (0 while round 0 is not loaded). */
  #applied(k: { messages: number; mass: number }): RoundApplied {
    return { messages: k.messages, mass: k.mass, corrections: this.#known.get(0)?.mass ?? 0 };
  }

  /**
   * Records that `expected` messages of `round` were sent to this partition, in `meta`
   * unless they are all committed already. Call after `get(round)`.
   */
  async expect(round: number, expected: number): Promise<void> {
    const k = this.#known.get(round);
    if (!k || k.committed >= expected || this.#expected.get(round) === expected) return;
    await this.store.put(ColumnFamilies.meta, EXPECTED + round, Buffer.concat([encodeInt64(expected), Buffer.from(this.token, 'utf8')]));
    this.#expected.set(round, expected);
  }

  /**
   * Resolves when every round before `round` with an expected count has applied it;
   * `undefined` when they all have (the case but after a restart).
   */
  lagging(round: number): Promise<void> | undefined {
    const waits: Array<Promise<RoundApplied>> = [];
    for (const [r, expected] of this.#expected) {
      if (r < round && (this.#known.get(r)?.messages ?? 0) < expected) waits.push(this.await(r, expected));
    }
    if (waits.length === 0) return undefined;
    const all = Promise.all(waits).then(() => undefined);
    all.catch(() => undefined); // a reply nobody awaits any more must not reject unhandled
    return all;
  }

  /** Adds to `batch` (the commit of `rounds`' messages) the removal of expected counts it completes. */
  recordCommit(batch: WriteBatch, rounds: ReadonlyMap<number, { readonly messages: number }>): void {
    for (const [round, { messages }] of rounds) {
      const expected = this.#expected.get(round);
      const k = this.#known.get(round);
      if (expected !== undefined && k && k.committed + messages >= expected) batch.delete(ColumnFamilies.meta, EXPECTED + round);
    }
  }

  /**
   * The first round (at most `before`) whose counts may still be needed: the lowest with
   * messages not all committed. Round 0 (graph changes) is always kept.
   */
  prunable(before: number): number {
    let lowest = before;
    for (const r of this.#expected.keys()) if (r < lowest) lowest = r;
    return lowest;
  }

  /** Drops the in-memory counts of rounds 1 to `before` - 1 (after their `rounds` entries were deleted). */
  forget(before: number): void {
    for (const r of this.#known.keys()) if (r > 0 && r < before && !this.#expected.has(r)) this.#known.delete(r);
  }

  /** Counts `rounds`' messages as committed, once the batch given to `recordCommit` is written. */
  committed(rounds: ReadonlyMap<number, { readonly messages: number }>): void {
    for (const [round, { messages }] of rounds) {
      const k = this.#known.get(round);
      if (!k) continue;
      k.committed += messages;
      const expected = this.#expected.get(round);
      if (expected !== undefined && k.committed >= expected) this.#expected.delete(round);
    }
  }

  /**
   * Records one message of `round`, folded (counted before its commit; a restart reloads
   * the committed count and the broker delivers the uncommitted ones again). Call after
   * `get(round)`, which loads the committed count.
   */
  applied(round: number, mass: number): void {
    const k = this.#known.get(round);
    if (!k) return; // not loaded yet: `get` reads the committed value
    k.messages++;
    k.mass += mass;
    const waiting = this.#waiters.get(round);
    if (!waiting) return;
    const still = waiting.filter((w) => {
      if (k.messages < w.expected) return true;
      w.resolve(this.#applied(k));
      return false;
    });
    if (still.length > 0) this.#waiters.set(round, still);
    else this.#waiters.delete(round);
  }

  /** Resolves once `expected` messages of `round` are applied; call after `get(round)` (then it registers synchronously). */
  await(round: number, expected: number): Promise<RoundApplied> {
    const k = this.#known.get(round);
    if (!k) return this.get(round).then(() => this.await(round, expected));
    if (k.messages >= expected) return Promise.resolve(this.#applied(k));
    if (this.#closed) return Promise.reject(new ActorStoppedError('metric actor stopped before the barrier'));
    return new Promise((resolve, reject) => {
      let list = this.#waiters.get(round);
      if (!list) this.#waiters.set(round, (list = []));
      list.push({ expected, resolve, reject });
    });
  }

  close(): void {
    this.#closed = true;
    for (const list of this.#waiters.values()) for (const w of list) w.reject(new ActorStoppedError('metric actor stopped before the barrier'));
    this.#waiters.clear();
  }
}

/**
 * Compares the source URL of the link key `links[ls .. le)` (its bytes before 0x00) with the
 * page key `keys[ks .. ke)`, in place: negative, 0 or positive as the link's source sorts
 * before, is, or sorts after the page.
 */
function compareSource(links: Buffer, ls: number, le: number, keys: Buffer, ks: number, ke: number): number {
  const n = ke - ks;
  const c = links.compare(keys, ks, ke, ls, Math.min(ls + n, le));
  if (c !== 0) return c;
  if (le - ls <= n) return -1;
  // The link key starts with the page's: it is the page's own link when the next byte is
  // the separator; otherwise its source is longer and sorts after the page.
  return links[ls + n] === SEP ? 0 : 1;
}

async function scores(store: Store): Promise<PartitionScores> {
  const urls: string[] = [];
  const values: number[] = [];
  await walkLivePages(store, (url, score) => {
    urls.push(url);
    values.push(score);
  });
  return { urls, scores: values };
}

async function counts(store: Store): Promise<PartitionCounts> {
  const [pages, outlinks, backlinks] = await store.multiGet(ColumnFamilies.counters, [Counters.pages, Counters.outlinks, Counters.backlinks]);
  const n = (v: Buffer | undefined) => (v ? Number(decodeInt64(v)) : 0);
  return { pages: n(pages), outlinks: n(outlinks), backlinks: n(backlinks) };
}

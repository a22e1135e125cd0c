import { join } from 'node:path';
import { Mutex } from 'async-mutex';
import type { Logger } from 'pino';
import { onFenced, partitionId, PayloadTooLargeError, recordOwnerEpoch, SupervisorStrategy, type Behavior, type FlowCounters, type PartitionCheckpointer, type PartitionFence } from '../index.js';
import type { Broker } from '../runtime/brokers/index.js';
import { CHECKPOINTED_STORE_OPTIONS, type SharedResources } from '../storage/index.js';
import { AdjacencyCache } from '../actors/metrics/adjacencyCache.js';
import type { Partitioner } from '../actors/partition/hostPartitioner.js';
import { PartitionStoreHandle } from '../actors/partition/partitionStore.js';
import { ColumnFamilies } from '../actors/partition/schema.js';
import { crawlPolicy } from '../actors/crawlPolicy/crawlPolicy.js';
import type { CrawlPolicyOptions } from '../actors/crawlPolicy/crawlPolicyOptions.js';
import { gc, type GcOptions } from '../actors/gc/gc.js';
import { readerActor } from '../query/readerActor.js';
import { backlinks } from '../actors/backlinks/backlinks.js';
import { indexer } from '../actors/indexer/indexer.js';
import { metricActor } from '../actors/metrics/metricActor.js';
import type { WeightFunction } from '../actors/metrics/weights.js';
import type { PartitionEnv } from '../actors/partition/env.js';

/** Options of a partition. */
export interface PartitionOptions {
  readonly weigh: WeightFunction;
  /** Damping factor d; a new page gets the teleport residual 1 - d. */
  readonly damping: number;
  /** Run a crawl policy (the demo and `crawl`); `rank` loads a graph without one. */
  readonly crawl: boolean;
  /** Politeness, robots.txt, recrawl and scope of the crawl policy. */
  readonly crawlPolicy?: CrawlPolicyOptions;
  /**
   * The garbage collector's ages and interval. Without it, a crawling partition sweeps
   * with the GC's defaults (30 days, hourly) and a non-crawling one only on request.
   */
  readonly gc?: Omit<GcOptions, 'damping' | 'crawlPolicy'>;
  /** The indexer's cap on distinct outlinks stored per page (see `IndexerOptions.maxOutlinksPerPage`). Default 10,000. */
  readonly maxOutlinksPerPage?: number;
  /** Strategy for the four children. */
  readonly childStrategy?: SupervisorStrategy;
}

/**
 * The children of a partition restart on their own (one-for-one) with exponential backoff
 * from 10 ms to 1 s (while the broker is unreachable, the backoff grows until a child handles
 * a message again: `RestartBook.record`); more than 100 failures in 10 s escalate to the
 * partition, whose own
 * supervisor then restarts the whole partition (store closed and reopened). A
 * PayloadTooLargeError escalates at once: a committed outbox row over the broker's
 * `maxPayloadBytes` stays first in its topic's queue, and no restart sends it (with restarts
 * a rank ran for ever, the child failing some 7 times a second: found by a new user).
 */
export const defaultChildStrategy: SupervisorStrategy = SupervisorStrategy.restartWithBackoff({ minMs: 10, maxMs: 1000, factor: 2, randomFactor: 0.2 })
  .withLimit(100, 10_000)
  .on(PayloadTooLargeError, 'escalate');

/**
 * The strategy of the `partitions` supervisor: a failed partition restarts (store closed and
 * reopened) with backoff from 50 ms to 5 s; more than 10 restarts in a minute escalate, and a
 * PayloadTooLargeError at once (see {@link defaultChildStrategy}): the web index stops with it.
 */
export const partitionSupervision: SupervisorStrategy = SupervisorStrategy.restartWithBackoff({ minMs: 50, maxMs: 5000, factor: 2, randomFactor: 0.2 })
  .withLimit(10, 60_000)
  .on(PayloadTooLargeError, 'escalate');

/** What the partitions of one process share, for {@link partitionEnv}. */
export interface SharedPartitionParts {
  readonly partitioner: Partitioner;
  /** The broker every partition sends and consumes through (wrapped by the process's topic counters). */
  readonly broker: Broker;
  readonly counters: FlowCounters;
  /** Block cache and write-buffer manager of every store of the process. */
  readonly resources: SharedResources;
  readonly log: Logger;
  /** Folder of the stores: partition p's is `<dataDir>/p<p>`. */
  readonly dataDir: string;
}

/**
 * The environment of partition `p` (its store handle, graph lock, adjacency cache, logger),
 * made the same way by `startWebIndex` (every partition, no fence) and by a cluster host
 * (`webIndexApplication`: one partition at a time, under the fence of its lease, which then
 * guards every write of the store). `checkpoints` (a cluster worker's with a checkpoint store)
 * hears every write of the store (`noteWrite`) and holds the partition's effects.
 * @throws RangeError for p outside the partitioner's partitions
 */
export function partitionEnv(shared: SharedPartitionParts, p: number, fence?: PartitionFence, checkpoints?: PartitionCheckpointer): PartitionEnv {
  const partition = partitionId(p, shared.partitioner.partitions);
  const guard = fence || checkpoints
    ? {
        writeGuard: () => {
          fence?.check();
          checkpoints?.noteWrite();
        },
      }
    : {};
  return {
    partition,
    partitioner: shared.partitioner,
    broker: shared.broker,
    store: new PartitionStoreHandle(join(shared.dataDir, `p${partition}`), shared.resources, { ...guard, ...(checkpoints ? CHECKPOINTED_STORE_OPTIONS : {}) }),
    counters: shared.counters,
    log: shared.log.child({ partition }),
    graphLock: new Mutex(),
    adjacency: new AdjacencyCache(shared.partitioner),
    ...(fence ? { fence } : {}),
    ...(checkpoints ? { checkpoints } : {}),
  };
}

/**
 * A partition: a supervised actor that owns the partition's RocksDB store (it holds a
 * reference for its whole life, so the store stays open while a child restarts) and whose
 * children are the crawl policy, indexer, backlinks and metric actors of docs/ARCHITECTURE.md, the
 * garbage collector (`gc`) and the reader that hands out read-only views to the query API
 * (`reader`). Children stop before the partition, which then releases the store.
 *
 * Under a cluster fence (`env.fence`): each start checks the fence and records its epoch as
 * the store's owner epoch in `meta` (FencedError when the store records a newer one), and a
 * FencedError of any child escalates to the partition (its supervisor is expected to stop it
 * for good: `stopWhenFenced`) instead of restarting the child.
 */
export function partitionActor(env: PartitionEnv, options: PartitionOptions): Behavior<never, void> {
  return {
    kind: 'partition',
    async start(ctx) {
      const store = await env.store.acquire();
      // A start that fails (a refused epoch, or a stop that ended the incarnation while it
      // ran) gets no stop(): give the store back here, or it stays open.
      try {
        if (env.fence) {
          env.fence.check();
          await recordOwnerEpoch(store, env.fence.epoch, ColumnFamilies.meta);
        }
        const childStrategy = options.childStrategy ?? defaultChildStrategy;
        const supervision = env.fence ? onFenced(childStrategy, 'escalate') : childStrategy;
        const mailbox = { capacity: 256 };
        // Unbounded: the backlinks actor awaits its pokes, and a bounded mailbox full of pokes
        // while the policy restarts would block it (and a partition stop behind it). Pokes are
        // the only unbounded source (fetch results are bounded by the consumer's unacked
        // limit), and the first one drains `pending`, so the rest are cheap no-ops.
        const policy = options.crawl ? ctx.spawn('crawl-policy', crawlPolicy(env, options.crawlPolicy), { supervision }) : undefined;
        ctx.spawn('indexer', indexer(env, { weigh: options.weigh, damping: options.damping, teleport: 1 - options.damping, ...(options.maxOutlinksPerPage !== undefined ? { maxOutlinksPerPage: options.maxOutlinksPerPage } : {}) }), { supervision, mailbox });
        ctx.spawn('backlinks', backlinks(env, { weigh: options.weigh, ...(policy ? { crawlPolicy: policy } : {}) }), { supervision, mailbox });
        ctx.spawn('metrics', metricActor(env), { supervision, mailbox });
        const gcOptions = { ...(options.crawl ? {} : { intervalMs: Infinity }), ...options.gc, damping: options.damping, ...(policy ? { crawlPolicy: policy } : {}) };
        ctx.spawn('gc', gc(env, gcOptions), { supervision, mailbox: { capacity: 64 } });
        ctx.spawn('reader', readerActor(env), { supervision, mailbox: { capacity: 1024 } });
      } catch (err) {
        await env.store.release();
        throw err;
      }
    },
    receive() {},
    async stop() {
      await env.store.release();
    },
  };
}

import { SupervisorStrategy, type Behavior } from '../index.js';
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
 * from 10 ms to 1 s; more than 100 failures in 10 s escalate to the partition, whose own
 * supervisor then restarts the whole partition (store closed and reopened).
 */
export const defaultChildStrategy: SupervisorStrategy = SupervisorStrategy.restartWithBackoff({ minMs: 10, maxMs: 1000, factor: 2, randomFactor: 0.2 }).withLimit(100, 10_000);

/**
 * A partition: a supervised actor that owns the partition's RocksDB store (it holds a
 * reference for its whole life, so the store stays open while a child restarts) and whose
 * children are the crawl policy, indexer, backlinks and metric actors of docs/ARCHITECTURE.md, the
 * garbage collector (`gc`) and the reader that hands out read-only views to the query API
 * (`reader`). Children stop before the partition, which then releases the store.
 */
export function partitionActor(env: PartitionEnv, options: PartitionOptions): Behavior<never, void> {
  return {
    kind: 'partition',
    async start(ctx) {
      await env.store.acquire();
      const supervision = options.childStrategy ?? defaultChildStrategy;
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
    },
    receive() {},
    async stop() {
      await env.store.release();
    },
  };
}

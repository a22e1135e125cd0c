import type { Logger } from 'pino';
import type { Broker } from '../runtime/brokers/index.js';
import { SharedResources } from '../storage/index.js';
import { ActorStoppedError, ActorSystem, terminalError, FlowCounters, partitionId, SupervisorStrategy, systemClock, TopicFlowCounters, type ActorRef, type ChaosPolicy, type Clock, type PartitionId } from '../index.js';
import { Namespaces } from '../actors/namespaces.js';
import { hostPartitioner, type Partitioner } from '../actors/partition/hostPartitioner.js';
import { aborted, raceStops } from './abortable.js';
import type { PartitionEnv } from '../actors/partition/env.js';
import type { CrawlPolicyMessage } from '../actors/crawlPolicy/crawlPolicy.js';
import { unthrottled, type CrawlPolicyOptions } from '../actors/crawlPolicy/crawlPolicyOptions.js';
import type { DropHostReport, GcMessage, GcOptions, GcSweepReport } from '../actors/gc/gc.js';
import type { PartitionView } from '../query/partitionView.js';
import type { ReaderMessage } from '../query/readerActor.js';
import { crawler } from '../actors/crawler/crawler.js';
import { HttpFetcher, type HttpFetcherOptions } from '../actors/crawler/httpFetch.js';
import type { MetricMessage, PartitionCounts } from '../actors/metrics/metricActor.js';
import { askWithRetry, collectScores, converge, localMetricEndpoint, type ConvergeOptions, type ConvergeResult } from '../actors/metrics/coordinator.js';
import type { WeightFunction } from '../actors/metrics/weights.js';
import { partitionActor, partitionEnv, partitionSupervision } from './partition.js';
import type { HostIndexTotal } from '../actors/partition/schema.js';
import type { IndexerMessage } from '../actors/indexer/indexer.js';
import { resetInFlightState } from '../actors/partition/repair.js';
import { repairWebIndex, type RepairReport } from './repair.js';
import { drainBacklog, webIndexSubscriptions, type DrainReport } from './resume.js';
import { mkdirsSync } from '../storage/index.js';

/** Options of `startWebIndex`. */
export interface WebIndexOptions {
  /** Number of partitions (>= 1). */
  readonly partitions: number;
  /** Folder holding one RocksDB store per partition (`p<i>`); created if missing. */
  readonly dataDir: string;
  readonly broker: Broker;
  readonly weigh: WeightFunction;
  /** Damping factor d. Default 0.85. */
  readonly damping?: number;
  /** Crawlers to run (0: none, as in `shardflow rank`). */
  readonly crawlers?: number;
  readonly fetcher?: HttpFetcherOptions;
  /**
   * Shared RocksDB memory budget in bytes. Default 16 MiB per partition, at least 256 MiB:
   * with 64 partitions under 256 MiB the stores stalled on flushes (epa ranked in 40 s
   * instead of 6 s).
   */
  readonly memoryBudgetBytes?: number;
  readonly log: Logger;
  readonly clock?: Clock;
  /** Fault injection before each `receive()` (`--chaos`). */
  readonly chaos?: ChaosPolicy;
  /**
   * Politeness, robots.txt, recrawl, scope and budget of the crawl policies. Default
   * `unthrottled` (for graphs replayed from this process); `shardflow crawl` passes polite
   * settings. robots.txt is fetched through the crawlers' fetcher unless `robots` is given.
   */
  readonly crawlPolicy?: CrawlPolicyOptions;
  /**
   * Most distinct outlinks the indexers store per page; the rest are left out and the
   * truncation recorded (`IndexerOptions.maxOutlinksPerPage`). Default 10,000.
   */
  readonly maxOutlinksPerPage?: number;
  /** The garbage collectors' ages and interval (see `GcOptions`). */
  readonly gc?: Omit<GcOptions, 'damping' | 'crawlPolicy'>;
  /**
   * Repair the stores before anything runs, because the data dir's last run did not stop
   * quiet (`DataDir.needsRecovery`): see `repairWebIndex`. The broker must not hold that
   * run's messages (the in-memory broker, or a fresh scope). Default false.
   */
  readonly repair?: boolean;
  /** Called once a repair completed, with what it did (before crawlers start). */
  readonly onRepaired?: (report: RepairReport) => void;
  /**
   * Resume an earlier process's work on the same durable broker scope: once the actors run,
   * wait until they have applied every message it left there (`drainBacklog`). Default false.
   */
  readonly resume?: boolean;
  /** Called once a resume drained the earlier process's messages. */
  readonly onResumed?: (report: DrainReport) => void;
  /**
   * Aborting it during the start (the repair) stops the actors and closes the stores, and
   * `startWebIndex` rejects with the signal's reason; the record still says `repairing`.
   */
  readonly signal?: AbortSignal;
}

/** What `WebIndex.stop()` found. */
export interface StopReport {
  /**
   * True when nothing was in flight when the actors stopped (every message sent was
   * settled, every folded contribution committed): the next run on the data dir needs no
   * repair.
   */
  readonly quiet: boolean;
}

/** A running web index: the actor tree of docs/ARCHITECTURE.md ("Supervision tree") on one process. */
export interface WebIndex {
  readonly system: ActorSystem;
  readonly partitioner: Partitioner;
  readonly counters: FlowCounters;
  /** Messages sent and settled per topic, counted by wrapping the broker (the console's per-partition lag). */
  readonly topicFlow: TopicFlowCounters;
  /** `options.broker` wrapped by `topicFlow`: publish through it so that the per-topic counts see the messages. */
  readonly broker: Broker;
  /** Hands URLs to the crawl policies of their partitions. @throws InvalidUrlError for a URL without host */
  seed(urls: readonly string[]): Promise<void>;
  /** Resolves when no message is in flight and every crawl policy is drained. */
  quiescence(options?: { pollMs?: number }): Promise<void>;
  /**
   * Runs metric rounds to convergence, numbering rounds on from the last one stored. Rounds
   * end only when no message is in flight (`quiet`), so calling it while a crawl runs is the
   * continuous mode: it keeps converging while the graph changes and returns once both are done.
   */
  converge(options: Omit<ConvergeOptions, 'clock' | 'damping' | 'pages' | 'firstRound'>): Promise<ConvergeResult>;
  /**
   * Rewrites every partition's `hosts` index (per host: pages, sum and max score) from its
   * current scores; `converge` does it once the metric has converged.
   * @returns each partition's totals
   */
  indexHosts(): Promise<HostIndexTotal[]>;
  /**
   * Every page with its normalised score, highest first. Waits (up to ~2 s) for
   * contributions that a restarted metric actor had folded and hands back through the broker.
   */
  scores(): Promise<Array<[string, number]>>;
  /** Store counters per partition. */
  counts(): Promise<PartitionCounts[]>;
  /** Crawls these known URLs again now (each on its partition's policy). */
  recrawl(urls: readonly string[]): Promise<void>;
  /** Removes every key of `host` and its backlinks elsewhere (the GC of its partition). @throws InvalidArgumentError for a bad host */
  dropHost(host: string): Promise<DropHostReport>;
  /** Runs a GC sweep on every partition now; `cutoff` (ms since the epoch) overrides now - maxAge. */
  gcSweep(cutoff?: number): Promise<GcSweepReport[]>;
  /** The read-only view of partition `p` from its reader (for the query API). */
  view(p: number): Promise<PartitionView>;
  /**
   * Commits what the metric actors folded, then stops every actor (children first), the
   * fetcher, and closes the shared resources. Safe to call twice.
   * @returns whether the stop was quiet (see StopReport)
   */
  stop(): Promise<StopReport>;
}

/**
 * Starts the web index: an actor system with a `partitions` supervisor holding one
 * partition actor per partition (crawl policy, indexer, backlinks, metrics; see
 * `partitionActor`) and, when `crawlers > 0`, a `crawlers` supervisor with the crawler pool.
 *
 * ```
 * /partitions/p0/{crawl-policy, indexer, backlinks, metrics}
 * /partitions/p1/...
 * /crawlers/crawler-0 ...
 * ```
 */
export async function startWebIndex(options: WebIndexOptions): Promise<WebIndex> {
  const clock = options.clock ?? systemClock;
  const damping = options.damping ?? 0.85;
  const partitioner = hostPartitioner(options.partitions);
  const counters = new FlowCounters();
  const topicFlow = new TopicFlowCounters();
  const broker = topicFlow.wrap(options.broker);
  const resources = SharedResources.create({ memoryBudgetBytes: options.memoryBudgetBytes ?? Math.max(256, 16 * options.partitions) * 2 ** 20 });
  const system = ActorSystem.create({
    name: 'shardflow',
    clock,
    logger: options.log,
    ...(options.chaos ? { chaos: options.chaos } : {}),
  });
  const crawling = (options.crawlers ?? 0) > 0;
  mkdirsSync(options.dataDir);
  const shared = { partitioner, broker, counters, resources, log: options.log, dataDir: options.dataDir };
  const envs: PartitionEnv[] = Array.from({ length: options.partitions }, (_, p) => partitionEnv(shared, p));
  if (options.repair) {
    // Step 1 of the repair, before any actor opens an outbox or consumes: local, per store.
    try {
      for (const env of envs) {
        options.signal?.throwIfAborted();
        const store = await env.store.acquire();
        try {
          const reset = await resetInFlightState(store, 1 - damping);
          options.log.info({ partition: env.partition, ...reset }, 'repair: state of messages in flight reset');
        } finally {
          await env.store.release();
        }
      }
    } catch (err) {
      await system.terminate();
      throw err;
    }
  }
  const fetcher = crawling ? new HttpFetcher(options.fetcher ?? {}) : undefined;
  system.supervise(
    'partitions',
    partitionSupervision,
    envs.map((env) => ({
      name: `p${env.partition}`,
      behavior: partitionActor(env, {
        weigh: options.weigh, damping, crawl: crawling,
        crawlPolicy: { ...unthrottled, ...(fetcher ? { robots: fetcher } : {}), ...options.crawlPolicy },
        ...(options.gc ? { gc: options.gc } : {}),
        ...(options.maxOutlinksPerPage !== undefined ? { maxOutlinksPerPage: options.maxOutlinksPerPage } : {}),
      }),
    })),
  );
  let terminated = false;
  void system.whenTerminated.then(() => (terminated = true));
  /** Thrown once the actor system has stopped: nothing asked of it can succeed any more. */
  const stopped = () => terminalError(new ActorStoppedError(`the web index has stopped`));
  const ref = <M, R>(p: number, child: string) => (): ActorRef<M, R> => {
    if (terminated) throw stopped();
    const r = system.lookup<M, R>(`/partitions/p${p}/${child}`);
    if (!r) throw new Error(`/partitions/p${p}/${child} is not running`);
    return r;
  };
  const metricRefs = envs.map((e) => ref<MetricMessage, unknown>(e.partition, 'metrics'));
  const metrics = metricRefs.map((r) => localMetricEndpoint(r, clock));
  const policyRefs = envs.map((e) => ref<CrawlPolicyMessage, void>(e.partition, 'crawl-policy'));
  const gcRefs = envs.map((e) => ref<GcMessage, unknown>(e.partition, 'gc'));
  const readerRefs = envs.map((e) => ref<ReaderMessage, PartitionView>(e.partition, 'reader'));
  const byPartition = (urls: readonly string[]): Map<PartitionId, string[]> => {
    const out = new Map<PartitionId, string[]>();
    for (const u of urls) {
      const p = partitioner.forUrl(u);
      let list = out.get(p);
      if (!list) out.set(p, (list = []));
      list.push(u);
    }
    return out;
  };

  const indexerRefs = envs.map((e) => ref<IndexerMessage, unknown>(e.partition, 'indexer'));
  if (options.repair) {
    try {
      const report = await raceStops(repairWebIndex({ indexers: indexerRefs, metrics, counters, clock, damping, log: options.log }), aborted(options.signal));
      options.onRepaired?.(report);
    } catch (err) {
      await system.terminate();
      await fetcher?.close();
      throw err;
    }
  }
  if (fetcher) {
    system.supervise(
      'crawlers',
      SupervisorStrategy.restartWithBackoff({ minMs: 10, maxMs: 1000, factor: 2, randomFactor: 0.2 }).withLimit(20, 10_000),
      Array.from({ length: options.crawlers! }, (_, i) => ({
        name: `crawler-${i}`,
        behavior: crawler({ name: `crawler-${i}`, broker, partitioner, fetcher, counters, log: options.log }),
        options: { mailbox: { capacity: 64 } },
      })),
    );
  }

  if (options.resume) {
    try {
      const report = await raceStops(drainBacklog(options.broker, webIndexSubscriptions(options.partitions, crawling), clock, options.log), aborted(options.signal));
      options.log.info(report, 'resume: the earlier run\'s messages are applied');
      options.onResumed?.(report);
    } catch (err) {
      await system.terminate();
      await fetcher?.close();
      throw err;
    }
  }
  const counts = async (): Promise<PartitionCounts[]> =>
    (await Promise.all(metricRefs.map((r) => askWithRetry(r, { type: 'counts' }, clock)))) as PartitionCounts[];

  /** See WebIndex.indexHosts. */
  const indexHosts = async (): Promise<HostIndexTotal[]> => {
    const now = Date.now();
    return (await Promise.all(metricRefs.map((r) => askWithRetry(r, { type: 'index-hosts', now }, clock)))) as HostIndexTotal[];
  };
  let stopping: Promise<StopReport> | undefined;
  return {
    system,
    partitioner,
    counters,
    topicFlow,
    broker,
    async seed(urls) {
      await Promise.all([...byPartition(urls)].map(([p, list]) => askWithRetry(policyRefs[p]!, { type: 'seed', urls: list }, clock)));
    },
    async recrawl(urls) {
      await Promise.all([...byPartition(urls)].map(([p, list]) => askWithRetry(policyRefs[p]!, { type: 'recrawl', urls: list }, clock)));
    },
    async dropHost(host) {
      const h = host.trim().toLowerCase();
      // The partition's gc may still be starting (a drop asked just after `serve` listens: found
      // by a new user, a 500 "is not running"): look it up again for up to about 10 s, then ask
      // once (a drop asked twice would report the second's empty counts).
      const lookup = gcRefs[partitioner.forHost(h)]!;
      let gc: ReturnType<typeof lookup> | undefined;
      for (let i = 0; gc === undefined; i++) {
        try {
          gc = lookup();
        } catch (err) {
          if (i >= 40 || terminated) throw err;
          await new Promise<void>((resolve) => clock.setTimeout(resolve, 250));
        }
      }
      return (await gc.ask({ type: 'drop-host', host: h }, { timeoutMs: 600_000 })) as DropHostReport;
    },
    async gcSweep(cutoff) {
      return (await Promise.all(gcRefs.map((r) => r().ask({ type: 'sweep', ...(cutoff !== undefined ? { cutoff } : {}) }, { timeoutMs: 600_000 })))) as GcSweepReport[];
    },
    view: (p) => askWithRetry(readerRefs[partitionId(p, partitioner.partitions)]!, { type: 'view' }, clock, 10),
    async quiescence({ pollMs = 20 } = {}) {
      const sleep = () => new Promise<void>((resolve) => clock.setTimeout(resolve, pollMs));
      for (;;) {
        await sleep();
        if (terminated) throw stopped();
        if (!options.broker || !counters.balanced()) continue;
        const epoch = counters.epoch();
        if (crawling) await Promise.all(policyRefs.map((r) => askWithRetry(r, { type: 'poke' }, clock)));
        await sleep();
        if (counters.balanced() && counters.epoch() === epoch) return;
      }
    },
    async converge(opts) {
      const pages = (await counts()).reduce((a, c) => a + c.pages, 0);
      const last = (await Promise.all(metricRefs.map((r) => askWithRetry(r, { type: 'last-round' }, clock)))) as number[];
      const countPages = async () => (await counts()).reduce((a, c) => a + c.pages, 0);
      const result = await converge(metrics, { quiet: () => counters.balanced(), countPages, ...opts, damping, pages, clock, firstRound: Math.max(0, ...last) + 1 });
      if (result.converged) await indexHosts();
      return result;
    },
    indexHosts,
    async scores() {
      // A metric actor that restarts hands back the contributions it had folded and not
      // committed: its stop() counts them in flight again until the broker delivers them
      // again. Wait for that (up to ~2 s), and collect again if it happened meanwhile.
      const flow = () => [counters.sent.get(Namespaces.metrics) ?? 0, counters.settled.get(Namespaces.metrics) ?? 0] as const;
      for (let attempt = 0; ; attempt++) {
        for (let i = 0; i < 100 && flow()[0] !== flow()[1]; i++) await new Promise<void>((resolve) => clock.setTimeout(resolve, 20));
        const [sent] = flow();
        const scores = await collectScores(metrics);
        const [sentAfter, settledAfter] = flow();
        if ((sentAfter === sent && sentAfter === settledAfter) || attempt >= 5) return scores;
      }
    },
    counts,
    async stop() {
      stopping ??= (async () => {
        // Commit what the metric actors folded, so that a clean stop leaves no round with
        // uncommitted messages (the in-memory broker loses them with the process).
        await Promise.allSettled(metricRefs.map(async (r) => r().ask({ type: 'flush' }, { timeoutMs: 30_000 }))); // a partition not running has nothing folded
        await system.terminate();
        await fetcher?.close();
        // After the actors stopped: a metric actor's stop() counts what it folded and did not
        // commit as in flight again, and the crawl policies release what they held.
        return { quiet: counters.balanced() };
      })();
      return stopping;
    },
  };
}

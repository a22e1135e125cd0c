import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import {
  DataDirError,
  isShardflowError,
  ActorStoppedError, ActorSystem, terminalError, FlowCounters, InvalidArgumentError, PartitionCheckpointer, partitionId, readStreamFlow, recordOwnerEpoch, restoreStageStoreIfBehind, spawningSupervisor, stopWhenFenced, SupervisorStrategy, systemClock,
  TopicFlowCounters, startInspectionServer,
  type ActorRef, type ApplicationHost, type ApplicationHostOptions, type Clock, type ClusterApplication, type HostedPartition, type InspectionServer, type PartitionFence,
  type PartitionStopOptions, stageCheckpointKey, type SpawningSupervisorMessage, type StreamFlowReport,
} from '../index.js';
import type { Broker } from '../runtime/brokers/index.js';
import { SharedResources, Store } from '../storage/index.js';
import { ColumnFamilies, partitionColumnFamilies } from '../actors/partition/schema.js';
import type { GcOptions } from '../actors/gc/gc.js';
import type { IndexerMessage } from '../actors/indexer/indexer.js';
import { askWithRetry, localMetricEndpoint } from '../actors/metrics/coordinator.js';
import type { MetricMessage } from '../actors/metrics/metricActor.js';
import type { WeightFunction } from '../actors/metrics/weights.js';
import type { PartitionEnv } from '../actors/partition/env.js';
import { hostPartitioner, type Partitioner } from '../actors/partition/hostPartitioner.js';
import { PARTITION_STREAM_FAMILIES } from '../actors/partition/streams.js';
import { Namespaces } from '../actors/namespaces.js';
import { WEB_INDEX_STAGE, type WebIndexRequest } from './clusterProtocol.js';
import { checkPartitionShape } from './dataDir.js';
import { partitionActor, partitionEnv, partitionSupervision } from './partition.js';
import type { ReaderMessage } from '../query/readerActor.js';
import type { CrawlDrain, CrawlPolicyMessage } from '../actors/crawlPolicy/crawlPolicy.js';
import { resolveCrawlPolicyOptions, type CrawlPolicyOptions } from '../actors/crawlPolicy/crawlPolicyOptions.js';
import { crawler } from '../actors/crawler/crawler.js';
import { HttpFetcher, type HttpFetcherOptions } from '../actors/crawler/httpFetch.js';
import { PARTITION_READS, type PartitionReadMethod, type PartitionView } from '../query/partitionView.js';
import { mkdirsSync } from '../storage/index.js';

/** The application's name: the default cluster name of its workers. */
export const WEB_INDEX_APPLICATION = 'web-index';

/** Folder of the web index's partition stores under a worker's data dir: `<dataDir>/web-index/p<i>`. */
export const WEB_INDEX_STORES = 'web-index';

/** Options of {@link webIndexApplication}: those of `startWebIndex` that are the same on every worker. */
export interface WebIndexApplicationOptions {
  /** Number of partitions (>= 1): the stage's units of ownership. */
  readonly partitions: number;
  readonly weigh: WeightFunction;
  /**
   * What `weigh` is, as text every worker of the cluster gives alike (`uniform`, `reasonable`,
   * or a digest of a weight table): recorded with the cluster's stages so that a worker with
   * other weights is refused. Default `unnamed`.
   */
  readonly weightsLabel?: string;
  /** Damping factor d. Default 0.85. */
  readonly damping?: number;
  /** The indexers' cap on distinct outlinks stored per page. Default 10,000. */
  readonly maxOutlinksPerPage?: number;
  /**
   * Shared RocksDB memory budget of one worker, in bytes, unless the worker gives one
   * (`ApplicationHostOptions.memoryBudgetBytes`). Default 16 MiB per partition, at least 256 MiB.
   */
  readonly memoryBudgetBytes?: number;
  /** The garbage collectors' ages and interval (without `crawl` they sweep only on request). */
  readonly gc?: Omit<GcOptions, 'damping' | 'crawlPolicy'>;
  /**
   * Crawl: every partition also runs its crawl policy and every worker a crawler pool
   * (`shardflow worker --web-index --crawl`). Default: no crawl (the `rank` job).
   */
  readonly crawl?: WebIndexCrawlOptions;
  /** The partitions' logger (each partition logs as a child with its `partition`). */
  readonly log: Logger;
  readonly clock?: Clock;
}

/** What the workers of a crawling web-index cluster run besides the partitions' other actors. */
export interface WebIndexCrawlOptions {
  /** Crawler actors of each worker, consuming every `crawl-requests/<p>` through the shared subscription `crawlers` (>= 1). Default 4. */
  readonly crawlers?: number;
  /**
   * The crawlers' fetcher, also the crawl policies' robots.txt fetcher. Its `hostMap` (hosts
   * reached without DNS, e.g. a replay server's) is the worker's own; every other field is
   * recorded in the stage's config (workers that fetch differently are refused).
   */
  readonly fetcher?: HttpFetcherOptions;
  /**
   * Politeness, recrawl and scope of every partition's crawl policy (defaults of
   * `resolveCrawlPolicyOptions`: one request per host, one second apart). robots.txt is
   * always fetched through `fetcher`; no budget on a cluster (a budget is per process).
   */
  readonly policy?: Omit<CrawlPolicyOptions, 'robots' | 'budget'>;
}

/** A worker's host of web-index partitions: an `ApplicationHost` with what tests and clients of one process also use. */
export interface WebIndexHost extends ApplicationHost {
  readonly partitioner: Partitioner;
  /** The host's broker wrapped by `topicFlow` (publish through it so that the console counts the messages). */
  readonly broker: Broker;
  /** Messages sent and settled by this process's partitions (process-local; quiet detection across processes uses the `flow` request). */
  readonly counters: FlowCounters;
  readonly topicFlow: TopicFlowCounters;
  /**
   * Answers a {@link WebIndexRequest} for a partition running here.
   * @throws RangeError for another stage or a partition outside [0, partitions);
   *   InvalidArgumentError for an unknown request kind; ActorStoppedError when the partition
   *   does not run here; the partition's errors (after `askWithRetry`'s retries)
   */
  ask(stage: string, partition: number, request: unknown): Promise<unknown>;
}

/** The web index as a `ClusterApplication` whose `startHost` gives a {@link WebIndexHost}. */
export interface WebIndexApplication extends ClusterApplication {
  startHost(options: ApplicationHostOptions): Promise<WebIndexHost>;
}

/**
 * The web index as a cluster application: one stage, `WEB_INDEX_STAGE` (`index`, input
 * namespace `fetches`), of `partitions` units, a unit being a whole web-index partition (its
 * store and every actor of `/partitions/p<i>`). A worker's host runs one actor system with a
 * `partitions` supervisor (`/partitions/p<i>/{indexer,backlinks,metrics,gc,reader}`, the paths
 * of `startWebIndex`), the shared store resources and the console; its stores are
 * `<dataDir>/web-index/p<i>`.
 *
 * Without `crawl` it runs the `rank` job (fetch results come from a loader, `publishFetches`);
 * with `crawl`, every partition also runs its crawl policy (frontier in its store) and the
 * host a crawler pool (`/crawlers/crawler-<k>`) fed by every `crawl-requests/<p>`; a client
 * seeds and asks `drained` (`crawlOnCluster`). Metric rounds,
 * scores and quiet detection are driven from outside through `host.ask` (see
 * `WebIndexRequest`): the coordinator's `converge` over endpoints that ask `{ kind: 'metrics' }`,
 * and `waitStreamsQuiet` over `{ kind: 'flow' }` reports.
 *
 * Fencing (docs/cluster.md, "The web index on a cluster"): `startPartition(stage, p, fence)`
 * checks the fence, opens the store (StoreBusyError while another process holds it), checks
 * its shape (DataDirError) and records the fence's epoch as the owner epoch in `meta`
 * (FencedError when the store records a newer one); the partition then runs under the fence:
 * every write of its store checks it first (the store's write guard), every outbox sends
 * under its epoch and checks it before each send, and a FencedError of any actor stops the
 * whole partition for good and reports `onPartitionStopped`.
 *
 * Checkpoints (`ApplicationHostOptions.checkpoints`; docs/checkpoints.md, "The web index"):
 * `startPartition` first restores the partition's latest checkpoint when the local store is
 * missing or older (CheckpointDamagedError for a damaged one; DataDirError, with the reason,
 * for a partition an earlier owner started that has neither a store nor a checkpoint), then
 * runs it with a `PartitionCheckpointer` (a partition's first start puts a checkpoint before
 * it consumes anything, so a next owner always finds one) that holds its publishes, acks and the replies of
 * asks that change its state (metric `push`, `repair`, `flush`, `index-hosts`, a `durable`
 * barrier `await-applied`, `republish-links`, `seed`) until a checkpoint holds them; a planned
 * `stopPartition(…, { checkpoint: true })` commits the metric actor's folds and checkpoints
 * before the actors stop.
 * @throws RangeError for `partitions` < 1 (from the partitioner); InvalidArgumentError for
 *   bad crawl policy values or `crawl.crawlers` < 1
 */
export function webIndexApplication(options: WebIndexApplicationOptions): WebIndexApplication {
  const partitioner = hostPartitioner(options.partitions);
  const crawlers = options.crawl?.crawlers ?? 4;
  if (options.crawl && (!Number.isInteger(crawlers) || crawlers < 1)) throw new InvalidArgumentError(`crawl.crawlers must be an integer >= 1, got ${crawlers}`);
  return {
    name: WEB_INDEX_APPLICATION,
    stages: [{ name: WEB_INDEX_STAGE, namespace: Namespaces.fetches, subscription: 'indexer', partitions: options.partitions, config: webIndexConfig(options) }],
    supportsCheckpoints: true,
    startHost: (hostOptions) => WebIndexHostImpl.start(options, partitioner, hostOptions),
  };
}

interface Running {
  readonly ref: ActorRef<never, void>;
  readonly env: PartitionEnv;
  readonly epoch: number | undefined;
  /** The partition's checkpoints (a worker given a checkpoint store). */
  readonly checkpoints: PartitionCheckpointer | undefined;
  /** Set by `stopPartition`: the stop was asked for. */
  requested: boolean;
  /** Set by `stopPartition`: resolves once the partition stopped (its hand-back done). */
  stopped?: Promise<void>;
}

/**
 * Requests that change nothing, answered by a partition until its actors stop, also during its
 * hand-back (the last checkpoint): the query API's reads and quiet detection's. Any other
 * request that arrives once the stop was asked waits for the stop and is then handed to the
 * next owner (ActorStoppedError: its consumer has closed by then, so the worker drops it and
 * the broker delivers it again), as before: what a state-changing request does, or a barrier
 * counts, must be committed by the owner that answers it, and the hand-back's flush came before.
 */
const ANSWERED_DURING_HAND_BACK: ReadonlySet<string> = new Set(['read', 'flow', 'drained']);

/**
 * Metric requests whose reply reports a change of the partition's state: replied after a
 * checkpoint holds it. A round's barrier (`await-applied`) is not held: what it counted, a
 * restore takes back only with the acks of those messages, so the broker delivers them again
 * and the coordinator's next push (carrying that barrier) waits for them; only a `durable`
 * barrier (the coordinator's last, before it stops) is held (docs/checkpoints.md, "The web index").
 */
const CHECKPOINTED_METRIC_REQUESTS: ReadonlySet<string> = new Set(['push', 'repair', 'flush', 'index-hosts']);

/** Whether the reply to metric request `message` waits for a checkpoint holding what it reports. */
function heldForCheckpoint(message: MetricMessage): boolean {
  return CHECKPOINTED_METRIC_REQUESTS.has(message?.type) || (message?.type === 'await-applied' && message.durable === true);
}

class WebIndexHostImpl implements WebIndexHost {
  readonly #running = new Map<number, Running>();
  readonly #starting = new Set<number>();
  readonly #storesDir: string;
  readonly #damping: number;
  readonly #clock: Clock;
  #stopping: Promise<void> | undefined;

  private constructor(
    readonly options: WebIndexApplicationOptions,
    readonly hostOptions: ApplicationHostOptions,
    readonly partitioner: Partitioner,
    readonly system: ActorSystem,
    readonly counters: FlowCounters,
    readonly topicFlow: TopicFlowCounters,
    readonly broker: Broker,
    readonly resources: SharedResources,
    readonly inspection: InspectionServer | undefined,
    readonly supervisor: ActorRef<SpawningSupervisorMessage, unknown>,
    readonly fetcher: HttpFetcher | undefined,
  ) {
    this.#storesDir = join(hostOptions.dataDir, WEB_INDEX_STORES);
    this.#damping = options.damping ?? 0.85;
    this.#clock = options.clock ?? systemClock;
  }

  static async start(options: WebIndexApplicationOptions, partitioner: Partitioner, hostOptions: ApplicationHostOptions): Promise<WebIndexHost> {
    const clock = options.clock ?? systemClock;
    const system = ActorSystem.create({
      name: WEB_INDEX_APPLICATION,
      clock,
      logger: hostOptions.logger ?? options.log,
      ...(hostOptions.chaos ? { chaos: hostOptions.chaos } : {}),
    });
    const counters = new FlowCounters();
    const topicFlow = new TopicFlowCounters();
    const broker = topicFlow.wrap(hostOptions.broker);
    const resources = SharedResources.create({ memoryBudgetBytes: hostOptions.memoryBudgetBytes ?? options.memoryBudgetBytes ?? Math.max(256, 16 * options.partitions) * 2 ** 20 });
    mkdirsSync(join(hostOptions.dataDir, WEB_INDEX_STORES));
    let host: WebIndexHostImpl | undefined;
    // The partitions' supervisor: a failure it escalates (restart intensity exceeded)
    // terminates the system, as in startWebIndex; a partition it stops for good is reported.
    const supervisor = system.spawn('partitions', spawningSupervisor((name, ref, reason) => host?.gone(Number(name.slice(1)), ref, reason)), { supervision: SupervisorStrategy.escalate });
    // The crawler pool: stateless, so it runs whatever partitions this worker owns (a shared
    // subscription of every crawl-requests/<p>), as startWebIndex's does.
    const fetcher = options.crawl ? new HttpFetcher(options.crawl.fetcher ?? {}) : undefined;
    if (fetcher) {
      system.supervise(
        'crawlers',
        SupervisorStrategy.restartWithBackoff({ minMs: 10, maxMs: 1000, factor: 2, randomFactor: 0.2 }).withLimit(20, 10_000),
        Array.from({ length: options.crawl?.crawlers ?? 4 }, (_, i) => ({
          name: `crawler-${i}`,
          behavior: crawler({ name: `crawler-${i}`, broker, partitioner, fetcher, counters, log: options.log }),
          options: { mailbox: { capacity: 64 } },
        })),
      );
    }
    const inspection = hostOptions.inspect ? await startInspectionServer(system, { ...hostOptions.inspect, flow: counters, topicFlow }) : undefined;
    host = new WebIndexHostImpl(options, hostOptions, partitioner, system, counters, topicFlow, broker, resources, inspection, supervisor, fetcher);
    return host;
  }

  /** A partition terminated: report it unless its stop was asked for. */
  gone(partition: number, ref: ActorRef<any, any>, reason: unknown): void {
    const entry = this.#running.get(partition);
    if (entry?.ref !== ref || entry.requested) return;
    this.#running.delete(partition);
    void entry.checkpoints?.close();
    this.hostOptions.onPartitionStopped?.(WEB_INDEX_STAGE, partition, reason);
  }

  #partition(stage: string, partition: number): number {
    if (stage !== WEB_INDEX_STAGE) throw new RangeError(`the web index has no stage ${JSON.stringify(stage)} (its one stage is ${JSON.stringify(WEB_INDEX_STAGE)})`);
    return partitionId(partition, this.options.partitions);
  }

  async startPartition(stage: string, partition: number, fence: PartitionFence): Promise<void> {
    const p = this.#partition(stage, partition);
    if (this.#running.has(p) || this.#starting.has(p)) throw new InvalidArgumentError(`partition ${p} of stage ${stage} runs here already`);
    if (this.#stopping) throw new ActorStoppedError(`the web index host is stopping`);
    this.#starting.add(p);
    let checkpoints: PartitionCheckpointer | undefined;
    try {
      fence.check();
      const shared = { partitioner: this.partitioner, broker: this.broker, counters: this.counters, resources: this.resources, log: this.options.log, dataDir: this.#storesDir };
      const storePath = partitionEnv(shared, p).store.path;
      const checkpointing = this.hostOptions.checkpoints;
      let restoredSequence: number | undefined;
      if (checkpointing) {
        // The latest checkpoint replaces a local store that is missing or older (another
        // machine's data dir held the partition, or this one's copy is stale): a damaged one
        // throws CheckpointDamagedError and leaves the local store as it was.
        const restored = await restoreStageStoreIfBehind(checkpointing, WEB_INDEX_STAGE, p, storePath,
          (path) => Store.open({ path, columnFamilies: partitionColumnFamilies(), resources: this.resources, createIfMissing: false }), ColumnFamilies.meta);
        restoredSequence = restored?.sequence;
      }
      // An earlier owner started this partition (the cluster recorded it); without its store
      // here (another machine's data dir, or a wiped one) and no checkpoint to restore, the
      // partition would start from nothing and every score after would be wrong: refuse, with
      // the reason, instead.
      if (fence.startedBefore === true && !existsSync(storePath)) {
        throw new DataDirError(
          checkpointing
            ? `partition ${p} was started by an earlier owner (this ownership is epoch ${fence.epoch}) but its store ${storePath} is not in this worker's data dir and the checkpoint store has no checkpoint of it (${stageCheckpointKey(checkpointing.keyPrefix, WEB_INDEX_STAGE, p)}): its state is only in the data dir of the worker that ran it (started before checkpoints were on?), or the checkpoints were removed`
            : `partition ${p} was started by an earlier owner (this ownership is epoch ${fence.epoch}) but its store ${storePath} is not in this worker's data dir: ` +
              'its state is in another machine\'s data dir (give the workers a checkpoint store, --checkpoints, to move it; or run them on one data dir), or the data dir was wiped',
        );
      }
      let env: PartitionEnv | undefined;
      if (checkpointing) {
        checkpoints = new PartitionCheckpointer({
          checkpointing, stage: WEB_INDEX_STAGE, partition: p, metaFamily: ColumnFamilies.meta, fence,
          ...(restoredSequence !== undefined ? { restoredSequence } : {}),
          acquire: () => env!.store.acquire(),
          release: () => env!.store.release(),
          logger: this.options.log.child({ partition: p }),
          clock: this.#clock,
        });
      }
      env = partitionEnv(shared, p, fence, checkpoints);
      // Hold the store from the checks until the partition holds it too (no close and reopen).
      const store = await env.store.acquire();
      try {
        await checkPartitionShape(store, env.store.path, { partition: p, partitions: this.options.partitions, partitioner: this.partitioner.describe() });
        const crawlPolicy = this.fetcher ? { ...this.options.crawl?.policy, robots: this.fetcher } : undefined;
        const behavior = partitionActor(env, { weigh: this.options.weigh, damping: this.#damping, crawl: crawlPolicy !== undefined, ...(crawlPolicy ? { crawlPolicy } : {}), ...(this.options.gc ? { gc: this.options.gc } : {}), ...(this.options.maxOutlinksPerPage !== undefined ? { maxOutlinksPerPage: this.options.maxOutlinksPerPage } : {}) });
        // The partition's start() records the owner epoch (and refuses an older one): a
        // refusal there stops it at once, so it is made here first, to reject the start.
        await recordOwnerEpoch(store, fence.epoch, PARTITION_STREAM_FAMILIES.meta);
        // A partition's first start puts a checkpoint before it consumes anything: an owner
        // that dies before its first periodic checkpoint then leaves one for the next owner
        // (the empty store; the broker delivers again all it had not released, and it had
        // released nothing), instead of a partition "started by an earlier owner" with no
        // checkpoint, which a next owner on another machine must refuse. The cluster records
        // the start only after this returns.
        if (checkpoints && restoredSequence === undefined && fence.startedBefore !== true) await checkpoints.afterCheckpoint({ failOnError: true });
        const ref = (await this.supervisor.ask({ type: 'spawn', name: `p${p}`, behavior, options: { supervision: stopWhenFenced(partitionSupervision) } })) as ActorRef<never, void>;
        this.#running.set(p, { ref, env, epoch: fence.epoch, checkpoints, requested: false });
        checkpoints?.start();
      } finally {
        await env.store.release();
      }
    } catch (err) {
      await checkpoints?.close();
      throw err;
    } finally {
      this.#starting.delete(p);
    }
  }

  /**
   * Stops partition p: the metric actor commits what it folded, then (a planned hand-back,
   * `options.checkpoint`, with checkpoints) a last checkpoint is taken and what it covers is
   * published and acked, then its checkpoints stop (after the one running, if any), then
   * `options.beforeStop` runs (the worker closes the partition's ask consumer: asks, the
   * query API's reads among them, are answered until then), then the partition's actors stop
   * (what they commit after that checkpoint is replayed by the next owner).
   */
  async stopPartition(stage: string, partition: number, options?: PartitionStopOptions): Promise<void> {
    const p = this.#partition(stage, partition);
    const entry = this.#running.get(p);
    if (!entry) return;
    entry.requested = true;
    let stopped!: () => void;
    entry.stopped = new Promise<void>((resolve) => (stopped = resolve));
    try {
      // Commit what the metric actor folded, so that a hand-back leaves nothing it applied in memory only.
      await this.system.lookup<MetricMessage, unknown>(`/partitions/p${p}/metrics`)?.ask({ type: 'flush' }, { timeoutMs: 30_000 }).catch(() => undefined);
      if (options?.checkpoint && entry.checkpoints) {
        // Whole (flushed), not a WAL tail: the next owner opens SST files, no chain of logs to replay.
        await entry.checkpoints.afterCheckpoint({ whole: true, failOnError: true }).catch((err: unknown) => {
          this.options.log.warn({ partition: p, err }, `the hand-back checkpoint of partition ${p} failed: its next owner restores the one before and the broker redelivers what followed`);
        });
      }
      // The checkpoints end before the actors stop: a checkpoint still running (or requested by
      // the last held acks) would otherwise publish through outboxes and a store they close.
      // What the actors commit from now on is replayed by the next owner.
      await entry.checkpoints?.close();
      // Until now the partition answered asks (reads of its store); they wait from here to the next owner's start.
      await options?.beforeStop?.().catch(() => undefined);
      await entry.ref.stop();
    } finally {
      await entry.checkpoints?.close();
      if (this.#running.get(p) === entry) this.#running.delete(p);
      stopped();
    }
  }

  partitions(): HostedPartition[] {
    return [...this.#running].map(([partition, r]) => ({ stage: WEB_INDEX_STAGE, partition, epoch: r.epoch }));
  }

  /** The running entry of partition p. @throws ActorStoppedError (terminal) when it does not run here */
  #entry(p: number): Running {
    const entry = this.#running.get(p);
    if (!entry) throw terminalError(new ActorStoppedError(`partition ${p} of the web index does not run in this process`));
    return entry;
  }

  /** A ref getter for child `child` of partition p, for askWithRetry: fails terminally once the partition no longer runs here. */
  #child<M, R>(p: number, child: string): () => ActorRef<M, R> {
    return () => {
      this.#entry(p);
      const ref = this.system.lookup<M, R>(`/partitions/p${p}/${child}`);
      if (!ref) throw new ActorStoppedError(`/partitions/p${p}/${child} is not running`);
      return ref;
    };
  }

  async ask(stage: string, partition: number, request: unknown): Promise<unknown> {
    const p = this.#partition(stage, partition);
    const entry = this.#entry(p);
    const r = request as WebIndexRequest;
    if (entry.stopped && !ANSWERED_DURING_HAND_BACK.has(r?.kind)) {
      await entry.stopped;
      throw new ActorStoppedError(`partition ${p} of the web index stopped (a hand-back) before this ${String(r?.kind)} request ran: its next owner answers`);
    }
    switch (r?.kind) {
      case 'metrics': {
        const metrics = this.#child<MetricMessage, unknown>(p, 'metrics');
        const reply = await localMetricEndpoint(metrics, this.#clock)(r.message);
        if (entry.checkpoints && heldForCheckpoint(r.message)) {
          // A durable barrier's folded messages are in memory only: commit them, then wait for a checkpoint holding them.
          if (r.message.type === 'await-applied') await askWithRetry(metrics, { type: 'flush' }, this.#clock);
          await this.#afterCheckpoint(p, entry.checkpoints);
        }
        return reply;
      }
      case 'republish-links':
        return this.#checkpointed(p, entry, askWithRetry(this.#child<IndexerMessage, unknown>(p, 'indexer'), { type: 'republish-links' }, this.#clock));
      case 'flow':
        return this.#flow(entry);
      case 'read':
        return this.#read(p, r.method, r.args);
      case 'seed':
        return this.#checkpointed(p, entry, this.#seed(p, r.urls));
      case 'drained':
        return askWithRetry(this.#policy(p), { type: 'drained' }, this.#clock) as Promise<CrawlDrain>;
      default:
        throw new InvalidArgumentError(`not a web index request: ${JSON.stringify(request)?.slice(0, 200)} (kinds: metrics, flow, republish-links, read, seed, drained)`);
    }
  }

  /** `reply`, once a checkpoint holds what it reports (with checkpoints; at once without). */
  async #checkpointed<T>(p: number, entry: Running, reply: Promise<T>): Promise<T> {
    const value = await reply;
    if (entry.checkpoints) await this.#afterCheckpoint(p, entry.checkpoints);
    return value;
  }

  /**
   * Waits for a checkpoint holding what a reply reports.
   * @throws ActorStoppedError when the checkpoints end first (the lease lost, the partition
   *   stopping): the worker nacks the request, and its next owner answers it (asks are idempotent)
   */
  async #afterCheckpoint(p: number, checkpoints: PartitionCheckpointer): Promise<void> {
    try {
      await checkpoints.afterCheckpoint();
    } catch (err) {
      throw new ActorStoppedError(`partition ${p} stopped checkpointing before its reply was covered (${(err as Error)?.message ?? String(err)}): its next owner answers`);
    }
  }

  /** The ref getter of partition p's crawl policy. @throws InvalidArgumentError when this host does not crawl */
  #policy(p: number): () => ActorRef<CrawlPolicyMessage, unknown> {
    if (!this.fetcher) throw new InvalidArgumentError(`this web-index worker does not crawl: start the workers with --crawl (webIndexApplication's crawl option)`);
    return this.#child<CrawlPolicyMessage, unknown>(p, 'crawl-policy');
  }

  /**
   * Hands canonical URLs of partition p's hosts to its crawl policy (known ones are left as
   * they are: idempotent).
   * @throws InvalidArgumentError for a non-string, a URL without host, or one of another partition
   */
  async #seed(p: number, urls: unknown): Promise<void> {
    if (!Array.isArray(urls)) throw new InvalidArgumentError(`seed: expected an array of URLs, got ${JSON.stringify(urls)?.slice(0, 200)}`);
    for (const url of urls) {
      if (typeof url !== 'string') throw new InvalidArgumentError(`seed: expected URL strings, got ${JSON.stringify(url)?.slice(0, 200)}`);
      const q = this.partitioner.forUrl(url);
      if (q !== p) throw new InvalidArgumentError(`seed: ${url} belongs to partition ${q}, not ${p}`);
    }
    const policy = this.#policy(p);
    await askWithRetry(policy, { type: 'seed', urls: urls as string[] }, this.#clock);
  }

  /**
   * A query API read on partition p's reader view (asked again for a new view when the reader
   * restarted meanwhile).
   * @throws InvalidArgumentError for a method that is not a read
   */
  async #read(p: number, method: PartitionReadMethod, args: readonly unknown[]): Promise<unknown> {
    if (!(PARTITION_READS as readonly string[]).includes(method)) throw new InvalidArgumentError(`not a partition read: ${JSON.stringify(method)} (reads: ${PARTITION_READS.join(', ')})`);
    for (let attempt = 0; ; attempt++) {
      const view = (await askWithRetry(this.#child<ReaderMessage, PartitionView>(p, 'reader'), { type: 'view' }, this.#clock)) as PartitionView;
      try {
        return await (view[method] as (...a: unknown[]) => Promise<unknown>).apply(view, [...args]);
      } catch (err) {
        if (attempt >= 10 || !isShardflowError(err) || err.code !== 'SF_ERR_STORE_CLOSED') throw err;
      }
    }
  }

  /** The partition's stream flow, read from its store (held open by the partition meanwhile). */
  async #flow(entry: Running): Promise<StreamFlowReport> {
    const store = await entry.env.store.acquire();
    try {
      return await readStreamFlow(store, PARTITION_STREAM_FAMILIES);
    } finally {
      await entry.env.store.release();
    }
  }

  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      for (const entry of this.#running.values()) entry.requested = true;
      await Promise.allSettled([...this.#running.keys()].map(async (p) => this.system.lookup<MetricMessage, unknown>(`/partitions/p${p}/metrics`)?.ask({ type: 'flush' }, { timeoutMs: 30_000 })));
      // Checkpoints first, as in stopPartition: none may run into the stores the actors close.
      await Promise.all([...this.#running.values()].map((e) => e.checkpoints?.close()));
      await this.system.terminate();
      this.#running.clear();
      await this.fetcher?.close();
      await this.inspection?.close();
    })();
    return this.#stopping;
  }
}

/**
 * What every worker of a web-index cluster must share besides the partition count, recorded
 * with the cluster's stages (`ClusterStage.config`): the link weights' name, the damping
 * factor and the outlink cap. A worker started with other values is refused.
 */
function webIndexConfig(options: WebIndexApplicationOptions): string {
  const base = `weights=${options.weightsLabel ?? 'unnamed'};damping=${options.damping ?? 0.85};maxOutlinksPerPage=${options.maxOutlinksPerPage ?? 10_000}`;
  return options.crawl ? `${base};crawl=${crawlConfig(options.crawl)}` : base;
}

/**
 * The part of a crawl's configuration every worker must share: the crawl policies' resolved
 * politeness, recrawl, timeouts and scope, and what the fetcher does to a page (body limit,
 * User-Agent, robots.txt token, redirects, timeout). Left out: the crawler count and the host
 * map (each worker's own).
 * @throws InvalidArgumentError for bad policy values (`resolveCrawlPolicyOptions`)
 */
function crawlConfig(crawl: WebIndexCrawlOptions): string {
  const p = resolveCrawlPolicyOptions(crawl.policy);
  const f = crawl.fetcher ?? {};
  return JSON.stringify({
    perHost: p.maxInFlightPerHost, delayMs: p.minDelayMs, maxCrawlDelayMs: p.maxCrawlDelayMs, recrawlMs: p.recrawlIntervalMs, goneMs: p.goneRecrawlMs,
    retryMs: p.retryDelayMs, robotsTtlMs: p.robotsTtlMs, robotsRetryMs: p.robotsRetryMs, requestTimeoutMs: p.requestTimeoutMs, scope: p.scope?.description ?? 'any host',
    maxBodyBytes: f.maxBodyBytes ?? null, userAgent: f.userAgent ?? null, robotsToken: f.robotsToken ?? null, maxRedirects: f.maxRedirects ?? null, timeoutMs: f.timeoutMs ?? null,
  });
}

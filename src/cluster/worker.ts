import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { DataDirError, findCause, InvalidArgumentError, isShardflowError, type FencedError } from '../errors.js';
import type { ChaosPolicy } from '../runtime/actor/chaosPolicy.js';
import { consoleLogger, type Logger } from '../runtime/actor/logger.js';
import type { Broker } from '../runtime/brokers/broker.js';
import type { PartitionFence } from '../runtime/stream/ownerEpoch.js';
import type { CheckpointStore } from '../checkpoint/checkpointStore.js';
import { CheckpointFileCache } from '../checkpoint/fileCache.js';
import { openCheckpointStore } from '../checkpoint/open.js';
import { DEFAULT_CHECKPOINT_INTERVAL_MS, stageCheckpointKey, type StageCheckpointing } from '../runtime/stream/stageCheckpoints.js';
import type { HostedPartition } from '../runtime/topology/partitionHost.js';
import { acquireDataDirLock, type DataDirLock } from '../runtime/topology/dataDirLock.js';
import type { StageTypes, Topology } from '../runtime/topology/topology.js';
import type { ApplicationHost, ClusterApplication } from './application.js';
import { AskResponders } from './askResponder.js';
import { askNamespaceCollision } from './askWire.js';
import type { WorkerEvent } from './events.js';
import { checkCheckpointAccess } from './checkpointAccess.js';
import { RedisCheckpointRegistry } from './checkpointRegistry.js';
import { ClusterKeys } from './keys.js';
import { LeaderRole } from './leader.js';
import { acquireLease, checkLeaseTiming, defaultSafetyMargin, raiseEpoch, releaseLease, renewLeases, type LeaseTiming } from './lease.js';
import { LeaseKeeper } from './leaseKeeper.js';
import { checkClusterBroker, checkClusterCheckpoints, checkClusterTopology, joinCluster, leaveCluster, type MemberReport } from './membership.js';
import { Ownership } from './ownership.js';
import { registerOwnershipMetrics } from './ownershipMetrics.js';
import { askCoordination, connectCoordination } from './redisConnection.js';
import { StandbyWarmer } from './standbyWarmer.js';
import { readClusterStatus, type ClusterStatus } from './status.js';
import { topologyApplication } from './topologyApplication.js';
import { allUnits, unitKey } from './units.js';

/** The folder of a worker's data dir that holds the warm standby caches (`CheckpointFileCache`), one per worker name: `standby-cache/<name>`. */
export const STANDBY_CACHE_DIR = 'standby-cache';

/** Worker names: 1 to 64 letters, digits, `.`, `_`, `-`. */
export const WORKER_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** Default partition lease time in ms: a SIGKILLed worker's partitions are owned again within leaseMs + 2 heartbeats (9 s). */
export const DEFAULT_LEASE_MS = 6000;

/**
 * The shortest lease a worker takes, ms: its heartbeat (a quarter of the lease by default)
 * also bounds each of its Redis commands, and below 125 ms a busy machine misses heartbeats
 * and moves partitions for nothing (found by a new user: `--lease-ms 100` logged 25 timed-out
 * heartbeats in 10 s). Kafka's group coordinator bounds session timeouts likewise
 * (`group.min.session.timeout.ms`, 6 s by default).
 */
export const MIN_WORKER_LEASE_MS = 500;

/**
 * Options of {@link startWorker}. Times in ms. What the worker runs is exactly one of
 * `topology` (a framework Topology) or `application` (any {@link ClusterApplication}).
 */
export type WorkerOptions<S extends Record<string, StageTypes> = Record<string, StageTypes>> =
  WorkerCommonOptions & ({ readonly topology: Topology<S>; readonly application?: undefined } | { readonly application: ClusterApplication; readonly topology?: undefined });

/** The options of {@link startWorker} besides what it runs. Times in ms. */
export interface WorkerCommonOptions {
  /** Redis URL of the cluster's coordination (membership, leader and partition leases, assignment): `redis://host:port[/db]`. */
  readonly cluster: string;
  /** The cluster to join (1 to 64 letters, digits, `.`, `_`, `-`); every worker of a cluster runs the same application (the same stages). */
  readonly clusterName: string;
  /** The broker the partitions consume and publish through (Redis Streams or Pulsar across processes); the caller closes it after `stop()`. */
  readonly broker: Broker;
  /**
   * The data dir of the stage stores (`stages/<stage>/p<i>`). Without `checkpoints`, shared by
   * the workers of one machine so a partition's store moves with it; with `checkpoints`, each
   * worker may have its own (on its own machine): partitions move through the checkpoints.
   */
  readonly dataDir: string;
  /**
   * Where the partitions' checkpoints go: `file:///DIR` (a directory every worker mounts) or
   * `s3://BUCKET/PREFIX` (`openCheckpointStore`; AWS environment), or a store opened already
   * (the caller closes it then). Each running partition checkpoints every
   * `checkpointIntervalMs` and at a planned hand-back, under the key
   * `<clusterName>/<stage>/p<i>` (2 kept); its next owner restores the latest when its own
   * store is missing or older; the partition's publishes and acks wait for the checkpoint that
   * covers them (docs/checkpoints.md, "Partitions that move"). Only for an application that
   * `supportsCheckpoints` (a Topology, the web index). Default: none.
   */
  readonly checkpoints?: string | CheckpointStore;
  /** Period of each partition's checkpoints, ms (default 30000; with `checkpoints`). */
  readonly checkpointIntervalMs?: number;
  /**
   * Warm standbys per partition (Kafka Streams' `num.standby.replicas`; default 0; with
   * `checkpoints`): the leader makes this many other workers that keep standbys (their own
   * `standbyReplicas` above 0, with room) standbys of each unit (the most any live worker asks
   * for); each keeps the unit's newest checkpoint's files in
   * `<dataDir>/standby-cache/<name>` (fetched every checkpoint interval, no more often than
   * every heartbeat), and a unit whose owner died goes first to one of its standbys that holds
   * no more units than the least loaded worker: its restore then fetches only what the
   * checkpoints since the last pass added (docs/cluster.md, "Warm standbys"). Costs each
   * standby the fetches and the disk of the checkpoints it keeps warm.
   */
  readonly standbyReplicas?: number;
  /**
   * Shown in status and events (default `<host name>-<pid>`, with `-2`, `-3`, ... for more
   * workers of this process on one data dir); the member id adds 8 random hex digits. With
   * checkpoints, one worker per name and data dir (its standby cache is `standby-cache/<name>`,
   * locked by `standby-cache/<name>.lock` while it runs).
   */
  readonly name?: string;
  /** Most partition units the leader assigns this worker (default: no limit). */
  readonly maxPartitions?: number;
  /** Time to live of the partition leases, the leader lease and the membership key (default 6000, at least 100). */
  readonly leaseMs?: number;
  /**
   * Period of membership heartbeats and lease renewals (by the lease keeper thread), and of
   * assignment rounds and reads (default leaseMs / 4; at most (leaseMs - safetyMarginMs) / 2, so
   * two renewals can fail before a lease runs out).
   */
  readonly heartbeatMs?: number;
  /** The owner stops committing this long before its local lease deadline (default leaseMs / 10; see `LeaseTiming`). */
  readonly safetyMarginMs?: number;
  /**
   * Longest the worker's event loop may stay blocked while its lease keeper thread still renews
   * its membership and partition leases (`LeaseKeeper`; Kafka's `max.poll.interval.ms`): a
   * process wedged longer loses its partitions one lease later. Default 4 × leaseMs, at least leaseMs.
   */
  readonly maxStallMs?: number;
  /** When this worker leads: most units between owners at a time (default max(1, 10% of the units), as Akka's relative rebalance limit). */
  readonly maxMoves?: number;
  /** Prefix of the cluster's Redis keys (default `sfc:`). */
  readonly keyPrefix?: string;
  readonly logger?: Logger;
  /** Fault injection in the partitions' `receive()` (as `Topology.start`). */
  readonly chaos?: ChaosPolicy;
  readonly memoryBudgetBytes?: number;
  /** Serve this worker's console (docs/console.md). */
  readonly inspect?: { readonly port?: number; readonly host?: string };
  /** Hears each change of membership, leadership and partition ownership. */
  readonly onEvent?: (event: WorkerEvent) => void;
}

/** A running worker. (`S` is kept for the callers that name it; the host's `ask` is untyped.) */
export interface Worker<S extends Record<string, StageTypes> = Record<string, StageTypes>> {
  /** Member id: `<name>.<8 hex digits>`, unique per process. */
  readonly id: string;
  readonly name: string;
  /** The application's host in this process: its partitions (ask one running here with `host.ask`), actor system and console. */
  readonly host: ApplicationHost;
  /** Partitions running here now. */
  partitions(): HostedPartition[];
  /** The whole cluster's status, read from Redis (with this worker's broker for the backlogs). */
  clusterStatus(): Promise<ClusterStatus>;
  /**
   * Leaves the cluster and hands every partition back: leaves membership (the leader
   * reassigns), stops each partition (its store flushed and closed), releases its lease so the
   * next owner starts at once, then stops the actor system and closes the Redis connection.
   * Idempotent.
   */
  stop(): Promise<void>;
  /** Resolves after `stop()`; rejects with the failure when the worker stopped by itself (a failure escalated to its actor system). */
  readonly closed: Promise<void>;
}

/**
 * Starts a cluster worker: joins the cluster `clusterName` in the Redis at `cluster`
 * (membership with heartbeats), competes for the leader lease (the leader assigns partition
 * units to live workers: `assignPartitions`), and runs the units assigned to it, each under a
 * partition lease whose epoch fences it (`Lease`, ownerEpoch.ts). See docs/cluster.md.
 *
 * It runs `options.application` (`ClusterApplication`: its stages are the units, its host
 * runs single partitions), or `options.topology` as `topologyApplication(topology)`. For each
 * unit it runs, it answers the cluster clients' asks (`connectClusterClient`) from the
 * unit's request topic (`AskResponders`), opened after the partition started and closed
 * before it stops.
 *
 * Every heartbeat: renew the membership key, renew the held leases (a lease found lost or
 * past its local deadline stops its partition at once, committing nothing more), lead a round
 * when leader, read the assignment, hand back units assigned elsewhere (stop, then release),
 * take the leases of units assigned here that nobody holds, and open their stores (retried
 * while the previous owner still holds a store).
 *
 * With `checkpoints`, each unit's partition is restored from its latest checkpoint before it
 * opens when the local store is missing or older, checkpoints periodically and at its
 * hand-back (before the release), and publishes and acks only what a checkpoint covers
 * (`StageCheckpointing`; a `restored` event per restore; a damaged checkpoint refuses the unit).
 *
 * @throws InvalidArgumentError for bad options (neither or both of `topology` and
 *   `application`, `checkpointIntervalMs` below 10, `checkpoints` for an application that does
 *   not `supportsCheckpoints`, a checkpoint URL that is not `file:///` or `s3://`), stages
 *   other than the cluster's, or a checkpoint store that refuses this worker (denied
 *   credentials, no such bucket: `checkCheckpointAccess`); BrokerDisconnectedError when the
 *   cluster's Redis does not answer; the application's `startHost` errors
 */
export async function startWorker<S extends Record<string, StageTypes>>(options: WorkerOptions<S>): Promise<Worker<S>> {
  const leaseMs = options.leaseMs ?? DEFAULT_LEASE_MS;
  if (!Number.isInteger(leaseMs) || leaseMs < MIN_WORKER_LEASE_MS) {
    throw new InvalidArgumentError(`leaseMs must be an integer >= ${MIN_WORKER_LEASE_MS} for a worker (its heartbeat, a quarter of it, bounds each Redis command), got ${leaseMs}`);
  }
  const timing = checkLeaseTiming({ leaseMs, safetyMarginMs: options.safetyMarginMs ?? defaultSafetyMargin(leaseMs) });
  const heartbeatMs = options.heartbeatMs ?? Math.floor(leaseMs / 4);
  if (!Number.isInteger(heartbeatMs) || heartbeatMs < 10 || heartbeatMs > (leaseMs - timing.safetyMarginMs) / 2) {
    throw new InvalidArgumentError(`heartbeatMs must be an integer in [10, ${(leaseMs - timing.safetyMarginMs) / 2}] (two renewals before a lease runs out), got ${heartbeatMs}`);
  }
  const defaultName = `${hostname()}-${process.pid}`.replace(/[^A-Za-z0-9._-]/g, '-');
  let name = options.name ?? defaultName;
  if (!WORKER_NAME.test(name)) throw new InvalidArgumentError(`worker name ${JSON.stringify(name)} must be 1 to 64 letters, digits, '.', '_' or '-'`);
  const maxPartitions = options.maxPartitions ?? Infinity;
  if (!(maxPartitions === Infinity || (Number.isInteger(maxPartitions) && maxPartitions >= 0))) throw new InvalidArgumentError(`maxPartitions must be an integer >= 0, got ${maxPartitions}`);
  if ((options.topology === undefined) === (options.application === undefined)) {
    throw new InvalidArgumentError('startWorker needs exactly one of topology (a Topology) and application (a ClusterApplication)');
  }
  const application = options.application ?? topologyApplication(options.topology!);
  const checkpointIntervalMs = options.checkpointIntervalMs ?? DEFAULT_CHECKPOINT_INTERVAL_MS;
  if (!Number.isInteger(checkpointIntervalMs) || checkpointIntervalMs < 10) throw new InvalidArgumentError(`checkpointIntervalMs must be an integer >= 10, got ${checkpointIntervalMs}`);
  if (options.checkpoints !== undefined && !application.supportsCheckpoints) {
    throw new InvalidArgumentError(`application ${application.name} does not take checkpoints (supportsCheckpoints): run it without checkpoints, on one data dir`);
  }
  const keys = new ClusterKeys(options.clusterName, options.keyPrefix);
  const { stages } = application;
  const collision = askNamespaceCollision(stages);
  if (collision !== undefined) throw new InvalidArgumentError(`stages ${collision} have the same ask topics (FNV-1a of their names collide): rename one`);
  const maxMoves = options.maxMoves ?? Math.max(1, Math.ceil(allUnits(stages).length / 10));
  if (!Number.isInteger(maxMoves) || maxMoves < 1) throw new InvalidArgumentError(`maxMoves must be an integer >= 1, got ${maxMoves}`);
  const standbyReplicas = options.standbyReplicas ?? 0;
  if (!Number.isSafeInteger(standbyReplicas) || standbyReplicas < 0) throw new InvalidArgumentError(`standbyReplicas must be an integer >= 0, got ${standbyReplicas}`);
  if (standbyReplicas > 0 && options.checkpoints === undefined) {
    throw new InvalidArgumentError(`standbyReplicas ${standbyReplicas} needs checkpoints: a standby keeps a partition's checkpoints warm (give checkpoints, or leave standbyReplicas at 0)`);
  }
  const maxStallMs = options.maxStallMs ?? 4 * leaseMs;
  if (!Number.isInteger(maxStallMs) || maxStallMs < leaseMs) throw new InvalidArgumentError(`maxStallMs must be an integer >= leaseMs (${leaseMs}), got ${maxStallMs}`);

  // One worker per name and data dir with checkpoints: two would share (and remove each
  // other's files from) one standby cache (found by a new user: two workers named p2 on one
  // data dir fetched the same checkpoint 45 times in 25 s).
  let cacheLock: DataDirLock | undefined;
  if (options.checkpoints !== undefined) {
    for (let n = 1; cacheLock === undefined; n++) {
      if (options.name === undefined) name = n === 1 ? defaultName : `${defaultName}-${n}`;
      try {
        cacheLock = acquireDataDirLock(join(options.dataDir, STANDBY_CACHE_DIR), {
          file: `${name}.lock`,
          inUse: (pid, file) => `another worker named ${name} runs on data dir ${options.dataDir} (pid ${pid}; lock file ${file}): give this one another name (--name) or another data dir`,
        });
      } catch (err) {
        if (options.name !== undefined || !(err instanceof DataDirError) || n >= 64) throw err;
      }
    }
  }
  const checkpoints = typeof options.checkpoints === 'string' ? openCheckpointStore(options.checkpoints) : options.checkpoints;
  let redis: Redis;
  try {
    redis = await connectCoordination(options.cluster, 5000, heartbeatMs);
  } catch (err) {
    cacheLock?.release();
    throw err;
  }
  const id = `${name}.${randomBytes(4).toString('hex')}`;
  const logger = options.logger ?? consoleLogger;
  let keeper: LeaseKeeper;
  let worker: ClusterWorker | undefined;
  try {
    // Before anything is recorded: a worker refused by its checkpoint store must not fix the
    // cluster's topology (found by a new user: one with a wrong key recorded its stages, and
    // every right worker was refused after it).
    const firstUnit = allUnits(stages)[0];
    if (checkpoints && firstUnit) await checkCheckpointAccess(checkpoints, stageCheckpointKey(options.clusterName, firstUnit.stage, firstUnit.partition), transientCause, logger, id);
    await checkClusterTopology(redis, keys, stages);
    await checkClusterBroker(redis, keys, options.broker.identity);
    await checkClusterCheckpoints(redis, keys, checkpoints ? (checkpoints.location ?? checkpoints.url) : undefined);
    keeper = await LeaseKeeper.start({
      url: options.cluster, timing, heartbeatMs, maxStallMs, connectTimeoutMs: 5000, slots: allUnits(stages).length,
      membership: { key: keys.member(id), setKey: keys.members, id },
      onProblem: (message) => logger.warn({ worker: id }, `cluster ${keys.clusterName}: ${message}; trying again at the next heartbeat`),
      onFailure: (err) => worker?.failed(err),
    });
  } catch (err) {
    redis.disconnect();
    if (typeof options.checkpoints === 'string') await checkpoints?.close().catch(() => undefined);
    cacheLock?.release();
    throw err;
  }
  try {
    worker = new ClusterWorker(options, application, redis, keeper, keys, timing, heartbeatMs, id, name, maxPartitions, maxMoves,
      checkpoints && { store: checkpoints, keyPrefix: options.clusterName, intervalMs: checkpointIntervalMs, ownStore: typeof options.checkpoints === 'string', standbyReplicas });
    void worker.closed.finally(() => cacheLock?.release()).catch(() => {});
    await worker.start();
  } catch (err) {
    await keeper.close();
    redis.disconnect();
    cacheLock?.release();
    throw err;
  }
  return worker;
}

class ClusterWorker implements Worker {
  readonly #owned = new Map<string, Ownership>();
  /** Units this worker refused to run, with the reason. */
  readonly #failed = new Map<string, string>();
  /** Units whose last checkpoint puts failed: since when (ms since epoch) and the last error's message; cleared by a durable put. */
  readonly #checkpointFailures = new Map<string, { readonly since: number; reason: string }>();
  readonly #units: Set<string>;
  readonly #leader: LeaderRole;
  /** Content restores take instead of fetching it (with checkpoints). */
  readonly #cache: CheckpointFileCache | undefined;
  /** Keeps this worker's standbys warm (with `standbyReplicas`). */
  readonly #warmer: StandbyWarmer | undefined;
  readonly #logger: Logger;
  readonly #startedAt = Date.now();
  #host!: ApplicationHost;
  #asks!: AskResponders;
  #timer: NodeJS.Timeout | undefined;
  #ticking: Promise<void> = Promise.resolve();
  /** Settles when `start()` did (a keeper failure during it stops the worker after). */
  #started: Promise<void> = new Promise(() => {});
  #stopping: Promise<void> | undefined;
  #failure: unknown;
  #resolveClosed!: () => void;
  #rejectClosed!: (err: unknown) => void;
  readonly closed: Promise<void>;

  constructor(
    readonly options: WorkerCommonOptions,
    readonly application: ClusterApplication,
    readonly redis: Redis,
    /** The thread that renews the membership and the partition leases. */
    readonly keeper: LeaseKeeper,
    readonly keys: ClusterKeys,
    readonly timing: LeaseTiming,
    readonly heartbeatMs: number,
    readonly id: string,
    readonly name: string,
    readonly maxPartitions: number,
    maxMoves: number,
    /** The checkpoint store, its key prefix and interval; `ownStore`: opened by `startWorker`, closed by `stop()`. */
    readonly checkpoints: { readonly store: CheckpointStore; readonly keyPrefix: string; readonly intervalMs: number; readonly ownStore: boolean; readonly standbyReplicas: number } | undefined,
  ) {
    const units = allUnits(application.stages);
    this.#units = new Set(units.map(unitKey));
    this.#leader = new LeaderRole(redis, keys, id, timing, units, maxMoves);
    // The cache is given to restores whether or not this worker keeps standbys now: another
    // run's warm files left in the data dir are taken, each checked against its digest first.
    this.#cache = checkpoints && new CheckpointFileCache(join(options.dataDir, STANDBY_CACHE_DIR, name));
    if (checkpoints && checkpoints.standbyReplicas > 0) {
      this.#warmer = new StandbyWarmer({
        redis, keys, memberId: id, store: checkpoints.store, keyPrefix: checkpoints.keyPrefix, cache: this.#cache!, units: this.#units,
        held: (unit) => {
          const o = this.#owned.get(unit);
          return o === undefined ? undefined : o.state === 'opening' ? 'opening' : 'held';
        },
        periodMs: Math.max(heartbeatMs, checkpoints.intervalMs),
        logger: options.logger ?? consoleLogger,
        onWarm: (w) => this.#emit({ type: 'warmed', ...w }),
      });
    }
    this.#logger = options.logger ?? consoleLogger;
    this.closed = new Promise((resolve, reject) => {
      this.#resolveClosed = resolve;
      this.#rejectClosed = reject;
    });
    this.closed.catch(() => {}); // a caller that never looks must not get an unhandled rejection
  }

  get host(): ApplicationHost {
    return this.#host;
  }

  start(): Promise<void> {
    this.#started = this.#start();
    return this.#started;
  }

  async #start(): Promise<void> {
    const { options } = this;
    this.#host = await this.application.startHost({
      broker: options.broker,
      dataDir: options.dataDir,
      ...(options.logger ? { logger: options.logger } : {}),
      ...(options.chaos ? { chaos: options.chaos } : {}),
      ...(options.memoryBudgetBytes ? { memoryBudgetBytes: options.memoryBudgetBytes } : {}),
      ...(options.inspect ? { inspect: options.inspect } : {}),
      onPartitionStopped: (stage, partition, reason) => this.#stoppedBySupervisor(unitKey({ stage, partition }), reason),
      ...(this.checkpoints ? { checkpoints: this.#checkpointing(this.checkpoints) } : {}),
    });
    this.#asks = new AskResponders(options.broker, this.#host, this.id, this.#logger);
    if (this.#host.inspection) registerOwnershipMetrics(this.#host.inspection.registry, () => this.#owned.values(), () => this.#failed.size);
    void this.#host.system.whenTerminated.then((t) => {
      if (t.kind === 'failed' && !this.#stopping) {
        this.#failure = t.error;
        this.#logger.error({ worker: this.id, err: t.error }, 'a failure escalated to the worker\'s actor system: the worker hands its partitions back and stops');
        void this.stop();
      }
    });
    await joinCluster(this.redis, this.keys, this.#report(), this.timing.leaseMs);
    this.keeper.report(this.#report());
    this.#emit({ type: 'joined', worker: this.id });
    this.#ticking = this.#tick();
    await this.#ticking;
    this.#schedule(Date.now());
  }

  /**
   * The lease keeper thread died: once started, the worker hands its partitions back (their
   * leases renewed by the event loop meanwhile) and stops; `closed` rejects with `err`. During
   * `stop()` it is only logged (`stop()` renews the hand-backs itself then).
   */
  failed(err: Error): void {
    this.#logger.error({ worker: this.id, err }, 'the lease keeper failed: the worker hands its partitions back and stops');
    if (this.#stopping) return;
    this.#failure = err;
    void this.#started.then(() => this.stop(), () => {});
  }

  partitions(): HostedPartition[] {
    return this.#host.partitions();
  }

  #checkpointing(c: NonNullable<ClusterWorker['checkpoints']>): StageCheckpointing {
    return {
      store: c.store,
      keyPrefix: c.keyPrefix,
      intervalMs: c.intervalMs,
      registry: new RedisCheckpointRegistry(this.redis, this.keys),
      ...(this.#cache ? { cache: this.#cache } : {}),
      onRestored: (r) => {
        const unit = unitKey({ stage: r.stage, partition: r.partition });
        this.#emit({ type: 'restored', unit, epoch: this.#owned.get(unit)?.lease.epoch ?? 0, sequence: r.sequence, bytes: r.bytes, seconds: r.seconds, reason: r.reason, walChunks: r.walChunks, cachedBytes: r.cachedBytes });
      },
      onPutFailed: ({ stage, partition, error }) => {
        const unit = unitKey({ stage, partition });
        const reason = error instanceof Error ? error.message : String(error);
        const known = this.#checkpointFailures.get(unit);
        if (known) known.reason = reason;
        else this.#checkpointFailures.set(unit, { since: Date.now(), reason });
      },
      onPut: ({ stage, partition, ...put }) => {
        const unit = unitKey({ stage, partition });
        this.#checkpointFailures.delete(unit);
        this.#emit({ type: 'checkpointed', unit, epoch: this.#owned.get(unit)?.lease.epoch ?? 0, ...put });
      },
    };
  }

  clusterStatus(): Promise<ClusterStatus> {
    return readClusterStatus(this.redis, this.keys, this.options.broker);
  }

  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      clearTimeout(this.#timer);
      await this.#ticking;
      await this.#warmer?.stop();
      await this.keeper.stopMembership(); // leaves the cluster on the keeper's connection
      if (this.keeper.exited) await this.#guard('leave', () => leaveCluster(this.redis, this.keys, this.id));
      await this.#guard('resign', () => this.#leader.resign());
      // The keeper thread goes on renewing the leases of the units being handed back; should it
      // have died, the event loop renews them meanwhile.
      const fallback = setInterval(() => {
        if (this.keeper.exited) void this.#guard('renew', () => renewLeases(this.redis, this.#handingBack().map((o) => o.lease), this.timing.leaseMs));
      }, this.heartbeatMs);
      try {
        await Promise.all([...this.#owned.values()].map((o) => this.#handBack(o)));
      } finally {
        clearInterval(fallback);
      }
      await this.keeper.close();
      await this.#asks.closeAll();
      await this.#host.stop();
      if (this.checkpoints?.ownStore) await this.#guard('close the checkpoint store', () => this.checkpoints!.store.close());
      this.#emit({ type: 'left', worker: this.id });
      this.redis.disconnect();
      if (this.#failure !== undefined) this.#rejectClosed(this.#failure);
      else this.#resolveClosed();
    })();
    return this.#stopping;
  }

  #schedule(lastStart: number): void {
    if (this.#stopping) return;
    this.#timer = setTimeout(() => {
      const started = Date.now();
      this.#ticking = this.#tick();
      void this.#ticking.then(() => this.#schedule(started));
    }, Math.max(0, lastStart + this.heartbeatMs - Date.now()));
  }

  /** Units in a planned hand-back whose lease is still held (renewed until released). */
  #handingBack(): Ownership[] {
    return [...this.#owned.values()].filter((o) => o.handingBack && o.lease.held);
  }

  /** One heartbeat (see `startWorker`). Never rejects: a failed step is logged and tried again at the next. */
  async #tick(): Promise<void> {
    const { redis, keys, timing } = this;
    this.keeper.report(this.#report());
    for (const o of this.#owned.values()) if (o.state !== 'stopping' && !o.lease.held) this.#fence(o);
    const round = await this.#guard('lead', () => this.#leader.tick());
    if (round?.becameLeader) this.#emit({ type: 'leader', worker: this.id, epoch: this.#leader.epoch ?? 0 });
    if (round?.round !== undefined) this.#emit({ type: 'assigned', round: round.round, placed: round.placed, moves: round.moves, unplaced: round.unplaced });
    if (this.#stopping) return;
    const assignment = await this.#guard('read assignment', () => redis.hgetall(keys.assignment));
    if (!assignment) return;
    for (const o of this.#owned.values()) if (o.state !== 'stopping' && assignment[o.unit] !== this.id) void this.#handBack(o);
    for (const [unit, member] of Object.entries(assignment)) {
      if (member !== this.id || this.#owned.has(unit) || this.#failed.has(unit) || !this.#units.has(unit)) continue;
      const target = { key: keys.lease(unit), epochKey: keys.epoch(unit), what: `partition ${unit}`, assignment: { key: keys.assignment, unit } };
      const got = await this.#guard('acquire', () => acquireLease(redis, target, this.id, timing));
      if (got?.kind !== 'acquired') continue;
      this.keeper.keep(got.lease);
      this.#owned.set(unit, new Ownership(unit, got.lease));
      this.#emit({ type: 'acquired', unit, epoch: got.lease.epoch });
    }
    for (const o of this.#owned.values()) if (o.state === 'opening' && !o.busy) void this.#open(o);
    this.#warmer?.poke();
    for (const o of this.#owned.values()) if (o.state === 'running' && !o.busy && !this.#asks.has(o.unit)) void o.run(() => this.#answerAsks(o));
  }

  /** Opens the unit's store and starts its partition under its lease; a store still held elsewhere is tried again at the next heartbeat. */
  #open(o: Ownership): Promise<void> {
    return o.run(async () => {
      if (o.state !== 'opening') return;
      try {
        // Whether an earlier ownership started the unit: then its store holds state (PartitionFence.startedBefore).
        const first = await askCoordination(`read whether ${o.unit} was started before`, () => this.redis.hget(this.keys.started, o.unit));
        const lease = o.lease;
        const fence: PartitionFence = { epoch: lease.epoch, check: () => lease.check(), startedBefore: first !== null && Number(first) < lease.epoch };
        await this.#host.startPartition(o.partition.stage, o.partition.partition, fence);
        await this.#guard('record start', () => this.redis.hsetnx(this.keys.started, o.unit, String(lease.epoch)));
      } catch (err) {
        const code = isShardflowError(err) ? err.code : undefined;
        // A checkpoint store or broker that does not answer: tried again at the next heartbeat, as
        // a store still held elsewhere (found by a new user: a 10 s S3 outage during restores left
        // 5 of 16 partitions refused for good, until their workers were restarted).
        const transient = code === 'SF_ERR_STORE_BUSY' ? undefined : transientCause(err);
        if (code === 'SF_ERR_STORE_BUSY' || transient !== undefined) {
          const reason = transient !== undefined
            ? `waiting for the checkpoint store, the broker or the cluster's redis to answer: ${transient}`
            : `waiting for its store, still held by another process (a stopped or hung previous owner on this machine must be killed): ${(err as Error).message}`;
          if (!o.waitingReported) this.#emit({ type: 'waiting', unit: o.unit, epoch: o.lease.epoch, reason });
          o.waitingReported = true;
          o.waitingFor = reason;
        } else if (code === 'SF_ERR_FENCED') {
          // The store records a newer epoch than the counter gave (Redis lost its data): raise
          // the counter so that the next acquisition is newer; or the lease ran out meanwhile.
          const newer = (err as FencedError).newer;
          if (newer !== undefined) await this.#guard('raise epoch', () => raiseEpoch(this.redis, this.keys.epoch(o.unit), newer));
          await this.#drop(o, { type: 'fenced', unit: o.unit, epoch: o.lease.epoch, reason: (err as Error).message });
        } else {
          await this.#refuse(o, err);
        }
        return;
      }
      if (o.state === 'opening') o.state = 'running'; // else a hand-back or fence queued meanwhile stops it next
      this.#emit({ type: 'started', unit: o.unit, epoch: o.lease.epoch });
      await this.#answerAsks(o);
    });
  }

  /** Opens the unit's request consumer while it runs here; a failure is logged and tried again at the next heartbeat. */
  async #answerAsks(o: Ownership): Promise<void> {
    if (o.state !== 'running') return;
    await this.#guard(`open the ask requests of ${o.unit}`, () => this.#asks.open(o.partition.stage, o.partition.partition));
  }

  /**
   * A planned hand-back: stop the partition (with checkpoints: its last checkpoint taken after
   * its last batch settled; store flushed and closed; its ask consumer closed just before its
   * actors stop, so that reads are answered through that checkpoint), then release its lease, renewed
   * meanwhile (by the heartbeats, or by `stop()`'s renewal while it hands everything back). Reported `released` when the lease was still held throughout, else `fenced` (a
   * process that woke up after its lease ran out finds its units assigned elsewhere).
   */
  #handBack(o: Ownership): Promise<void> {
    if (o.state === 'stopping') return o.busy ?? Promise.resolve();
    o.state = 'stopping';
    o.handingBack = true;
    return o.run(async () => {
      // The unit answers asks through its last checkpoint: its request consumer closes just
      // before its actors stop (beforeStop), or here when the host did not call that.
      let asksClosed: Promise<void> | undefined;
      const closeAsks = () => (asksClosed ??= this.#guard('close ask requests', () => this.#asks.close(o.unit)).then(() => undefined));
      await this.#guard('stop partition', () => this.#host.stopPartition(o.partition.stage, o.partition.partition, { checkpoint: true, beforeStop: closeAsks }));
      await closeAsks();
      const reason = leaseProblem(o);
      const released = await this.#guard('release', () => releaseLease(this.redis, o.lease));
      if (reason === undefined && released) this.#forget(o, { type: 'released', unit: o.unit, epoch: o.lease.epoch });
      else this.#forget(o, { type: 'fenced', unit: o.unit, epoch: o.lease.epoch, reason: reason ?? 'the lease was no longer held at the hand-back' });
    });
  }

  /** The lease was lost or ran out: stop the partition now (its fence already refuses commits). */
  #fence(o: Ownership): void {
    if (o.state === 'stopping') return;
    o.state = 'stopping';
    const reason = leaseProblem(o) ?? 'lease lost';
    o.lease.lose(reason);
    this.keeper.drop(o.lease);
    void o.run(async () => {
      await this.#guard('close ask requests', () => this.#asks.close(o.unit));
      await this.#guard('stop partition', () => this.#host.stopPartition(o.partition.stage, o.partition.partition));
      await this.#drop(o, { type: 'fenced', unit: o.unit, epoch: o.lease.epoch, reason });
    });
  }

  /** A partition stopped for good by its supervisor: fenced (FencedError) or refused (any other failure). */
  #stoppedBySupervisor(unit: string, reason: unknown): void {
    const o = this.#owned.get(unit);
    if (!o || o.state === 'stopping') return;
    if (isShardflowError(reason) && reason.code === 'SF_ERR_FENCED') {
      this.#fence(o);
      return;
    }
    o.state = 'stopping';
    const transient = transientCause(reason);
    if (transient !== undefined) {
      // Not a refusal: the lease goes back, and the unit's assignee acquires it again at a next
      // heartbeat and retries (the checkpoint store or broker did not answer).
      this.#logger.warn({ worker: this.id, unit, err: reason }, `partition ${unit} stopped: the checkpoint store or broker did not answer (${transient}); its lease goes back and it is started again`);
      void o.run(() => this.#drop(o, { type: 'released', unit, epoch: o.lease.epoch }));
      return;
    }
    void o.run(() => this.#refuse(o, reason));
  }

  /** This worker will not run the unit again: it keeps the reason in its member report and releases the lease. */
  async #refuse(o: Ownership, err: unknown): Promise<void> {
    const reason = err instanceof Error ? err.message : String(err);
    this.#failed.set(o.unit, reason);
    this.#logger.error({ worker: this.id, unit: o.unit, err }, `partition ${o.unit} refused: it stays unassigned to a running owner until an operator acts`);
    await this.#drop(o, { type: 'failed', unit: o.unit, epoch: o.lease.epoch, reason });
  }

  /** Releases the unit's lease (compare-and-delete: only this epoch's; a no-op when released already) and forgets the unit. */
  async #drop(o: Ownership, event: WorkerEvent): Promise<void> {
    o.state = 'stopping';
    await this.#guard('close ask requests', () => this.#asks.close(o.unit));
    await this.#guard('release', () => releaseLease(this.redis, o.lease));
    this.#forget(o, event);
  }

  #forget(o: Ownership, event: WorkerEvent): void {
    o.state = 'stopping';
    this.keeper.drop(o.lease);
    if (this.#owned.get(o.unit) === o) this.#owned.delete(o.unit);
    this.#emit(event);
  }

  #report(): MemberReport {
    const by = (state: Ownership['state']) => [...this.#owned.values()].filter((o) => o.state === state).map((o) => o.unit);
    return {
      id: this.id,
      name: this.name,
      host: hostname(),
      pid: process.pid,
      maxPartitions: Number.isFinite(this.maxPartitions) ? this.maxPartitions : null,
      startedAt: this.#startedAt,
      running: by('running'),
      opening: by('opening'),
      waiting: Object.fromEntries([...this.#owned.values()].filter((o) => o.state === 'opening' && o.waitingFor !== undefined).map((o) => [o.unit, o.waitingFor!])),
      failed: Object.fromEntries(this.#failed),
      checkpointsFailing: Object.fromEntries([...this.#checkpointFailures].filter(([unit]) => this.#owned.get(unit)?.state === 'running').map(([unit, f]) => [unit, `for ${Math.round((Date.now() - f.since) / 1000)} s: ${f.reason}`])),
      inspectUrl: this.#host?.inspection?.url ?? null,
      broker: this.options.broker.identity ?? null,
      checkpoints: this.checkpoints ? (this.checkpoints.store.location ?? this.checkpoints.store.url) : null,
      standbyReplicas: this.checkpoints?.standbyReplicas ?? 0,
      leaseMs: this.timing.leaseMs,
      heartbeatMs: this.heartbeatMs,
    };
  }

  #emit(event: WorkerEvent): void {
    try {
      this.options.onEvent?.(event);
    } catch (err) {
      this.#logger.warn({ worker: this.id, err }, 'onEvent threw');
    }
  }

  /** Runs one coordination step; a failure is logged (the next heartbeat tries again). */
  async #guard<T>(what: string, step: () => Promise<T>): Promise<T | undefined> {
    try {
      return await step();
    } catch (err) {
      this.#logger.warn({ worker: this.id, err }, `cluster ${this.keys.clusterName}: ${what} failed; trying again at the next heartbeat`);
      return undefined;
    }
  }
}

/** Why the unit's lease is no longer safely held (its `check()` message), or undefined while it is. */
function leaseProblem(o: Ownership): string | undefined {
  try {
    o.lease.check();
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}

/**
 * The message of a cause of `err` (itself or a cause, up to 8 deep) that a retry may get past:
 * an S3 request without an answer or answered 408, 429 or 5xx (`S3RequestError`), an
 * unreachable broker (`BrokerDisconnectedError`); else undefined (a refusal: a damaged
 * checkpoint, a store of another shape, denied credentials).
 */
export function transientCause(err: unknown): string | undefined {
  return findCause(err, ({ code, status }) =>
    code === 'SF_ERR_BROKER_DISCONNECTED' || (code === 'SF_ERR_S3_REQUEST' && (status === 0 || status === 408 || status === 429 || (typeof status === 'number' && status >= 500))))?.message;
}

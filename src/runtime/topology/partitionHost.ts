import { join } from 'node:path';
import { existsSync } from 'node:fs';
import { ActorStoppedError, DataDirError, InvalidArgumentError, terminalError } from '../../errors.js';
import { SharedResources, Store } from '../../storage/index.js';
import type { Behavior } from '../actor/behavior.js';
import type { ActorRef } from '../actor/ref.js';
import { ActorSystem } from '../actor/system.js';
import { systemClock } from '../clock.js';
import { partitionId } from '../ids.js';
import { startInspectionServer, type InspectionServer } from '../inspection/server.js';
import { TopicFlowCounters } from '../inspection/topicFlow.js';
import type { FlowCounters } from '../stream/flowCounters.js';
import { recordOwnerEpoch, type PartitionFence } from '../stream/ownerEpoch.js';
import { stageColumnFamilies } from '../stream/reserved.js';
import { stagePartition, stageShape, type StageMessage, type StagePartitionCheckpoints } from '../stream/stageActor.js';
import { PartitionCheckpointPuts, restoreStageStoreIfBehind, stageCheckpointKey, type StageCheckpointing } from '../stream/stageCheckpoints.js';
import { StreamColumnFamilies } from '../stream/reserved.js';
import { checkStageShape } from '../stream/stageShape.js';
import { SupervisorStrategy } from '../supervision/strategy.js';
import { askStageQuery } from '../stream/queryFailure.js';
import { askWithRetry, type AskRetryOptions } from './askWithRetry.js';
import type { StreamFlowReport } from '../stream/flowReport.js';
import { stopWhenFenced } from './fencedSupervision.js';
import { spawningSupervisor, type SpawningSupervisorMessage } from './spawningSupervisor.js';
import { DEFAULT_STAGE_SUPERVISION, type TopologyStartOptions } from './running.js';
import { ScopedFlowCounters } from './scopedFlowCounters.js';
import type { StageEntry, StageTypes, Topology } from './topology.js';

/**
 * Options of {@link startPartitionHost}: those of `Topology.start` that apply to single
 * partitions (no data dir record or lock: in a cluster the partition leases say who runs
 * what), and who hears of partitions that stopped by themselves.
 */
export interface PartitionHostOptions extends Pick<TopologyStartOptions, 'broker' | 'dataDir' | 'chaos' | 'clock' | 'logger' | 'memoryBudgetBytes' | 'inspect'> {
  /**
   * Called when a partition stopped for good without `stopPartition`: its supervisor's `stop`
   * directive (a FencedError, or a rule of the stage's strategy), with that failure as `reason`.
   */
  readonly onPartitionStopped?: (stage: string, partition: number, reason: unknown) => void;
  /**
   * Checkpoints of the partitions (a cluster worker's, when its data dir is its own): each
   * start restores the latest checkpoint when the local store is missing or older, each
   * partition checkpoints periodically and at a planned stop, and its publishes and acks wait
   * for the checkpoint that covers them (stageCheckpoints.ts). Absent: none.
   */
  readonly checkpoints?: StageCheckpointing;
}

/** Options of {@link PartitionHost.stopPartition}. */
export interface PartitionStopOptions {
  /**
   * A planned hand-back: with `checkpoints`, the partition takes a last checkpoint after its
   * last batch settled (then publishes and acks what it covers) before its store closes.
   * Default false (a fenced or failed partition takes none).
   */
  readonly checkpoint?: boolean;
  /**
   * Called once, after the partition's last checkpoint (if any) is durable and just before
   * its actors stop; awaited; a rejection is ignored (the stop goes on: the hook handles its own failures). A cluster
   * worker closes the unit's ask consumer here, so that a partition keeps answering asks
   * (the query API's reads) through the longest part of a planned hand-back, the last
   * checkpoint, and asks wait only from here to the next owner's start (docs/cluster.md,
   * "Queries during a move"). A host whose last checkpoint is taken by its actors as they
   * stop (a Topology's stage actors) calls it before that checkpoint.
   */
  readonly beforeStop?: () => Promise<void>;
}

/** A partition running in a {@link PartitionHost}. */
export interface HostedPartition {
  readonly stage: string;
  readonly partition: number;
  /** The owner epoch it runs under (`PartitionFence.epoch`); undefined when started without a fence. */
  readonly epoch: number | undefined;
}

/**
 * A topology whose partitions start and stop one at a time: what a cluster worker runs (the
 * partitions assigned to it), where `startTopology` runs every partition of every stage.
 * Actor paths are the same (`/<stage>/p<i>`, under a per-stage supervisor actor).
 */
export interface PartitionHost<S extends Record<string, StageTypes>> {
  readonly system: ActorSystem;
  /** Messages sent and settled per namespace, by this process's partitions only. */
  readonly counters: FlowCounters;
  /** Per-topic counts of this process's broker traffic. */
  readonly topicFlow: TopicFlowCounters;
  /** The console, when `inspect` was given. */
  readonly inspection: InspectionServer | undefined;
  /**
   * Starts partition `partition` of `stage` here: opens its store once to check its shape
   * and, with a `fence`, to record the owner epoch (refused when the store records a newer
   * one), closes it, then starts the partition's actor, which opens the store again and runs
   * under the same fence (checked before each commit and publish; a FencedError stops it).
   * Resolves once the actor is spawned (its `start()` runs on). With `checkpoints`, the
   * latest checkpoint is restored first when the local store is missing or older than it
   * (`restoreStageStoreIfBehind`).
   * @throws RangeError for an unknown stage or partition; InvalidArgumentError when it runs
   *   here already; StoreBusyError while another process holds the store (try again later);
   *   DataDirError for a store of another shape; FencedError from `fence`;
   *   CheckpointDamagedError when the checkpoint to restore is damaged (the local store is
   *   left as it was, nothing opens)
   */
  startPartition(stage: keyof S & string, partition: number, fence?: PartitionFence): Promise<void>;
  /** Stops partition `partition` of `stage` (its batch in flight settles, the store closes, the subscription is left). Resolves at once when it is not running here. */
  stopPartition(stage: keyof S & string, partition: number, options?: PartitionStopOptions): Promise<void>;
  /** The partitions running here. */
  partitions(): HostedPartition[];
  /**
   * Asks a partition running here through its stage's query hook (as `RunningTopology.ask`).
   * @throws ActorStoppedError when the partition does not run here; the hook's error as it threw it
   *   (not tried again; the partition keeps running); the last try's error after the retries
   */
  ask<N extends keyof S & string>(stage: N, partition: number, request: S[N]['request'], options?: AskRetryOptions): Promise<S[N]['answer']>;
  /**
   * What a partition running here committed to send and applied (`readStreamFlow` of its
   * store), read between its batches: what `ClusterClient.quiescence` collects.
   * @throws as `ask` (ActorStoppedError when the partition does not run here)
   */
  flow(stage: keyof S & string, partition: number, options?: AskRetryOptions): Promise<StreamFlowReport>;
  /** Stops every partition and the console. Idempotent. */
  stop(): Promise<void>;
}

interface Running {
  readonly ref: ActorRef<StageMessage, unknown>;
  readonly epoch: number | undefined;
  /** Set by `stopPartition`: the stop was asked for. */
  requested: boolean;
  readonly checkpoints: StagePartitionCheckpoints | undefined;
}

/**
 * Starts a topology with no partition running: one actor system, one supervisor actor per
 * stage (`/<stage>`, kind `supervisor`), the shared store resources and the console; then
 * `startPartition` / `stopPartition` run single partitions. A failure that a partition's
 * supervision escalates (restart intensity exceeded) terminates the system, as in
 * `startTopology`.
 */
export function startPartitionHost<S extends Record<string, StageTypes>>(topology: Topology<S>, options: PartitionHostOptions): Promise<PartitionHost<S>> {
  return PartitionHostImpl.start(topology, options);
}

class PartitionHostImpl<S extends Record<string, StageTypes>> implements PartitionHost<S> {
  readonly #running = new Map<string, Running>();
  /** Partitions whose `startPartition` is under way. */
  readonly #starting = new Set<string>();
  readonly #hosts = new Map<string, ActorRef<SpawningSupervisorMessage, unknown>>();
  readonly #resources: SharedResources;
  readonly #broker: TopologyStartOptions['broker'];
  #stopping: Promise<void> | undefined;

  private constructor(
    readonly topology: Topology<S>,
    readonly options: PartitionHostOptions,
    readonly system: ActorSystem,
    readonly counters: FlowCounters,
    readonly topicFlow: TopicFlowCounters,
    readonly inspection: InspectionServer | undefined,
  ) {
    const partitions = topology.stages.reduce((n, s) => n + s.def.input.partitioner.partitions, 0);
    this.#resources = SharedResources.create({ memoryBudgetBytes: options.memoryBudgetBytes ?? Math.max(64, 16 * partitions) * 2 ** 20 });
    this.#broker = topicFlow.wrap(options.broker);
    for (const s of topology.stages) {
      this.#hosts.set(s.name, system.spawn(s.name, this.#stageSupervisor(s.name), { supervision: SupervisorStrategy.escalate }));
    }
  }

  static async start<S extends Record<string, StageTypes>>(topology: Topology<S>, options: PartitionHostOptions): Promise<PartitionHost<S>> {
    topology.namespaces();
    const system = ActorSystem.create({
      name: topology.name,
      clock: options.clock ?? systemClock,
      ...(options.logger ? { logger: options.logger } : {}),
      ...(options.chaos ? { chaos: options.chaos } : {}),
    });
    const counters = new ScopedFlowCounters(topology.consumed());
    const topicFlow = new TopicFlowCounters();
    const inspection = options.inspect ? await startInspectionServer(system, { ...options.inspect, flow: counters, topicFlow }) : undefined;
    return new PartitionHostImpl(topology, options, system, counters, topicFlow, inspection);
  }

  /** The actor at `/<stage>`: spawns partitions on request and hears of their stops (death watch). */
  #stageSupervisor(stage: string): Behavior<SpawningSupervisorMessage, undefined, unknown> {
    return spawningSupervisor((name, ref, reason) => {
      const partition = Number(name.slice(1));
      const key = `${stage}/${partition}`;
      const entry = this.#running.get(key);
      if (entry?.ref !== ref || entry.requested) return;
      this.#running.delete(key);
      this.options.onPartitionStopped?.(stage, partition, reason);
    });
  }

  #stage(name: string): StageEntry {
    const s = this.topology.stages.find((e) => e.name === name);
    if (!s) throw new RangeError(`topology ${this.topology.name} has no stage ${JSON.stringify(name)}`);
    return s;
  }

  async startPartition(stage: keyof S & string, partition: number, fence?: PartitionFence): Promise<void> {
    const s = this.#stage(stage);
    const p = partitionId(partition, s.def.input.partitioner.partitions);
    const key = `${stage}/${p}`;
    if (this.#running.has(key) || this.#starting.has(key)) throw new InvalidArgumentError(`partition ${p} of stage ${stage} runs here already`);
    if (this.#stopping) throw new ActorStoppedError(`topology ${this.topology.name} is stopping`);
    this.#starting.add(key);
    try {
      await this.#start(s, p, key, fence);
    } finally {
      this.#starting.delete(key);
    }
  }

  async #start(s: StageEntry, p: ReturnType<typeof partitionId>, key: string, fence: PartitionFence | undefined): Promise<void> {
    const stage = s.name;
    const storePath = join(this.options.dataDir, 'stages', stage, `p${p}`);
    fence?.check();
    const columnFamilies = stageColumnFamilies(s.def.columnFamilies ?? {});
    const checkpointing = this.options.checkpoints;
    const restored = checkpointing
      ? await restoreStageStoreIfBehind(checkpointing, stage, p, storePath, (path) => Store.open({ path, columnFamilies, resources: this.#resources, createIfMissing: false }))
      : undefined;
    fence?.check();
    // A unit an earlier ownership started holds state: in that owner's store (its input acked
    // as it was applied), or, with checkpoints, in its checkpoints (a first start puts one
    // before consuming). With neither here (another machine's data dir, a wiped one, removed
    // checkpoints) it would start from nothing and every count after would be wrong in
    // silence: refuse, with the reason (the worker reports the unit failed), as the web
    // index's partitions do. Found by a new user: a stage partition whose checkpoints were
    // removed started empty, "running", and answered 0 accounts.
    if (fence?.startedBefore === true && !existsSync(storePath)) {
      throw new DataDirError(
        checkpointing
          ? `partition ${p} of stage ${stage} was started by an earlier owner (this ownership is epoch ${fence.epoch}) but its store ${storePath} is not in this worker's data dir and the checkpoint store has no checkpoint of it (${stageCheckpointKey(checkpointing.keyPrefix, stage, p)}): the checkpoints were removed, or it was started by a build that put no checkpoint at a first start`
          : `partition ${p} of stage ${stage} was started by an earlier owner (this ownership is epoch ${fence.epoch}) but its store ${storePath} is not in this worker's data dir: ` +
            "its state is in another machine's data dir (give the workers a checkpoint store, --checkpoints, to move it; or run them on one data dir), or the data dir was wiped",
      );
    }
    const store = await Store.open({ path: storePath, columnFamilies, resources: this.#resources });
    let firstPut: number | undefined;
    try {
      await checkStageShape(store, stageShape(stage, s.def, p));
      if (fence) await recordOwnerEpoch(store, fence.epoch);
      // A cluster partition's first start (no earlier owner, nothing restored) puts its store
      // before it consumes anything, and before this resolves (the worker then records the
      // start), as the web index's partitions do: a next owner that finds neither a store nor
      // a checkpoint of a partition started before refuses it (above) instead of starting
      // from nothing.
      if (checkpointing && fence?.startedBefore === false && restored === undefined) {
        firstPut = await new PartitionCheckpointPuts(checkpointing, stage, p, fence, undefined, StreamColumnFamilies.meta).put(store, this.system.logger);
      }
    } finally {
      await store.close();
    }
    const checkpoints = checkpointing ? { checkpointing, restoredSequence: restored?.sequence ?? firstPut, handBack: false } : undefined;
    const behavior = stagePartition({ stage, partition: p, def: s.def, broker: this.#broker, counters: this.counters, storePath, resources: this.#resources, fence, ...(checkpoints ? { checkpoints } : {}) });
    const supervision = stopWhenFenced(s.def.supervision ?? DEFAULT_STAGE_SUPERVISION);
    const ref = (await this.#hosts.get(stage)!.ask({ type: 'spawn', name: `p${p}`, behavior, options: { supervision } })) as ActorRef<StageMessage, unknown>;
    this.#running.set(key, { ref, epoch: fence?.epoch, requested: false, checkpoints });
  }

  async stopPartition(stage: keyof S & string, partition: number, options: PartitionStopOptions = {}): Promise<void> {
    const key = `${stage}/${partition}`;
    const entry = this.#running.get(key);
    if (!entry) return;
    entry.requested = true;
    if (entry.checkpoints && options.checkpoint) entry.checkpoints.handBack = true;
    try {
      await options.beforeStop?.().catch(() => undefined);
      await entry.ref.stop();
    } finally {
      if (this.#running.get(key) === entry) this.#running.delete(key);
    }
  }

  partitions(): HostedPartition[] {
    return [...this.#running].map(([key, r]) => {
      const slash = key.lastIndexOf('/');
      return { stage: key.slice(0, slash), partition: Number(key.slice(slash + 1)), epoch: r.epoch };
    });
  }

  ask<N extends keyof S & string>(stage: N, partition: number, request: S[N]['request'], options?: AskRetryOptions): Promise<S[N]['answer']> {
    return askStageQuery(this.#ref(stage, partition), request, this.system.clock, options) as Promise<S[N]['answer']>;
  }

  flow(stage: keyof S & string, partition: number, options?: AskRetryOptions): Promise<StreamFlowReport> {
    return askWithRetry(this.#ref(stage, partition), { type: 'flow' }, this.system.clock, options) as Promise<StreamFlowReport>;
  }

  /** The ref getter of a partition running here, for the asks' retries. */
  #ref(stage: string, partition: number): () => ActorRef<StageMessage, unknown> {
    return () => {
      const entry = this.#running.get(`${stage}/${partition}`);
      if (!entry) throw terminalError(new ActorStoppedError(`partition ${partition} of stage ${stage} does not run in this process`));
      return entry.ref;
    };
  }

  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      for (const entry of this.#running.values()) entry.requested = true;
      await this.system.terminate();
      this.#running.clear();
      await this.inspection?.close();
    })();
    return this.#stopping;
  }
}

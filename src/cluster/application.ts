import type { ActorSystem } from '../runtime/actor/system.js';
import type { ChaosPolicy } from '../runtime/actor/chaosPolicy.js';
import type { Logger } from '../runtime/actor/logger.js';
import type { Broker } from '../runtime/brokers/broker.js';
import type { InspectionServer } from '../runtime/inspection/server.js';
import type { PartitionFence } from '../runtime/stream/ownerEpoch.js';
import type { StageCheckpointing } from '../runtime/stream/stageCheckpoints.js';
import type { HostedPartition, PartitionStopOptions } from '../runtime/topology/partitionHost.js';
import type { ClusterStage } from './units.js';

/**
 * What a cluster worker runs: named stages of a fixed number of partitions, hosted one
 * partition at a time. A `Topology` is one (`topologyApplication`); an application with its
 * own actor tree per partition (the web index) is another. Every worker of a cluster runs the
 * same application: its `stages` are recorded in Redis by the first worker and a worker with
 * other stages is refused.
 */
export interface ClusterApplication {
  /** The application's name (the default cluster name). */
  readonly name: string;
  /** Its units of ownership: stage names (no `/`), input namespaces and partition counts. */
  readonly stages: readonly ClusterStage[];
  /**
   * Whether its host takes and restores checkpoints (`ApplicationHostOptions.checkpoints`):
   * a worker given `checkpoints` refuses an application without it. A Topology's does, and the web index's (`webIndexApplication`).
   */
  readonly supportsCheckpoints?: boolean;
  /**
   * Starts a host with no partition running (an actor system, shared store resources, the
   * console when `inspect` is given); the worker then starts and stops single partitions.
   * @throws the application's start errors (the worker does not start)
   */
  startHost(options: ApplicationHostOptions): Promise<ApplicationHost>;
}

/** Options a worker passes to {@link ClusterApplication.startHost}. */
export interface ApplicationHostOptions {
  /** The broker the partitions consume and publish through (the cluster's scope). */
  readonly broker: Broker;
  /** The data dir shared by the workers of one machine: a partition's store moves with it. */
  readonly dataDir: string;
  readonly logger?: Logger;
  readonly chaos?: ChaosPolicy;
  readonly memoryBudgetBytes?: number;
  readonly inspect?: { readonly port?: number; readonly host?: string };
  /**
   * Called when a partition stopped for good without `stopPartition` (its supervisor gave up,
   * or a FencedError), with that failure as `reason`.
   */
  readonly onPartitionStopped?: (stage: string, partition: number, reason: unknown) => void;
  /**
   * The partitions' checkpoints, when the worker was given a checkpoint store (only for an
   * application that `supportsCheckpoints`): restore before open when the local store is
   * missing or older, periodic checkpoints, one at a planned hand-back, publishes and acks
   * after the checkpoint that covers them (docs/checkpoints.md, "Partitions that move").
   */
  readonly checkpoints?: StageCheckpointing;
}

/** The partitions of one worker process (see {@link ClusterApplication}). */
export interface ApplicationHost {
  readonly system: ActorSystem;
  /** The console, when `inspect` was given. */
  readonly inspection: InspectionServer | undefined;
  /**
   * Starts partition `partition` of `stage` under `fence`: records the fence's owner epoch in
   * the partition's store (refused when the store records a newer one), then runs the
   * partition, which checks the fence before each commit and each publish.
   * @throws RangeError for an unknown stage or partition; InvalidArgumentError when it runs
   *   here already; StoreBusyError while another process holds the store (the worker tries
   *   again at its next heartbeat); FencedError from `fence`; DataDirError for a store of
   *   another shape
   */
  startPartition(stage: string, partition: number, fence: PartitionFence): Promise<void>;
  /**
   * Stops it (its batch in flight settles, its store closes). Resolves at once when it does
   * not run here. `options.checkpoint`: a planned hand-back, checkpointed last (with `checkpoints`).
   */
  stopPartition(stage: string, partition: number, options?: PartitionStopOptions): Promise<void>;
  /** The partitions running here. */
  partitions(): HostedPartition[];
  /**
   * Answers a request for a partition running here: what a cluster client's `ask` reaches
   * (through the broker) on the partition's owner. Requests and answers are plain data (the
   * broker's codec, msgpack, carries them); a request may arrive twice (a redelivery after its
   * owner stopped or died while it ran, or a client's retry), so what it does must be
   * idempotent. Several requests of one partition may run at once (up to 64 per unit).
   * @throws ActorStoppedError when the partition does not run here (the worker nacks the
   *   request for redelivery, it never answers with this error); any other error is the
   *   client's answer (`RemoteAskError` with its name, code and message)
   */
  ask(stage: string, partition: number, request: unknown): Promise<unknown>;
  /** Stops every partition and the console. Idempotent. */
  stop(): Promise<void>;
}

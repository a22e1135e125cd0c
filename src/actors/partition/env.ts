import type { Broker } from '../../runtime/brokers/index.js';
import type { FlowCounters, PartitionCheckpointer, PartitionFence, PartitionId } from '../../index.js';
import type { Partitioner } from './hostPartitioner.js';
import type { Logger } from 'pino';
import type { Mutex } from 'async-mutex';
import type { AdjacencyCache } from '../metrics/adjacencyCache.js';
import type { PartitionStoreHandle } from './partitionStore.js';

/**
 * What every actor of one partition shares: its id, the partitioner (to address peers),
 * the broker, the store handle, the process's flow counters and a logger. Made once per
 * partition by the topology and passed to each behaviour factory.
 */
export interface PartitionEnv {
  readonly partition: PartitionId;
  readonly partitioner: Partitioner;
  readonly broker: Broker;
  readonly store: PartitionStoreHandle;
  readonly counters: FlowCounters;
  readonly log: Logger;
  /**
   * Serialises changes of the link graph (the indexer's outlink updates with their metric
   * corrections) with the metric actor's pushes, which read x, r and the outlinks of a page
   * and must see them unchanged until their write batch commits.
   */
  readonly graphLock: Mutex;
  /** Compact read cache of `outlinks` for metric rounds; writers of `outlinks` invalidate it. */
  readonly adjacency: AdjacencyCache;
  /**
   * The cluster ownership the partition runs under (`webIndexApplication`); undefined in one
   * process (`startWebIndex`). With it, the store refuses every write once `check` throws
   * (`PartitionStoreHandle`'s write guard), every outbox publishes under its epoch and checks
   * it before each send, and the partition records the epoch in `meta` at each start.
   */
  readonly fence?: PartitionFence;
  /**
   * The partition's checkpoints, on a cluster worker given a checkpoint store
   * (`webIndexApplication`, docs/checkpoints.md, "The web index"). With it, every effect
   * visible outside the partition waits for a checkpoint that holds it: outboxes are opened
   * `heldForCheckpoint` and registered, acks and dead letters go through `hold` after their
   * commit, and the host's replies to asks that change state wait for `afterCheckpoint`.
   */
  readonly checkpoints?: PartitionCheckpointer;
}

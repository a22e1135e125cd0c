import type { Broker } from '../../runtime/brokers/broker.js';
import type { PartitionId } from '../../runtime/ids.js';
import type { Partitioner } from '../../runtime/partitioner.js';
import type { Logger } from 'pino';
import type { FlowCounters } from '../progress.js';
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
}

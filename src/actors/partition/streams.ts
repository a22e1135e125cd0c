import type { Store } from '../../storage/index.js';
import { producerId, StreamMarks, StreamOutbox, type StreamColumnFamilyNames } from '../../index.js';
import type { PartitionEnv } from './env.js';
import { ColumnFamilies } from './schema.js';

/**
 * Where a partition store keeps the framework's stream bookkeeping: applied marks and outbox
 * sequences in `meta`, outbox rows in `outbox` (the web index's own names, from before the
 * framework reserved `sf.*`; keys and values are the framework's, see schema.ts).
 */
export const PARTITION_STREAM_FAMILIES: StreamColumnFamilyNames = Object.freeze({
  meta: ColumnFamilies.meta,
  outbox: ColumnFamilies.outbox,
});

/**
 * Opens the transactional outbox of actor `owner` (e.g. `indexer`) in its partition's store,
 * as broker producer `<owner>@<partition>`, and publishes what a previous incarnation left.
 * Under a cluster fence (`env.fence`) its sequences carry the fence's epoch and each send
 * checks the fence first. With checkpoints (`env.checkpoints`) its rows, those left included,
 * are published by the checkpointer once a durable checkpoint holds them.
 * @throws the store's and the broker's errors; FencedError from the fence
 */
export async function openPartitionOutbox(env: PartitionEnv, store: Store, owner: string): Promise<StreamOutbox> {
  const outbox = await StreamOutbox.open({
    store,
    broker: env.broker,
    owner,
    producer: producerId(`${owner}@${env.partition}`),
    counters: env.counters,
    columnFamilies: PARTITION_STREAM_FAMILIES,
    ...(env.fence ? { epoch: env.fence.epoch, fence: env.fence } : {}),
    ...(env.checkpoints ? { heldForCheckpoint: true } : {}),
  });
  env.checkpoints?.register(outbox);
  return outbox;
}

/** The applied marks of consumer `owner` (e.g. `indexer`) in a partition store. */
export function partitionMarks(store: Store, owner: string): StreamMarks {
  return new StreamMarks(store, owner, PARTITION_STREAM_FAMILIES);
}

import { Packr } from 'msgpackr';
import { DataDirError } from '../../errors.js';
import type { Store } from '../../storage/index.js';
import { StreamColumnFamilies } from './reserved.js';

/** `sf.meta` key of a stage store's shape (msgpack `StageShape`). */
export const SHAPE_KEY = 'shape';

/** What a stage partition's store was written as; recorded at its first open, checked at every open. */
export interface StageShape {
  /** Stage name. */
  readonly stage: string;
  /** Input namespace. */
  readonly namespace: string;
  /** This store's partition, in [0, partitions). */
  readonly partition: number;
  readonly partitions: number;
  /** `KeyPartitioner.describe()` of the input namespace, e.g. `fnv1a/8`. */
  readonly partitioner: string;
}

const packr = new Packr({ useRecords: false });

/**
 * Writes `shape` into a new store, or checks it against the stored one: a store written
 * for another stage, namespace, partition, partition count or partitioner holds keys placed
 * by another scheme, and running on it would route messages to the wrong partition.
 * @throws DataDirError naming the store's path and both shapes when they differ
 */
export async function checkStageShape(store: Store, shape: StageShape): Promise<void> {
  const stored = await store.get(StreamColumnFamilies.meta, SHAPE_KEY);
  if (!stored) {
    await store.put(StreamColumnFamilies.meta, SHAPE_KEY, packr.pack(shape), { sync: true });
    return;
  }
  const was = packr.unpack(stored) as StageShape;
  const fields = ['stage', 'namespace', 'partition', 'partitions', 'partitioner'] as const;
  if (fields.some((f) => was[f] !== shape[f])) {
    throw new DataDirError(
      `stage store ${store.path} was written as ${describeShape(was)}, not as ${describeShape(shape)}: ` +
        'the partition count or partitioner changed, or the data dir belongs to another topology; use a new data dir (re-partitioning is not supported)',
    );
  }
}

function describeShape(s: StageShape): string {
  return `stage ${s.stage} on ${s.namespace}, partition ${s.partition} of ${s.partitions} (${s.partitioner})`;
}

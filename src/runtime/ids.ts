/**
 * Branded identifiers (after xstate's branded ids): a `PartitionId` cannot be passed where a
 * `Sequence` is expected, though both are numbers at run time.
 */

declare const brand: unique symbol;
/** `T` tagged with a compile-time brand `B`; no run-time cost. */
export type Branded<T, B extends string> = T & { readonly [brand]: B };

/** A partition number in `[0, partitions)`. */
export type PartitionId = Branded<number, 'PartitionId'>;
/** A producer's stable name, e.g. `indexer@3` (stable across restarts for exactly-once marks). */
export type ProducerId = Branded<string, 'ProducerId'>;
/** A producer's message sequence number: 0, 1, 2, ... per (producer, topic), never reused. */
export type Sequence = Branded<number, 'Sequence'>;

/** @throws RangeError when `n` is not an integer in `[0, partitions)`. */
export function partitionId(n: number, partitions?: number): PartitionId {
  if (!Number.isInteger(n) || n < 0 || (partitions !== undefined && n >= partitions)) {
    throw new RangeError(`partition id ${n} outside [0, ${partitions ?? 'inf'})`);
  }
  return n as PartitionId;
}

/** Casts a string to a `ProducerId` (no validation beyond non-empty). */
export function producerId(name: string): ProducerId {
  if (name.length === 0) throw new RangeError('empty producer id');
  return name as ProducerId;
}

/** @throws RangeError when `n` is not a non-negative safe integer. */
export function sequence(n: number): Sequence {
  if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`sequence ${n} is not a non-negative safe integer`);
  return n as Sequence;
}

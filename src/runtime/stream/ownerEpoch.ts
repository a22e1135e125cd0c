import { FencedError } from '../../errors.js';
import { decodeInt64, encodeInt64 } from '../../operators/mergeOperators.js';
import type { Store } from '../../storage/index.js';
import { MAX_SUBSCRIBE_PRIORITY } from '../brokers/broker.js';
import { MAX_EPOCH } from './producerEpoch.js';
import { StreamColumnFamilies } from './reserved.js';

/** Meta-family key (`sf.meta` in a stage store) of the epoch of the last owner that opened the store (int64 LE). */
export const OWNER_EPOCH_KEY = 'owner-epoch';

/**
 * The ownership one stage partition runs under when a cluster assigns it (src/cluster): the
 * epoch of its partition lease and a check that the lease is still safely held. The epoch
 * grows on every change of owner (a fencing token, Kleppmann, "How to do distributed
 * locking", 2016); it is recorded in the store at open (`recordOwnerEpoch`) and packed into
 * the sequences the partition's outbox publishes (producerEpoch.ts), so a paused old owner
 * neither reopens the store nor publishes anything that counts.
 */
export interface PartitionFence {
  /** The lease epoch, in [1, MAX_EPOCH]. */
  readonly epoch: number;
  /**
   * Throws FencedError when the lease is no longer safely held (ran out on the local
   * monotonic clock minus a safety margin, or lost). Called before the store opens, before
   * each commit and before each publish.
   */
  check(): void;
  /**
   * True when an earlier owner already started this partition (a cluster worker records the
   * first start in Redis): its store then holds state, and a next owner that finds no store
   * in its data dir (another machine's, or a wiped one) must refuse the partition rather than
   * start it from nothing. Undefined: not known.
   */
  readonly startedBefore?: boolean;
}

/**
 * The subscribe options that make a partition owner's failover consumer the active one over any
 * older owner's (`SubscribeOptions.priority`: its lease epoch, capped at
 * MAX_SUBSCRIBE_PRIORITY); none without a fence (one process, no older owner).
 */
export function ownerPriority(fence: PartitionFence | undefined): { readonly priority?: number } {
  return fence ? { priority: Math.min(fence.epoch, MAX_SUBSCRIBE_PRIORITY) } : {};
}

/**
 * Records `epoch` as the store's owner epoch, or refuses it: a store whose recorded epoch is
 * newer was opened since by a later owner, and the caller is a fenced-off older one. An
 * equal epoch is the same ownership opening again (a restart). Written with `sync`.
 * @param meta the store's meta family: `sf.meta` for a stage store (the default), the
 *   application's own for a store it opens (the web index's `meta`)
 * @throws FencedError when the store records a newer epoch; RangeError for an epoch outside
 *   [1, MAX_EPOCH]; the store's errors
 */
export async function recordOwnerEpoch(store: Store, epoch: number, meta: string = StreamColumnFamilies.meta): Promise<void> {
  if (!Number.isInteger(epoch) || epoch < 1 || epoch > MAX_EPOCH) throw new RangeError(`owner epoch ${epoch} outside [1, ${MAX_EPOCH}]`);
  const stored = await readOwnerEpoch(store, meta);
  if (stored > epoch) {
    throw new FencedError(`store ${store.path} was opened by owner epoch ${stored}, newer than this owner's ${epoch}: this ownership is fenced off`, epoch, stored);
  }
  if (stored < epoch) await store.put(meta, OWNER_EPOCH_KEY, encodeInt64(epoch), { sync: true });
}

/**
 * The store's recorded owner epoch; 0 when no owner epoch was ever recorded (a store run outside a cluster).
 * @param meta the store's meta family (default `sf.meta`, see {@link recordOwnerEpoch})
 */
export async function readOwnerEpoch(store: Store, meta: string = StreamColumnFamilies.meta): Promise<number> {
  const stored = await store.get(meta, OWNER_EPOCH_KEY);
  return stored ? Number(decodeInt64(stored)) : 0;
}

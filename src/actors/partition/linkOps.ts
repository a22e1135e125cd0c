import { topic } from '../../runtime/brokers/index.js';
import type { WriteBatch } from '../../storage/index.js';
import { partitionId, type StreamOutbox } from '../../index.js';
import { Namespaces } from '../namespaces.js';
import type { Partitioner } from './hostPartitioner.js';
import { linkOpCodec, type LinkOp } from '../messages.js';

/** Most link operations per `links/<q>` message. */
export const LINK_OPS_PER_MESSAGE = 512;

/**
 * Enqueues link operations in `batch`'s outbox as `links/<q>` messages, q the partition
 * that owns each target's host, at most LINK_OPS_PER_MESSAGE per message, in order per
 * partition. Used by every writer of outlinks (the indexer, the garbage collector).
 */
export async function enqueueLinkOps(outbox: StreamOutbox, batch: WriteBatch, partitioner: Partitioner, ops: readonly LinkOp[]): Promise<void> {
  const byPartition = new Map<number, LinkOp[]>();
  for (const op of ops) {
    const q = partitioner.forUrl(op.target);
    let list = byPartition.get(q);
    if (!list) byPartition.set(q, (list = []));
    list.push(op);
  }
  for (const [q, list] of byPartition) {
    for (let i = 0; i < list.length; i += LINK_OPS_PER_MESSAGE) {
      await outbox.enqueue(batch, topic(Namespaces.links, partitionId(q)), linkOpCodec.encode({ type: 'links', ops: list.slice(i, i + LINK_OPS_PER_MESSAGE) }));
    }
  }
}

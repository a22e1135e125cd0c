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
 * that owns each target's host, at most LINK_OPS_PER_MESSAGE per message and
 * LINK_OPS_MESSAGE_BYTES bytes (a message of one operation may be larger), in order per
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
      for (const payload of encodeWithin(list.slice(i, i + LINK_OPS_PER_MESSAGE))) await outbox.enqueue(batch, topic(Namespaces.links, partitionId(q)), payload);
    }
  }
}

/**
 * Most payload bytes of a `links/<q>` message, 512 KiB: within every broker's default
 * `maxPayloadBytes` (5 MiB; Pulsar over its WebSocket proxy 784,896 bytes, its 1 MiB frames
 * in base64), where 512 operations of 10 KB URLs would not be.
 */
export const LINK_OPS_MESSAGE_BYTES = 1 << 19;

/** `ops` encoded as one message, or halved until each part is under LINK_OPS_MESSAGE_BYTES (one operation at least), in order. */
function encodeWithin(ops: readonly LinkOp[]): Uint8Array[] {
  const payload = linkOpCodec.encode({ type: 'links', ops });
  if (payload.length <= LINK_OPS_MESSAGE_BYTES || ops.length === 1) return [payload];
  const half = ops.length >> 1;
  return [...encodeWithin(ops.slice(0, half)), ...encodeWithin(ops.slice(half))];
}

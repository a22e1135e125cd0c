import type { Partitioner } from '../../runtime/partitioner.js';
import { partitionId } from '../../runtime/ids.js';
import { Namespaces, topic } from '../../runtime/topics.js';
import { packKeys, type WriteBatch } from '../../storage/index.js';
import { contributionCodec } from '../messages.js';
import type { Outbox } from '../partition/outbox.js';

/** Most (url, delta) entries per `metrics/<q>` message. */
export const CONTRIBUTIONS_PER_MESSAGE = 4096;

/**
 * Contributions to the pages of one partition: `deltas[i]` for the page keyed `keys[i]`,
 * which the sender's target dictionary calls `indexes[i]` (metric rounds; absent for the
 * corrections of graph changes).
 */
export interface PartitionContributions {
  readonly keys: Uint8Array[];
  readonly deltas: number[];
  readonly indexes?: number[];
}

/** Empty per-partition lists, one per partition. */
export function emptyContributions(partitions: number, withIndexes = false): PartitionContributions[] {
  return Array.from({ length: partitions }, () => (withIndexes ? { keys: [], deltas: [], indexes: [] } : { keys: [], deltas: [] }));
}

/**
 * Groups contributions (target URL -> delta, summed per target) by the partition that owns
 * each target. For the few corrections of graph changes; metric rounds group by target id.
 */
export function groupByPartition(partitioner: Partitioner, combined: ReadonlyMap<string, number>): PartitionContributions[] {
  const per = emptyContributions(partitioner.partitions);
  for (const [url, delta] of combined) {
    const part = per[partitioner.forUrl(url)]!;
    part.keys.push(Buffer.from(url, 'utf8'));
    part.deltas.push(delta);
  }
  return per;
}

/**
 * Enqueues per-partition contributions as `metrics/<q>` messages of `round` (at most
 * CONTRIBUTIONS_PER_MESSAGE entries each) in `batch`'s outbox. Round 0 carries the
 * corrections of graph changes, outside rounds. With `dictionary` (the sender's
 * AdjacencyCache.dictionary), each message also names its targets by their index in it.
 * @returns messages enqueued per partition
 */
export async function enqueuePartitionContributions(
  outbox: Outbox,
  batch: WriteBatch,
  round: number,
  per: readonly PartitionContributions[],
  dictionary?: string,
): Promise<number[]> {
  const sent = new Array<number>(per.length).fill(0);
  for (let q = 0; q < per.length; q++) {
    const { keys, deltas, indexes } = per[q]!;
    for (let i = 0; i < keys.length; i += CONTRIBUTIONS_PER_MESSAGE) {
      const end = Math.min(keys.length, i + CONTRIBUTIONS_PER_MESSAGE);
      const source = dictionary !== undefined && indexes ? { source: { dictionary, indexes: Uint32Array.from(indexes.slice(i, end)) } } : {};
      const payload = contributionCodec.encode({ type: 'metrics', round, keys: packKeys(keys.slice(i, end)), deltas: Float64Array.from(deltas.slice(i, end)), ...source });
      await outbox.enqueue(batch, topic(Namespaces.metrics, partitionId(q)), payload);
      sent[q]!++;
    }
  }
  return sent;
}

/**
 * `enqueuePartitionContributions` for contributions keyed by target URL (corrections of
 * graph changes from the indexer and the garbage collector).
 * @returns messages enqueued per partition
 */
export async function enqueueContributions(
  outbox: Outbox,
  batch: WriteBatch,
  partitioner: Partitioner,
  round: number,
  combined: ReadonlyMap<string, number>,
): Promise<number[]> {
  if (combined.size === 0) return new Array<number>(partitioner.partitions).fill(0);
  return enqueuePartitionContributions(outbox, batch, round, groupByPartition(partitioner, combined));
}

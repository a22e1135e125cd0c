import { topic } from '../../runtime/brokers/index.js';
import { gatherKeys, packKeys, type PackedKeys, type WriteBatch } from '../../storage/index.js';
import { partitionId, type StreamOutbox } from '../../index.js';
import { Namespaces } from '../namespaces.js';
import type { Partitioner } from '../partition/hostPartitioner.js';
import type { KeyArena } from './keyArena.js';
import { contributionCodec, type CopyRuns } from '../messages.js';

/** Most (url, delta) entries per `metrics/<q>` message. */
export const CONTRIBUTIONS_PER_MESSAGE = 4096;

/**
 * Most key bytes (URLs, UTF-8) in one section of a `metrics/<q>` message, 256 KiB: a
 * message's contributions and its copies each stay under it (a single key over it travels
 * alone), so a message stays under about 620 KB, within every broker's default
 * `maxPayloadBytes` (Pulsar over its WebSocket proxy: 784,896 bytes), whatever the URLs'
 * lengths. 4,096 entries of 1.4 KB URLs made 6.7 MB messages that no broker took:
 * the metric actor failed and restarted for ever (found by a new user).
 */
export const KEY_BYTES_PER_MESSAGE = 1 << 18;

/**
 * Contributions to the pages of one partition: `deltas[i]` for the page keyed `keys[i]`
 * (the corrections of graph changes), or for target `indexes[i]` of the sender's
 * dictionary (metric rounds), whose key is in the sender's KeyArena of targets.
 */
export type PartitionContributions =
  | { readonly keys: Uint8Array[]; readonly deltas: number[] }
  | { readonly indexes: number[]; readonly deltas: number[]; readonly ids: number[] };

/** Empty per-partition lists of keyed contributions, one per partition. */
export function emptyContributions(partitions: number): Array<{ keys: Uint8Array[]; deltas: number[] }> {
  return Array.from({ length: partitions }, () => ({ keys: [], deltas: [] }));
}

/** Empty per-partition lists of contributions by target id, one per partition. */
export function emptyTargetContributions(partitions: number): Array<{ indexes: number[]; deltas: number[]; ids: number[] }> {
  return Array.from({ length: partitions }, () => ({ indexes: [], deltas: [], ids: [] }));
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
 * CONTRIBUTIONS_PER_MESSAGE entries and KEY_BYTES_PER_MESSAGE key bytes each) in `batch`'s outbox. Round 0 carries the
 * corrections of graph changes, outside rounds. Contributions by target id need `source`:
 * the sender's AdjacencyCache dictionary name (each message names its targets by their
 * index in it) and its KeyArena of target keys.
 * @param bytes when given, payload bytes enqueued per partition are added to it (indexed by q)
 * @param attach when given, called for the last message to each partition q: the copies of
 *   source metrics it returns travel in that message (`ContributionBatch.copies`), and
 *   `attached(q, payloadBytes)` is called once the message is enqueued
 * @returns messages enqueued per partition
 */
export async function enqueuePartitionContributions(
  outbox: StreamOutbox,
  batch: WriteBatch,
  round: number,
  per: readonly PartitionContributions[],
  source?: { readonly dictionary: string; readonly targetKeys: KeyArena },
  bytes?: number[],
  attach?: { take(q: number): CopyRuns | undefined; attached(q: number, payloadBytes: number): void },
): Promise<number[]> {
  const sent = new Array<number>(per.length).fill(0);
  for (let q = 0; q < per.length; q++) {
    const part = per[q]!;
    const { deltas } = part;
    if (!('keys' in part) && !source) throw new Error('contributions by target id need the source dictionary');
    const keyBytes = 'keys' in part ? (k: number) => part.keys[k]!.length : (k: number) => source!.targetKeys.end(part.ids[k]!) - source!.targetKeys.start(part.ids[k]!);
    for (let i = 0, end = 0; i < deltas.length; i = end) {
      // At most CONTRIBUTIONS_PER_MESSAGE entries and KEY_BYTES_PER_MESSAGE key bytes (one at least).
      end = i;
      for (let bytes = 0; end < deltas.length && end - i < CONTRIBUTIONS_PER_MESSAGE; end++) {
        bytes += keyBytes(end);
        if (bytes > KEY_BYTES_PER_MESSAGE && end > i) break;
      }
      let keys: PackedKeys;
      let named = {};
      if ('keys' in part) keys = packKeys(part.keys.slice(i, end));
      else {
        const arena = source!.targetKeys;
        const starts = new Uint32Array(end - i);
        const ends = new Uint32Array(end - i);
        const indexes = new Uint32Array(end - i);
        for (let k = i; k < end; k++) {
          const id = part.ids[k]!;
          starts[k - i] = arena.start(id);
          ends[k - i] = arena.end(id);
          indexes[k - i] = part.indexes[k]!;
        }
        keys = gatherKeys(arena.bytes, starts, ends);
        named = { source: { dictionary: source!.dictionary, indexes } };
      }
      const chunk = new Float64Array(end - i);
      for (let k = i; k < end; k++) chunk[k - i] = deltas[k]!;
      const copies = end === deltas.length ? attach?.take(q) : undefined;
      const payload = contributionCodec.encode({ type: 'metrics', round, keys, deltas: chunk, ...named, ...(copies ? { copies } : {}) });
      await outbox.enqueue(batch, topic(Namespaces.metrics, partitionId(q)), payload);
      sent[q]!++;
      if (bytes) bytes[q] = (bytes[q] ?? 0) + payload.length;
      if (copies) attach!.attached(q, payload.length);
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
  outbox: StreamOutbox,
  batch: WriteBatch,
  partitioner: Partitioner,
  round: number,
  combined: ReadonlyMap<string, number>,
): Promise<number[]> {
  if (combined.size === 0) return new Array<number>(partitioner.partitions).fill(0);
  return enqueuePartitionContributions(outbox, batch, round, groupByPartition(partitioner, combined));
}

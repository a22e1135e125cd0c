import type { Partitioner } from '../../runtime/partitioner.js';
import { partitionId } from '../../runtime/ids.js';
import { Namespaces, topic } from '../../runtime/topics.js';
import type { WriteBatch } from '../../storage/index.js';
import { contributionCodec } from '../messages.js';
import type { Outbox } from '../partition/outbox.js';

/** Most (url, delta) entries per `metrics/<q>` message. */
export const CONTRIBUTIONS_PER_MESSAGE = 4096;

/**
 * Groups combined contributions (target URL -> delta, already summed per target) by the
 * partition that owns each target and enqueues them as `metrics/<q>` messages of `round`
 * in `batch`'s outbox. Round 0 carries the corrections of graph changes, outside rounds.
 * @returns messages enqueued per partition
 */
export async function enqueueContributions(
  outbox: Outbox,
  batch: WriteBatch,
  partitioner: Partitioner,
  round: number,
  combined: ReadonlyMap<string, number>,
): Promise<number[]> {
  const sent = new Array<number>(partitioner.partitions).fill(0);
  if (combined.size === 0) return sent;
  const per: Array<{ urls: string[]; deltas: number[] }> = Array.from({ length: partitioner.partitions }, () => ({ urls: [], deltas: [] }));
  for (const [url, delta] of combined) {
    const part = per[partitioner.forUrl(url)]!;
    part.urls.push(url);
    part.deltas.push(delta);
  }
  for (let q = 0; q < per.length; q++) {
    const { urls, deltas } = per[q]!;
    for (let i = 0; i < urls.length; i += CONTRIBUTIONS_PER_MESSAGE) {
      const payload = contributionCodec.encode({ type: 'metrics', round, urls: urls.slice(i, i + CONTRIBUTIONS_PER_MESSAGE), deltas: deltas.slice(i, i + CONTRIBUTIONS_PER_MESSAGE) });
      await outbox.enqueue(batch, topic(Namespaces.metrics, partitionId(q)), payload);
      sent[q]!++;
    }
  }
  return sent;
}

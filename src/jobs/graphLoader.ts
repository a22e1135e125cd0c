import { randomUUID } from 'node:crypto';
import type { Broker } from '../runtime/brokers/broker.js';
import { producerId, sequence, type PartitionId } from '../runtime/ids.js';
import { hostOf, type Partitioner } from '../runtime/partitioner.js';
import { Namespaces, topic, topicName } from '../runtime/topics.js';
import { fetchCodec, type FetchResult, type Outlink } from '../actors/messages.js';
import type { FlowCounters } from '../actors/progress.js';

const PAGES_PER_MESSAGE = 64;

/**
 * A page of a graph file as a fetch result: status 200 with its distinct outlinks (no HTML),
 * features neutral: no anchor text, body region, position 0 (a graph file has no layout),
 * same-host flag from the hosts.
 */
export function graphPage(url: string, targets: readonly string[], fetchedAt = 0): FetchResult {
  const distinct = [...new Set(targets)];
  const host = safeHost(url);
  const outlinks: Outlink[] = distinct.map((target) => ({
    target,
    features: { anchor: '', position: 0, rel: [], sameHost: safeHost(target) === host, region: 'body' },
  }));
  return { url, status: 200, fetchedAt, outlinks };
}

/**
 * Publishes fetch results to `fetches/<p>` (p the partition of each URL), 64 per message,
 * in order per partition, under a fresh producer name. Counts what it sends in `counters`
 * so that quiescence detection waits for it.
 */
export async function publishFetches(broker: Broker, partitioner: Partitioner, counters: FlowCounters, results: readonly FetchResult[]): Promise<void> {
  const byPartition = new Map<PartitionId, FetchResult[]>();
  for (const r of results) {
    const p = partitioner.forUrl(r.url);
    let list = byPartition.get(p);
    if (!list) byPartition.set(p, (list = []));
    list.push(r);
  }
  const name = producerId(`loader/${randomUUID()}`);
  for (const [p, list] of byPartition) {
    const t = topic(Namespaces.fetches, p);
    const producer = await broker.producer(t, { producer: name });
    for (let i = 0, seq = 0; i < list.length; i += PAGES_PER_MESSAGE, seq++) {
      const key = { producer: name, topic: topicName(t), sequence: seq };
      counters.onSent(Namespaces.fetches, key);
      try {
        await producer.send(fetchCodec.encode({ type: 'fetches', results: list.slice(i, i + PAGES_PER_MESSAGE) }), { sequence: sequence(seq) });
      } catch (err) {
        counters.onSendFailed(Namespaces.fetches, key);
        throw err;
      }
    }
    await producer.close();
  }
}

function safeHost(url: string): string {
  try {
    return hostOf(url);
  } catch {
    return '';
  }
}

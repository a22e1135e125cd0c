import type { Logger } from 'pino';
import { topic, topicName, type Broker, type Topic } from '../runtime/brokers/index.js';
import { partitionId, type Clock } from '../index.js';
import { Namespaces } from '../actors/namespaces.js';

/** A subscription of the web index: who consumes what. */
export interface IndexSubscription {
  readonly topic: Topic;
  readonly subscription: string;
}

/**
 * Every subscription a web index of `partitions` partitions consumes: `fetches/<p>`
 * (indexer; crawl-policy when crawling), `links/<p>` (backlinks), `metrics/<p>` (metrics),
 * and `crawl-requests/<p>` (crawlers) when crawling.
 */
export function webIndexSubscriptions(partitions: number, crawling: boolean): IndexSubscription[] {
  const out: IndexSubscription[] = [];
  for (let p = 0; p < partitions; p++) {
    const id = partitionId(p);
    out.push({ topic: topic(Namespaces.fetches, id), subscription: 'indexer' });
    out.push({ topic: topic(Namespaces.links, id), subscription: 'backlinks' });
    out.push({ topic: topic(Namespaces.metrics, id), subscription: 'metrics' });
    if (crawling) {
      out.push({ topic: topic(Namespaces.fetches, id), subscription: 'crawl-policy' });
      out.push({ topic: topic(Namespaces.crawlRequests, id), subscription: 'crawlers' });
    }
  }
  return out;
}

/**
 * The subscriptions a durable broker no longer holds (stream or group gone, topic or
 * subscription deleted): a run that finds any cannot resume on that scope, since what they
 * held is lost. @returns their names (`namespace/partition subscription`)
 * @throws InvalidArgumentError when the broker cannot tell (no `subscriptionBacklog`)
 */
export async function lostSubscriptions(broker: Broker, subscriptions: readonly IndexSubscription[]): Promise<string[]> {
  const backlog = broker.subscriptionBacklog?.bind(broker);
  if (!backlog) throw new Error(`a ${broker.kind} broker keeps nothing across processes: there is nothing to resume`);
  const lost: string[] = [];
  for (const s of subscriptions) if ((await backlog(s.topic, s.subscription)) === undefined) lost.push(`${topicName(s.topic)} ${s.subscription}`);
  return lost;
}

/** What `drainBacklog` found. */
export interface DrainReport {
  /** Messages the broker held for the subscriptions when the drain began. */
  readonly messages: number;
  readonly seconds: number;
}

/**
 * Resuming on a durable broker: waits until the actors have applied every message an earlier
 * process left on the broker (every subscription's backlog is 0: each was acked, so its
 * effects committed, and what they sent was sent by this process and is counted by its flow
 * counters). Only then can the job rely on quiescence: the flow counters of this process do
 * not know the earlier one's messages. Says what it waits for every 30 s without progress.
 * @throws BrokerDataLostError-like failures when a subscription vanishes meanwhile
 *   (`subscriptionBacklog` answers undefined): the caller repairs instead
 */
export async function drainBacklog(broker: Broker, subscriptions: readonly IndexSubscription[], clock: Clock, log: Logger): Promise<DrainReport> {
  const t0 = performance.now();
  const backlog = broker.subscriptionBacklog!.bind(broker);
  const read = async () => {
    const open: Array<[string, number]> = [];
    for (const s of subscriptions) {
      const n = await backlog(s.topic, s.subscription);
      if (n === undefined) throw new Error(`${topicName(s.topic)} subscription ${s.subscription} vanished from the broker while resuming`);
      if (n > 0) open.push([`${topicName(s.topic)} ${s.subscription}`, n]);
    }
    return open;
  };
  let open = await read();
  const messages = open.reduce((a, [, n]) => a + n, 0);
  let last = messages;
  let since = clock.now();
  while (open.length > 0) {
    await new Promise<void>((resolve) => clock.setTimeout(resolve, 100));
    open = await read();
    const total = open.reduce((a, [, n]) => a + n, 0);
    if (total !== last) {
      last = total;
      since = clock.now();
    } else if (clock.now() - since >= 30_000) {
      log.warn({ backlog: Object.fromEntries(open) }, 'resume: no progress for 30 s, waiting for the messages an earlier run left');
      since = clock.now();
    }
  }
  return { messages, seconds: (performance.now() - t0) / 1000 };
}

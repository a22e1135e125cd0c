import { waitStreamsQuiet, type Clock, type FlowCollection, type QuietReport, type SentStream, type StreamFlowReport } from '../index.js';
import type { CrawlDrain } from '../actors/crawlPolicy/crawlPolicy.js';
import { WEB_INDEX_STAGE, webIndexStreamReceiver, type PartitionAsker } from '../topology/clusterProtocol.js';

export type { PartitionAsker } from '../topology/clusterProtocol.js';


/** Every web-index partition's flow report (`{ kind: 'flow' }`), in partition order. @throws the client's errors */
export async function collectFlow(client: PartitionAsker, partitions: number): Promise<StreamFlowReport[]> {
  return (await Promise.all(Array.from({ length: partitions }, (_, p) => client.ask(WEB_INDEX_STAGE, p, { kind: 'flow' })))) as StreamFlowReport[];
}

/**
 * The receiver's applied mark of `stream` in a collection of web-index flow reports (-1 when
 * it applied nothing of that producer, or nobody receives the topic).
 */
export function appliedMark(reports: readonly StreamFlowReport[], stream: Pick<SentStream, 'producer' | 'topic'>): number {
  const r = webIndexStreamReceiver(stream.topic);
  return (r && reports[r.report]?.consumers.find((c) => c.consumer === r.consumer)?.applied[stream.producer]) ?? -1;
}

/**
 * Waits until a cluster's web index is quiet: every stream a partition's outbox committed, and
 * every stream of `external` (a loader's), applied by its receiver, in two consecutive
 * identical collections of the partitions' flow reports (`waitStreamsQuiet`). The reports come
 * from the stores, so they hold across worker failures: a partition that moves meanwhile
 * reports the same after its restart.
 * @throws JobStalledError after `timeoutMs` (default 10 minutes) naming what is unapplied; the client's errors
 */
export function waitClusterQuiet(client: PartitionAsker, partitions: number, external: readonly SentStream[], options: { readonly clock?: Clock; readonly timeoutMs?: number; readonly signal?: AbortSignal } = {}): Promise<QuietReport> {
  return waitStreamsQuiet(() => collectFlow(client, partitions), { receiver: webIndexStreamReceiver, external, pollMs: 100, ...options });
}

/**
 * What holds a crawl's work on partition p beyond its streams, for {@link waitClusterCrawlQuiet}:
 * its crawl policy when not drained, and every crawler stream on `fetches/<p>` that the
 * indexer and the crawl policy (its two consumers) have not applied alike.
 */
export function crawlBusy(p: number, report: StreamFlowReport, drain: CrawlDrain): string[] {
  const busy: string[] = [];
  if (!drain.drained) busy.push(`crawl-policy of partition ${p}: ${drain.requested} requests out, ${drain.robots} robots.txt fetches, ${drain.readyHosts} hosts with queued URLs`);
  const marks = (consumer: string) => report.consumers.find((c) => c.consumer === consumer)?.applied ?? {};
  const indexer = marks('indexer');
  const policy = marks('crawl-policy');
  for (const producer of new Set([...Object.keys(indexer), ...Object.keys(policy)])) {
    const a = indexer[producer] ?? -1;
    const b = policy[producer] ?? -1;
    if (a !== b) busy.push(`fetches/${p} from ${producer}: indexer applied ${a}, crawl policy ${b}`);
  }
  return busy;
}

/**
 * Waits until a crawl on a cluster's web index is done: `waitStreamsQuiet` over collections
 * where each partition is asked its `flow` report and then, in the same collection, whether
 * its crawl policy is `drained`.
 *
 * Why that is enough. The streams with a store at both ends (links, metrics, the crawl
 * policies' own marks) are covered by the flow reports as in `waitClusterQuiet`. What they
 * cannot cover is the crawlers, which keep no store: a crawl request is in flight from the
 * policy's commit until its result is applied. The policy keeps every URL it requested as
 * `requested` until it applies that URL's result from `fetches/<p>` (or the request times
 * out), so a drained policy has no request out; and the indexer, the other consumer of
 * `fetches/<p>`, must have applied the same crawler sequences (`crawlBusy`). A drained answer
 * is given after the policy took in `pending` (rows the backlinks actor committed with its
 * marks) and dispatched, so a URL discovered before the flow read of that collection is
 * either requested (not drained) or in a row committed after it (the next report differs).
 * Two consecutive collections with identical reports and nothing busy are then one instant at
 * which no store committed anything, nothing was unapplied, no policy held a request and no
 * crawler result was applied by one consumer only: nothing can follow but a seed, a due
 * recrawl or a retry (by default days or a minute later). A crawler that died after
 * publishing and before acking makes its request fetched again: that duplicate result may
 * still be in flight; its page and links are the same, so it changes no count or score.
 * @throws JobStalledError after `timeoutMs` (default 10 minutes) naming what is unapplied or busy; the client's errors
 */
export function waitClusterCrawlQuiet(client: PartitionAsker, partitions: number, options: { readonly clock?: Clock; readonly timeoutMs?: number; readonly signal?: AbortSignal } = {}): Promise<QuietReport> {
  const collect = async (): Promise<FlowCollection> => {
    const each = await Promise.all(Array.from({ length: partitions }, async (_, p) => {
      const report = (await client.ask(WEB_INDEX_STAGE, p, { kind: 'flow' })) as StreamFlowReport;
      const drain = (await client.ask(WEB_INDEX_STAGE, p, { kind: 'drained' })) as CrawlDrain;
      return { report, busy: crawlBusy(p, report, drain) };
    }));
    return { reports: each.map((e) => e.report), busy: each.flatMap((e) => e.busy) };
  };
  return waitStreamsQuiet(collect, { receiver: webIndexStreamReceiver, pollMs: 100, ...options });
}

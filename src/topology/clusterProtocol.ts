import type { StreamReceiver } from '../index.js';
import type { MetricMessage } from '../actors/metrics/metricActor.js';
import type { PartitionReadMethod } from '../query/partitionView.js';
import { Namespaces } from '../actors/namespaces.js';

/**
 * The one stage of the web index as a cluster application: a unit of ownership is a whole
 * web-index partition (its store and every actor of `/partitions/p<i>`).
 */
export const WEB_INDEX_STAGE = 'index';

/**
 * What a cluster client asks a web-index partition through the broker
 * (`ApplicationHost.ask(WEB_INDEX_STAGE, p, request)` on the partition's owner). Plain data;
 * every request is idempotent (it may run twice: a redelivery after its owner died, or a
 * retry).
 * - `metrics`: a metric message, answered as `MetricEndpoint` says (`push`/`repair`: the
 *   `PushReport`; `await-applied`: the `RoundApplied`; others: the reply as it is);
 * - `flow`: the partition's `StreamFlowReport` (quiet detection across processes);
 * - `republish-links`: the indexer's (a repair), answered with the count of link operations;
 * - `read`: a read of the query API (`PartitionReads[method](...args)`) on the partition's
 *   reader view, answered with its result (`serve --cluster` routes each key to its owner);
 * - `seed` (workers that crawl): canonical URLs of this partition's hosts handed to its crawl
 *   policy, answered once their frontier rows and first requests are committed; URLs the
 *   frontier knows already are left as they are, so seeding again changes nothing;
 * - `drained` (workers that crawl): the crawl policy's `CrawlDrain` (no request out, no
 *   robots.txt fetch, nothing queued), asked after taking in `pending`.
 */
export type WebIndexRequest =
  | { readonly kind: 'metrics'; readonly message: MetricMessage }
  | { readonly kind: 'flow' }
  | { readonly kind: 'republish-links' }
  | { readonly kind: 'read'; readonly method: PartitionReadMethod; readonly args: readonly unknown[] }
  | { readonly kind: 'seed'; readonly urls: readonly string[] }
  | { readonly kind: 'drained' };

/** Asks a partition of a cluster wherever it runs: what a `ClusterClient` does. */
export interface PartitionAsker {
  ask(stage: string, partition: number, request: unknown, options?: { readonly timeoutMs?: number }): Promise<unknown>;
}

/**
 * The consumer (marks name) of each web-index namespace whose topics a partition store
 * applies. `crawl-requests` has none: the crawlers that consume it keep no store (a crawl
 * request is settled when its result reaches the crawl policy, which `drained` reports).
 */
const CONSUMER_OF: Readonly<Record<string, string>> = Object.freeze({
  [Namespaces.fetches]: 'indexer',
  [Namespaces.links]: 'backlinks',
  [Namespaces.metrics]: 'metrics',
});

/**
 * Who receives a web-index topic, for `unappliedStreams` / `waitStreamsQuiet` over the
 * partitions' `flow` reports in partition order: topic `<namespace>/<q>` is applied by
 * partition q's actor of that namespace (`fetches`: indexer, `links`: backlinks, `metrics`:
 * metrics). `fetches/<q>` also has the crawl policy as a second consumer, which a crawl's
 * quiet detection compares with the indexer (`waitClusterCrawlQuiet`).
 * @returns undefined for a topic of another namespace, and for `crawl-requests` (consumed by
 *   the crawlers, which keep no store)
 */
export function webIndexStreamReceiver(topicName: string): StreamReceiver | undefined {
  const slash = topicName.lastIndexOf('/');
  const consumer = CONSUMER_OF[topicName.slice(0, slash)];
  const report = Number(topicName.slice(slash + 1));
  return consumer === undefined || !Number.isInteger(report) ? undefined : { report, consumer };
}

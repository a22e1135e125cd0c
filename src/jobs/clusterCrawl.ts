import { convergeFields, type MetricJobOptions } from './metricJobOptions.js';
import { systemClock, type Clock } from '../index.js';
import { canonicalUrl } from '../actors/crawler/canonicalUrl.js';
import { hostPartitioner } from '../actors/partition/hostPartitioner.js';
import type { ConvergeResult } from '../actors/metrics/coordinator.js';
import { sumCounts, type PartitionCounts } from '../actors/metrics/metricActor.js';
import { WEB_INDEX_STAGE, type PartitionAsker } from '../topology/clusterProtocol.js';
import { QueryService } from '../query/queryService.js';
import { remotePartitionView } from '../query/remoteView.js';
import { mergeCrawlGaps, type CrawlGap } from '../query/partitionView.js';
import { askAllPartitions, convergeOnCluster } from './clusterConverge.js';
import { waitClusterCrawlQuiet } from './clusterQuiet.js';
import { aborted, raceStops } from './watchdog.js';

/** Options of {@link crawlOnCluster}. */
/** `thresholdFactor`: `crawl` passes 0 (plain rounds). */
export interface ClusterCrawlOptions extends MetricJobOptions {
  /** Asks the web-index partitions wherever they run (a `ClusterClient`); the workers run with `crawl`. */
  readonly client: PartitionAsker;
  /** Partitions of the cluster's web index (its recorded stage). */
  readonly partitions: number;
  /** Start URLs, in any form `canonicalUrl` accepts; those it refuses are reported, not sent. */
  readonly seeds: readonly string[];
  /** Run the metric to convergence after the crawl. Default true. */
  readonly rank?: boolean;
  /** Damping factor d (default 0.85; the workers' stage config records theirs). */
  readonly damping?: number;
  /** Most ms to wait for the crawl to be done (default 10 minutes; JobStalledError after). */
  readonly crawlTimeoutMs?: number;
  readonly clock?: Clock;
  /** Called about once a second while crawling with the pages stored so far (all partitions). */
  readonly onProgress?: (p: { pages: number; seconds: number }) => void;
  /** Called once the crawl is done everywhere, with the seconds it took. */
  readonly onCrawled?: (seconds: number) => void;
  /** Aborting it stops the client (the workers keep crawling: the same seeds again resume). */
  readonly signal?: AbortSignal;
}

/** What a crawl reports (`crawl`, in one process or on a cluster). */
export interface CrawlSummary {
  /** The canonical seeds crawled. */
  readonly seeds: string[];
  /** Seeds refused, with why. */
  readonly refused: Array<{ url: string; reason: string }>;
  readonly pages: number;
  readonly outlinks: number;
  readonly backlinks: number;
  /** Frontier entries by state, over all partitions. */
  readonly frontier: Record<string, number>;
  /** URLs the crawl ended without fetching with an answer, by state and reason, most first (`PartitionView.crawlGaps`). */
  readonly gaps: CrawlGap[];
  /** Live pages per host, most first (up to 100). */
  readonly hosts: Array<{ host: string; pages: number; authority: number }>;
  /** The ten best pages. */
  readonly top: Array<{ url: string; score: number }>;
  readonly crawlSeconds: number;
}

/** What {@link crawlOnCluster} did: what `crawl` reports, with every score. */
export interface ClusterCrawlResult extends CrawlSummary {
  /** Every page with its normalised score, highest first (empty without `rank`). */
  readonly scores: Array<[string, number]>;
  /** The metric's outcome; null without `rank`. */
  readonly converge: ConvergeResult | null;
  readonly convergeSeconds: number;
}

/**
 * Seeds as the crawl policies take them: each in its `canonicalUrl` form, or refused with
 * the reason `canonicalUrl` gave (a URL without host, another scheme...), in the given order.
 */
export function canonicalSeeds(urls: readonly string[]): Pick<CrawlSummary, 'seeds' | 'refused'> {
  const seeds: string[] = [];
  const refused: Array<{ url: string; reason: string }> = [];
  for (const url of urls) {
    try {
      seeds.push(canonicalUrl(url));
    } catch (err) {
      refused.push({ url, reason: (err as Error).message });
    }
  }
  return { seeds, refused };
}

/**
 * Crawls from seeds on a cluster of web-index workers that crawl (`webIndexApplication` with
 * `crawl`; `shardflow worker --web-index --crawl`), as a client that holds no partition:
 *
 * 1. seeds: canonicalises the seeds, groups them by partition and asks each partition's
 *    owner `{ kind: 'seed' }` (its crawl policy queues the URLs it does not know and sends
 *    the first requests; a URL it knows is left as it is, so seeding again is idempotent);
 * 2. waits until the crawl is done across processes (`waitClusterCrawlQuiet`: the partitions'
 *    flow reports and their crawl policies drained, in the same collections);
 * 3. converges as `rankOnCluster` does (`convergeOnCluster`: rounds numbered on from the last
 *    stored), then reads the frontier states, top hosts and top pages through the query API's
 *    remote views.
 *
 * A client killed at any point and started again with the same seeds resumes: the seeds are
 * known (nothing is crawled twice), the crawl went on in the workers meanwhile, and the
 * rounds continue from the stored ones.
 * @throws InvalidArgumentError (from the workers, as RemoteAskError) when they do not crawl;
 *   JobStalledError when the crawl is not done within `crawlTimeoutMs`; the client's errors;
 *   the abort reason when `signal` aborts
 */
export async function crawlOnCluster(options: ClusterCrawlOptions): Promise<ClusterCrawlResult> {
  const clock = options.clock ?? systemClock;
  const partitioner = hostPartitioner(options.partitions);
  const quietOptions = { clock, ...(options.crawlTimeoutMs !== undefined ? { timeoutMs: options.crawlTimeoutMs } : {}), ...(options.signal ? { signal: options.signal } : {}) };
  const run = async (): Promise<ClusterCrawlResult> => {
    const { seeds, refused } = canonicalSeeds(options.seeds);
    for (const r of refused) options.log.warn(r, 'seed refused');
    const byPartition = new Map<number, string[]>();
    for (const url of new Set(seeds)) {
      const p = partitioner.forUrl(url);
      byPartition.set(p, [...(byPartition.get(p) ?? []), url]);
    }
    const t0 = performance.now();
    await Promise.all([...byPartition].map(([p, urls]) => options.client.ask(WEB_INDEX_STAGE, p, { kind: 'seed', urls })));
    options.log.info({ seeds: seeds.length, partitions: byPartition.size }, 'seeded');
    const progress = options.onProgress
      ? setInterval(() => {
        askAllPartitions(options.client, options.partitions, { kind: 'metrics', message: { type: 'counts' } })
          .then((c) => options.onProgress?.({ pages: sumCounts(c as PartitionCounts[]).pages, seconds: (performance.now() - t0) / 1000 }), () => undefined);
      }, 1000)
      : undefined;
    try {
      await waitClusterCrawlQuiet(options.client, options.partitions, quietOptions);
    } finally {
      if (progress) clearInterval(progress);
    }
    const crawlSeconds = (performance.now() - t0) / 1000;
    options.onCrawled?.(crawlSeconds);
    const quiet = () => waitClusterCrawlQuiet(options.client, options.partitions, quietOptions);
    const metric = options.rank === false
      ? { scores: [], converge: null, convergeSeconds: 0, ...sumCounts((await askAllPartitions(options.client, options.partitions, { kind: 'metrics', message: { type: 'counts' } })) as PartitionCounts[]) }
      : await convergeOnCluster({
        client: options.client,
        partitions: options.partitions,
        quiet,
        log: options.log,
        clock,
        ...(options.damping !== undefined ? { damping: options.damping } : {}),
        ...convergeFields(options),
      });
    const frontier: Record<string, number> = {};
    const states = (await askAllPartitions(options.client, options.partitions, { kind: 'read', method: 'frontierStates', args: [] })) as Array<Record<string, number>>;
    for (const s of states) for (const [state, n] of Object.entries(s)) frontier[state] = (frontier[state] ?? 0) + n;
    const gaps = mergeCrawlGaps((await askAllPartitions(options.client, options.partitions, { kind: 'read', method: 'crawlGaps', args: [] })) as CrawlGap[][]);
    const service = new QueryService({ partitioner, view: async (p) => remotePartitionView(options.client, p), clock });
    const [hosts, top] = await Promise.all([service.topHosts({ limit: 100 }), service.topPages({ limit: 10 })]);
    return {
      seeds, refused, pages: metric.pages, outlinks: metric.outlinks, backlinks: metric.backlinks, frontier, gaps, hosts: hosts.top, top: top.top,
      scores: metric.scores, converge: metric.converge, crawlSeconds, convergeSeconds: metric.convergeSeconds,
    };
  };
  return raceStops(run(), aborted(options.signal));
}

import { InvalidArgumentError } from '../index.js';
import { crawlOnCluster, type ClusterCrawlOptions, type ClusterCrawlResult } from '../jobs/clusterCrawl.js';
import { WEB_INDEX_STAGE } from '../topology/clusterProtocol.js';
import { withWebIndexClient, type WebIndexClientCliOptions } from './rankCluster.js';
import { convergeFields } from '../jobs/metricJobOptions.js';

/** What `crawl --cluster` needs. */
export interface ClusterCrawlCliOptions extends WebIndexClientCliOptions, Pick<ClusterCrawlOptions, 'seeds' | 'rank' | 'onProgress'> {}

/** What `crawl --cluster` did: the crawl's result and the workers' scope (from the stage's recorded config). */
export interface ClusterCrawlCliResult extends ClusterCrawlResult {
  readonly scope: string;
}

/**
 * `shardflow crawl --cluster`: crawls from seeds on the web-index workers of a cluster that
 * crawl (`shardflow worker --web-index --crawl`), as a client (`crawlOnCluster`, with plain
 * metric rounds as `crawl` runs them). Waits until a worker runs every partition first.
 * @throws InvalidArgumentError when the cluster has no web index, other partitions than
 *   `partitions`, or workers that do not crawl; Error when the partitions do not all run
 *   within `waitMs`; the job's errors
 */
export function crawlOnClusterCli(o: ClusterCrawlCliOptions): Promise<ClusterCrawlCliResult> {
  return withWebIndexClient(o, async ({ client, partitions }) => {
    const config = (await client.status()).stages?.find((s) => s.name === WEB_INDEX_STAGE)?.config ?? '';
    const crawl = /;crawl=(\{.*\})$/.exec(config);
    if (!crawl) throw new InvalidArgumentError(`the workers of cluster ${o.clusterName} do not crawl: start them with \`shardflow worker --web-index --crawl\``);
    const scope = String((JSON.parse(crawl[1]!) as { scope?: unknown }).scope ?? 'unknown');
    const result = await crawlOnCluster({
      client, partitions, seeds: o.seeds, log: o.log,
      ...convergeFields({ ...o, thresholdFactor: o.thresholdFactor ?? 0 }),
      ...(o.rank !== undefined ? { rank: o.rank } : {}),
      ...(o.signal ? { signal: o.signal } : {}),
      ...(o.onProgress ? { onProgress: o.onProgress } : {}),
    });
    return { ...result, scope };
  });
}

import type { Logger } from 'pino';
import { clusterBrokerIdentity, connectBroker, connectClusterClient, InvalidArgumentError, type ClusterClient } from '../index.js';
import { crawlOnCluster, type ClusterCrawlResult } from '../jobs/clusterCrawl.js';
import { WEB_INDEX_STAGE } from '../topology/clusterProtocol.js';
import type { RoundSummary } from '../actors/metrics/coordinator.js';
import { waitForPartitions } from './rankCluster.js';

/** What `crawl --cluster` needs. */
export interface ClusterCrawlCliOptions {
  readonly cluster: string;
  readonly clusterName: string;
  /** Prefix of the cluster's Redis keys (default `sfc:`). */
  readonly keyPrefix?: string;
  /** Broker spec; topics under the cluster's scope (`clusterBrokerIdentity`). */
  readonly broker: string;
  readonly seeds: readonly string[];
  readonly rank?: boolean;
  readonly tolerance?: number;
  /** `--partitions` when the user gave it: refused when the cluster has another count. */
  readonly partitions?: number;
  /** Most ms to wait for every partition to run (default 300,000). */
  readonly waitMs?: number;
  readonly log: Logger;
  readonly signal?: AbortSignal;
  readonly onRound?: (r: RoundSummary) => void;
  readonly onProgress?: (p: { pages: number; seconds: number }) => void;
  /** Progress lines (waiting for workers). */
  readonly say?: (line: string) => void;
}

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
export async function crawlOnClusterCli(o: ClusterCrawlCliOptions): Promise<ClusterCrawlCliResult> {
  const broker = await connectBroker(clusterBrokerIdentity(o.broker, o.clusterName));
  let client: ClusterClient | undefined;
  try {
    client = await connectClusterClient({ cluster: o.cluster, clusterName: o.clusterName, broker, ...(o.keyPrefix !== undefined ? { keyPrefix: o.keyPrefix } : {}) });
    const partitions = await waitForPartitions(client, o);
    const config = (await client.status()).stages?.find((s) => s.name === WEB_INDEX_STAGE)?.config ?? '';
    const crawl = /;crawl=(\{.*\})$/.exec(config);
    if (!crawl) throw new InvalidArgumentError(`the workers of cluster ${o.clusterName} do not crawl: start them with \`shardflow worker --web-index --crawl\``);
    const scope = String((JSON.parse(crawl[1]!) as { scope?: unknown }).scope ?? 'unknown');
    const result = await crawlOnCluster({
      client, partitions, seeds: o.seeds, log: o.log, thresholdFactor: 0,
      ...(o.rank !== undefined ? { rank: o.rank } : {}),
      ...(o.tolerance !== undefined ? { tolerance: o.tolerance } : {}),
      ...(o.signal ? { signal: o.signal } : {}),
      ...(o.onRound ? { onRound: o.onRound } : {}),
      ...(o.onProgress ? { onProgress: o.onProgress } : {}),
    });
    return { ...result, scope };
  } finally {
    await client?.close();
    await broker.close();
  }
}

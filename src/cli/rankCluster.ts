import { convergeFields, type MetricJobOptions } from '../jobs/metricJobOptions.js';
import type { Broker } from '../runtime/brokers/index.js';
import { clusterBrokerIdentity, connectBroker, connectClusterClient, InvalidArgumentError, JobStalledError, type ClusterClient, type ClusterStatus } from '../index.js';
import { rankOnCluster, type ClusterRankResult } from '../jobs/clusterRank.js';
import { WEB_INDEX_STAGE } from '../topology/clusterProtocol.js';
import type { WebGraph } from '../replay/graphFile.js';

/** Default name of a web-index cluster (`shardflow worker --web-index`, `rank --cluster`). */
export const WEB_INDEX_CLUSTER = 'web-index';

/** What a client command of a web-index cluster needs (`rank --cluster`, `crawl --cluster`). */
export interface WebIndexClientCliOptions extends MetricJobOptions {
  readonly cluster: string;
  readonly clusterName: string;
  /** Prefix of the cluster's Redis keys (default `sfc:`). */
  readonly keyPrefix?: string;
  /** Broker spec; topics under the cluster's scope (`clusterBrokerIdentity`). */
  readonly broker: string;
  /** `--partitions` when the user gave it: refused when the cluster has another count. */
  readonly partitions?: number;
  /** Most ms to wait for every partition to run (default 300,000). */
  readonly waitMs?: number;
  readonly signal?: AbortSignal;
  /** Progress lines (waiting for workers, load skipped). */
  readonly say?: (line: string) => void;
}

/** What `rank --cluster` needs. */
export interface ClusterRankCliOptions extends WebIndexClientCliOptions {
  readonly graph: () => WebGraph | Promise<WebGraph>;
  readonly job?: string;
}

/**
 * `shardflow rank --cluster`: ranks a graph on the web-index workers of a cluster as a
 * client (`rankOnCluster`). Waits until a worker runs every partition of the cluster's web
 * index (a request to a partition no worker ever ran may be lost on Pulsar, which keeps a
 * topic's messages for its existing subscriptions only), then loads, converges, reads.
 * @throws InvalidArgumentError when the cluster has no web index or other partitions than
 *   `partitions`; Error when the partitions do not all run within `waitMs`; the job's errors
 */
export function rankOnClusterCli(o: ClusterRankCliOptions): Promise<ClusterRankResult> {
  return withWebIndexClient(o, ({ client, broker, partitions }) => rankOnCluster({
    client, broker, partitions, graph: o.graph, log: o.log,
    ...(o.job !== undefined ? { job: o.job } : {}),
    ...convergeFields(o),
    ...(o.signal ? { signal: o.signal } : {}),
  }));
}

/**
 * Runs `body` with a broker in the cluster's scope and a cluster client, once every partition
 * of the web index runs (`waitForPartitions`); closes both after.
 * @throws what `waitForPartitions` and `body` throw; the broker's and client's connection errors
 */
export async function withWebIndexClient<T>(o: WebIndexClientCliOptions, body: (c: { client: ClusterClient; broker: Broker; partitions: number }) => Promise<T>): Promise<T> {
  if (o.broker === 'memory') throw new InvalidArgumentError('a cluster client needs the workers\' broker: --broker redis://HOST:PORT or pulsar://HOST:PORT (the memory broker does not cross processes)');
  const broker = await connectBroker(clusterBrokerIdentity(o.broker, o.clusterName));
  let client: ClusterClient | undefined;
  try {
    client = await connectClusterClient({ cluster: o.cluster, clusterName: o.clusterName, broker, ...(o.keyPrefix !== undefined ? { keyPrefix: o.keyPrefix } : {}) });
    const partitions = await waitForPartitions(client, o);
    const watch = o.say ? watchPartitions(client, o.say, o.clusterName) : undefined;
    try {
      return await body({ client, broker, partitions });
    } finally {
      watch?.stop();
    }
  } finally {
    await client?.close();
    await broker.close();
  }
}

/** What {@link waitForPartitions} needs of a client command's options. */
export type WaitForPartitionsOptions = Pick<WebIndexClientCliOptions, 'cluster' | 'clusterName' | 'partitions' | 'waitMs' | 'say' | 'signal' | 'broker'>;

/**
 * Waits until every partition of the web-index stage runs.
 * @returns their count and the stage's recorded config
 * @throws InvalidArgumentError when the cluster has no web index or other partitions than
 *   `o.partitions`; JobStalledError when the partitions do not all run within `o.waitMs`
 *   (default 5 minutes); the abort reason when `o.signal` aborts
 */
export async function waitForPartitions(client: ClusterClient, o: WaitForPartitionsOptions): Promise<number> {
  const deadline = Date.now() + (o.waitMs ?? 300_000);
  let said = 0;
  for (;;) {
    o.signal?.throwIfAborted();
    const status: ClusterStatus = await client.status();
    const stage = status.stages?.find((s) => s.name === WEB_INDEX_STAGE);
    if (status.stages && !stage) throw new InvalidArgumentError(`cluster ${o.clusterName} runs ${status.stages.map((s) => s.name).join(', ')}, not a web index: start its workers with \`shardflow worker --web-index\``);
    if (stage && o.partitions !== undefined && stage.partitions !== o.partitions) {
      throw new InvalidArgumentError(`cluster ${o.clusterName} has ${stage.partitions} partitions, --partitions gives ${o.partitions}`);
    }
    const units = status.partitions.filter((p) => p.stage === WEB_INDEX_STAGE);
    if (stage && units.length === stage.partitions && units.every((p) => p.state === 'running')) return stage.partitions;
    // A refusal lasts until an operator acts (a damaged checkpoint repaired, the refusing
    // worker restarted), so waiting alone does not end it: both messages say which and why.
    const refused = units.filter((p) => p.state === 'failed').map((p) => `${p.unit}: ${p.reason ?? 'refused'}`);
    if (Date.now() > deadline) {
      throw new JobStalledError(
        `cluster ${o.clusterName}: ${stage ? `${units.filter((p) => p.state === 'running').length} of ${stage.partitions} partitions run` : 'no worker ever joined'} after ${Math.round((o.waitMs ?? 300_000) / 1000)} s` +
          (refused.length > 0 ? `; refused: ${refused.slice(0, 3).join('; ')}` : '') +
          `; start workers with \`shardflow worker --web-index --cluster ${o.cluster} --cluster-name ${o.clusterName} --broker ${o.broker} --data-dir DIR\``,
      );
    }
    if (Date.now() - said > 10_000) {
      o.say?.(
        `waiting for the workers of cluster ${o.clusterName} to run every partition (${stage ? `${units.filter((p) => p.state === 'running').length}/${stage.partitions} running` : `no worker yet: is ${o.clusterName} the --cluster-name the workers were started with?`})` +
          (refused.length > 0 ? `; refused by their workers: ${refused.slice(0, 3).join('; ')}${refused.length > 3 ? `; and ${refused.length - 3} more` : ''}` : ''),
      );
      said = Date.now();
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** How often a client job says which partitions do not run while it waits on them: 30 s, in ms (as the README promises of a job without progress). */
export const PARTITION_WATCH_MS = 30_000;

/**
 * While a client job runs, reads the cluster's status every `everyMs` and says which web-index
 * partitions do not run (silent owner, unowned, opening, refused, with the reason and the live
 * workers), so that a job whose asks wait for a dead or stopped worker is not silent (found by
 * a new user: with its only worker killed, `rank --cluster` printed nothing for minutes).
 * Says nothing while every partition runs; a failed status read is said too.
 * @returns `stop()`, to call when the job ends
 */
export function watchPartitions(client: Pick<ClusterClient, 'status'>, say: (line: string) => void, clusterName: string, everyMs = PARTITION_WATCH_MS): { stop(): void } {
  const timer = setInterval(() => {
    void client.status().then(
      (status) => {
        const units = status.partitions.filter((p) => p.stage === WEB_INDEX_STAGE);
        const notRunning = units.filter((p) => p.state !== 'running');
        if (notRunning.length === 0) return;
        const shown = notRunning.slice(0, 3).map((p) => `${p.unit} ${p.state}${p.reason ? ` (${p.reason})` : ''}`);
        say(
          `waiting on cluster ${clusterName}: ${units.length - notRunning.length} of ${units.length} partitions run, ${status.workers.length} workers live; ` +
            `${shown.join('; ')}${notRunning.length > 3 ? `; and ${notRunning.length - 3} more` : ''}`,
        );
      },
      (err: unknown) => say(`waiting on cluster ${clusterName}: its status cannot be read: ${(err as Error).message}`),
    );
  }, everyMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}

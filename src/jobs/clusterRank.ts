import { createHash } from 'node:crypto';
import { convergeFields, type MetricJobOptions } from './metricJobOptions.js';
import { topic, topicName, type Broker } from '../runtime/brokers/index.js';
import { Namespaces } from '../actors/namespaces.js';
import { DataDirError, FlowCounters, partitionId, systemClock, type Clock, type ClusterClient, type SentStream, type StreamFlowReport } from '../index.js';
import type { ConvergeResult } from '../actors/metrics/coordinator.js';
import { hostPartitioner } from '../actors/partition/hostPartitioner.js';
import { convergeOnCluster } from './clusterConverge.js';
import { webIndexStreamReceiver } from '../topology/clusterProtocol.js';
import type { WebGraph } from '../replay/graphFile.js';
import { graphPages, loaderMessageCounts, publishFetches } from './graphLoader.js';
import { appliedMark, collectFlow, waitClusterQuiet, type PartitionAsker } from './clusterQuiet.js';
import { aborted, raceStops } from './watchdog.js';

/** Options of {@link rankOnCluster}. */
export interface ClusterRankOptions extends MetricJobOptions {
  /** Asks the web-index partitions wherever they run, and claims the cluster's graph (a `ClusterClient`). */
  readonly client: PartitionAsker & Pick<ClusterClient, 'claim'>;
  /** The cluster's broker scope (`clusterBrokerIdentity`): the load is published through it. */
  readonly broker: Broker;
  /** Partitions of the cluster's web index (its recorded stage). */
  readonly partitions: number;
  /** The graph, or a function that returns it (dropped once loaded, as in `rankGraph`). */
  readonly graph: WebGraph | (() => WebGraph | Promise<WebGraph>);
  /**
   * The job's name: the loader publishes as producer `loader/<job>`, so a client started
   * again with the same job resends the same messages and the indexers skip what they
   * applied. Default: `graphJobId(graph)`, a digest of the graph, so the same command
   * resumes the same job.
   */
  readonly job?: string;
  /** Damping factor d (default 0.85). */
  readonly damping?: number;
  readonly clock?: Clock;
  /** Called when the load is applied everywhere, with the seconds it took. */
  readonly onLoaded?: (seconds: number) => void;
  /** Aborting it stops the job (the workers keep their state: a new client resumes). */
  readonly signal?: AbortSignal;
}

/** What {@link rankOnCluster} computed. */
export interface ClusterRankResult {
  readonly job: string;
  readonly scores: Array<[string, number]>;
  readonly converge: ConvergeResult;
  readonly loadSeconds: number;
  readonly convergeSeconds: number;
  readonly pages: number;
  readonly outlinks: number;
  readonly backlinks: number;
  /** True when the load was found applied already (a resumed job) and not sent again. */
  readonly loadSkipped: boolean;
}

/** The `ClusterClient.claim` under which a web-index cluster records the digest of the graph it ranks (`graphJobId`). */
export const GRAPH_CLAIM = 'web-index/graph';

/**
 * A digest of a graph (its pages in order and each page's targets): the default job name,
 * so that the same graph resumes the same job. 16 hex digits of SHA-256.
 */
export function graphJobId(graph: WebGraph): string {
  const h = createHash('sha256');
  for (const url of graph.pages) {
    h.update(url);
    h.update('\n');
    for (const t of graph.links.get(url) ?? []) {
      h.update(t);
      h.update('\t');
    }
  }
  return h.digest('hex').slice(0, 16);
}

/**
 * The loaders (`loader/<job>` producers) other than `producer` whose pages an indexer of the
 * cluster applied: another graph's load. A cluster has no `--update` (a graph change goes
 * through `rank --update` on a data dir), so a second graph would be merged into the first.
 */
function otherLoads(reports: readonly StreamFlowReport[], producer: string): string[] {
  const found = new Set<string>();
  for (let p = 0; p < reports.length; p++) {
    const receiver = webIndexStreamReceiver(topicName(topic(Namespaces.fetches, partitionId(p))));
    const applied = reports[p]!.consumers.find((c) => c.consumer === receiver?.consumer)?.applied ?? {};
    for (const name of Object.keys(applied)) if (name.startsWith('loader/') && name !== producer) found.add(name);
  }
  return [...found].sort();
}

/**
 * Ranks a graph on a cluster of web-index workers, as a client: the workers own the
 * partitions (`webIndexApplication`); this process only publishes, asks and waits.
 *
 * 1. Load: publishes the graph's pages to `fetches/<p>` as producer `loader/<job>` with
 *    sequences from 0 per topic (`publishFetches`), unless every partition's indexer already
 *    applied all of them (a resumed job), then waits until the cluster is quiet
 *    (`waitClusterQuiet`: every stream committed by any partition or the loader is applied
 *    by its receiver, in two identical collections).
 * 2. Metric rounds, host index, counts and scores, once quiet again (`convergeOnCluster`:
 *    rounds numbered on from the last one stored, so a client that died mid-round resumes
 *    with that round's barrier).
 *
 * Every request is idempotent, so worker failures (a request runs again on the next owner)
 * and a client started again (the job resumes) leave the result exact.
 * @throws DataDirError when the cluster ranks another graph (its `GRAPH_CLAIM`, recorded by
 *   the first client, is another graph's digest), or its indexers applied another job's load (another
 *   graph: see `otherLoads`), before anything is sent (found by a new user: it exited 2, as bad
 *   input, where a data dir holding another graph exits 1); the client's errors (a remote failure, a timeout); the abort reason when `signal` aborts
 */
export async function rankOnCluster(options: ClusterRankOptions): Promise<ClusterRankResult> {
  const clock = options.clock ?? systemClock;
  const damping = options.damping ?? 0.85;
  const stop = aborted(options.signal);
  const quiet = { clock, ...(options.signal ? { signal: options.signal } : {}) };
  const run = async (): Promise<ClusterRankResult> => {
    let graph: WebGraph | undefined = typeof options.graph === 'function' ? await options.graph() : options.graph;
    const digest = graphJobId(graph);
    const job = options.job ?? digest;
    const producer = `loader/${job}`;
    // One graph per cluster, agreed on atomically before anything is read or sent: the check
    // of the indexers' loads below alone was a check-then-act race (found by a new user: two
    // clients with different graphs started together both exited 0 with the merged graph),
    // and it missed a --job reused with another graph (exit 0 with the old graph's scores).
    const ranked = await options.client.claim(GRAPH_CLAIM, digest);
    if (ranked !== digest) {
      throw new DataDirError(
        `the cluster's web index ranks another graph (digest ${ranked}; this graph's is ${digest}${options.job !== undefined ? `, given as job ${job}` : ''}): loading this one would merge the two graphs and rank both together. ` +
          'Rank another graph on a new cluster (another --cluster-name, with its own workers and data dirs), or run the same graph again (the same files, lines in the same order) to resume it',
      );
    }
    const t0 = performance.now();
    const partitioner = hostPartitioner(options.partitions);
    // What a load of this graph sends: its messages per partition, sequences from 0.
    const perPartition = loaderMessageCounts(partitioner, graphPages(graph), options.broker.maxPayloadBytes);
    const loader: SentStream[] = perPartition.flatMap((n, p) => (n > 0 ? [{ producer, topic: topicName(topic(Namespaces.fetches, partitionId(p))), next: n }] : []));
    const found = await collectFlow(options.client, options.partitions);
    const others = otherLoads(found, producer);
    if (others.length > 0) {
      throw new DataDirError(
        `the cluster's web index holds a load under another job name (${others.slice(0, 3).join(', ')}${others.length > 3 ? ', ...' : ''}; this run is job ${job}). ` +
          `If it is this graph (the cluster records this graph's digest${others.includes(`loader/${digest}`) ? ', and it was loaded under that digest' : ''}), run it as that job (--job ${others[0]!.slice('loader/'.length)}; without --job the digest names it) to resume it; ` +
          'loaded again under another name it would be sent twice. If it is another graph (a cluster loaded before graphs were recorded), loading this one would merge the two: rank it on a new cluster (another --cluster-name, with its own workers and data dirs)',
      );
    }
    const loadSkipped = loader.every((s) => appliedMark(found, s) >= s.next - 1);
    if (loadSkipped) {
      options.log.info({ job }, 'the load of this job is applied already: resuming at the metric rounds');
    } else {
      options.log.info({ job, producer }, 'loading the graph');
      await publishFetches(options.broker, partitioner, new FlowCounters(), graphPages(graph), producer);
    }
    graph = undefined;
    await waitClusterQuiet(options.client, options.partitions, loader, quiet);
    const loadSeconds = (performance.now() - t0) / 1000;
    options.onLoaded?.(loadSeconds);
    const metric = await convergeOnCluster({
      client: options.client,
      partitions: options.partitions,
      damping,
      clock,
      log: options.log,
      quiet: () => waitClusterQuiet(options.client, options.partitions, loader, quiet),
      ...convergeFields(options),
    });
    return { job, scores: metric.scores, converge: metric.converge, loadSeconds, convergeSeconds: metric.convergeSeconds, loadSkipped, pages: metric.pages, outlinks: metric.outlinks, backlinks: metric.backlinks };
  };
  return raceStops(run(), stop);
}

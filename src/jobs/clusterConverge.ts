import type { Logger } from 'pino';
import { systemClock, type Clock } from '../index.js';
import { sumCounts, type MetricMessage, type PartitionCounts } from '../actors/metrics/metricActor.js';
import { collectScores, converge, type ConvergeResult, type MetricEndpoint, type RoundSummary } from '../actors/metrics/coordinator.js';
import { WEB_INDEX_STAGE, type PartitionAsker, type WebIndexRequest } from '../topology/clusterProtocol.js';

/** Options of {@link convergeOnCluster}. */
export interface ClusterConvergeOptions {
  /** Asks the web-index partitions wherever they run (a `ClusterClient`). */
  readonly client: PartitionAsker;
  /** Partitions of the cluster's web index. */
  readonly partitions: number;
  /** Damping factor d (default 0.85). */
  readonly damping?: number;
  readonly tolerance?: number;
  /** The coordinator's adaptive threshold factor (0: plain rounds, as `crawl` runs them). */
  readonly thresholdFactor?: number;
  /**
   * Waits until the cluster is quiet (the job's own detection: a load's streams, or a
   * crawl's), before the scores are read.
   */
  readonly quiet: () => Promise<unknown>;
  readonly log: Logger;
  readonly clock?: Clock;
  readonly onRound?: (r: RoundSummary) => void;
}

/** What {@link convergeOnCluster} computed. */
export interface ClusterConvergeResult {
  readonly scores: Array<[string, number]>;
  readonly converge: ConvergeResult;
  readonly convergeSeconds: number;
  readonly pages: number;
  readonly outlinks: number;
  readonly backlinks: number;
}

/** Asks `request` of every partition, in partition order. @throws the client's errors */
export function askAllPartitions(client: PartitionAsker, partitions: number, request: WebIndexRequest): Promise<unknown[]> {
  return Promise.all(Array.from({ length: partitions }, (_, p) => client.ask(WEB_INDEX_STAGE, p, request)));
}

/**
 * The metric part of a job on a cluster of web-index workers, once its graph is in (loaded
 * by `rankOnCluster`, crawled by `crawlOnCluster`): the coordinator's `converge` over
 * endpoints that ask each partition's metric actor through the client (`{ kind: 'metrics' }`),
 * numbered on from the last round any partition stored, so a client that died mid-round
 * resumes with that round's barrier; then, once converged, the host index; then `quiet`, the
 * scores (normalised, highest first) and the counts.
 *
 * Every request is idempotent (a push asked again returns its stored report; barriers,
 * counts and scores only read), so a request that runs twice changes nothing.
 * @throws the client's errors (a remote failure, a timeout); what `quiet` throws
 */
export async function convergeOnCluster(options: ClusterConvergeOptions): Promise<ClusterConvergeResult> {
  const clock = options.clock ?? systemClock;
  const all = (request: WebIndexRequest) => askAllPartitions(options.client, options.partitions, request);
  const metrics: MetricEndpoint[] = Array.from({ length: options.partitions }, (_, p) => (message: MetricMessage) => options.client.ask(WEB_INDEX_STAGE, p, { kind: 'metrics', message } satisfies WebIndexRequest));
  const counts = async () => sumCounts((await all({ kind: 'metrics', message: { type: 'counts' } })) as PartitionCounts[]);
  const t0 = performance.now();
  const last = (await all({ kind: 'metrics', message: { type: 'last-round' } })) as number[];
  const result = await converge(metrics, {
    damping: options.damping ?? 0.85,
    clock,
    pages: (await counts()).pages,
    countPages: async () => (await counts()).pages,
    firstRound: Math.max(0, ...last) + 1,
    ...(options.tolerance !== undefined ? { tolerance: options.tolerance } : {}),
    ...(options.thresholdFactor !== undefined ? { thresholdFactor: options.thresholdFactor } : {}),
    onRound: (r) => {
      options.log.info({ round: r.round, pushed: r.pushed, messages: r.messages, bound: r.bound }, 'metric round');
      options.onRound?.(r);
    },
  });
  const convergeSeconds = (performance.now() - t0) / 1000;
  if (result.converged) await all({ kind: 'metrics', message: { type: 'index-hosts', now: Date.now() } });
  await options.quiet();
  const scores = await collectScores(metrics);
  return { scores, converge: result, convergeSeconds, ...(await counts()) };
}

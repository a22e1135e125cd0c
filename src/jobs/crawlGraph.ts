import { sumCounts } from '../actors/metrics/metricActor.js';
import type { Logger } from 'pino';
import type { Broker } from '../runtime/brokers/index.js';
import type { ChaosPolicy } from '../index.js';
import type { WeightFunction } from '../actors/metrics/weights.js';
import type { ConvergeResult, RoundSummary } from '../actors/metrics/coordinator.js';
import type { PartitionCounts } from '../actors/metrics/metricActor.js';
import { canonicalUrl } from '../actors/crawler/canonicalUrl.js';
import { startWebIndex, type WebIndex } from '../topology/webIndex.js';
import { aborted, JobWatchdog, raceStops, startOptions, type JobLifecycleOptions } from './watchdog.js';
import { ReplayServer, type ReplayOverride } from '../replay/replayServer.js';
import type { WebGraph } from '../replay/graphFile.js';
import { crawlGapsOf } from './crawlGaps.js';
import type { CrawlGap } from '../query/partitionView.js';

/** Options of `crawlGraph`. */
export interface CrawlGraphOptions extends JobLifecycleOptions {
  readonly graph: WebGraph;
  readonly partitions: number;
  readonly dataDir: string;
  readonly broker: Broker;
  readonly weigh: WeightFunction;
  readonly crawlers?: number;
  readonly tolerance?: number;
  readonly log: Logger;
  /** Pages the replay server answers differently (404, 500, malformed, oversized). */
  readonly overrides?: ReadonlyMap<string, ReplayOverride>;
  /** Extra seeds beyond the graph's pages (e.g. an invalid URL). */
  readonly extraSeeds?: readonly string[];
  readonly maxBodyBytes?: number;
  /** Fault injection before each `receive()` (`--chaos`). */
  readonly chaos?: ChaosPolicy;
  /** Called once the index runs (for progress displays and fault injection). */
  readonly onStarted?: (index: WebIndex) => void;
  readonly onRound?: (r: RoundSummary) => void;
}

/** What `crawlGraph` found. */
export interface CrawlGraphResult {
  readonly scores: Array<[string, number]>;
  readonly converge: ConvergeResult;
  readonly counts: PartitionCounts[];
  readonly pages: number;
  readonly outlinks: number;
  readonly backlinks: number;
  readonly crawlSeconds: number;
  readonly convergeSeconds: number;
  /** Seeds that were refused, with why. */
  readonly rejectedSeeds: Array<{ url: string; reason: string }>;
  /** Supervision tree at the end, as text. */
  readonly tree: string;
  readonly served: ReadonlyMap<number, number>;
  /**
   * Frontier URLs the crawl ended without fetching with an answer, by state and reason
   * (`PartitionView.crawlGaps`): e.g. `blocked` by a robots.txt that did not answer in time,
   * or `fetched` with a failed last fetch (the page is stored with the error, without
   * links). Empty when every page of the graph was fetched with an answer; the crawl is
   * quiet with such URLs because their retry is scheduled later, not awaited.
   */
  readonly gaps: CrawlGap[];
}

/**
 * The main job: serves `graph` as HTML from a replay server in this process, crawls it
 * through the partition actors (every page of the graph is a seed, so isolated pages are
 * fetched too), and runs the metric in continuous mode: rounds go on while pages arrive,
 * and the job ends when the crawl is quiet and the metric has converged on the final graph.
 * Crawled URLs are canonical (`canonicalUrl`): compare scores with a reference after
 * canonicalising its URLs the same way.
 */
export async function crawlGraph(options: CrawlGraphOptions): Promise<CrawlGraphResult> {
  const server = new ReplayServer(options.graph);
  for (const [url, o] of options.overrides ?? []) server.overrides.set(canonicalUrl(url), o);
  const port = await server.listen();
  const stop = aborted(options.signal);
  let index: WebIndex;
  try {
    index = await startWebIndex({
      partitions: options.partitions,
      dataDir: options.dataDir,
      broker: options.broker,
      weigh: options.weigh,
      log: options.log,
      crawlers: options.crawlers ?? 4,
      fetcher: { hostMap: server.hostMap(port), ...(options.maxBodyBytes ? { maxBodyBytes: options.maxBodyBytes } : {}) },
      ...(options.chaos ? { chaos: options.chaos } : {}),
      ...startOptions(options),
    });
  } catch (err) {
    await server.close();
    throw err;
  }
  let phase = 'crawling';
  const watchdog = new JobWatchdog(index, { log: options.log, phase: () => phase, ...options.stall }).start();
  try {
    options.onStarted?.(index);
    const run = async () => {
      const t0 = performance.now();
      const seeds: string[] = [];
      const rejectedSeeds: Array<{ url: string; reason: string }> = [];
      for (const url of [...options.graph.pages, ...(options.extraSeeds ?? [])]) {
        try {
          seeds.push(canonicalUrl(url));
        } catch (err) {
          rejectedSeeds.push({ url, reason: (err as Error).message });
          options.log.warn({ url, reason: (err as Error).message }, 'seed refused');
        }
      }
      await index.seed(seeds);
      // Continuous mode: metric rounds run while the crawl goes on, and end once the crawl is
      // quiet and the metric has converged on the final graph.
      let crawled = false;
      const metric = index.converge({
        quiet: () => crawled && index.counters.balanced(),
        ...(options.tolerance !== undefined ? { tolerance: options.tolerance } : {}),
        onRound: (r) => {
          phase = `${crawled ? 'metric' : 'crawling, metric'} round ${r.round}`;
          options.log.info({ round: r.round, pushed: r.pushed, messages: r.messages, bound: r.bound }, 'metric round');
          options.onRound?.(r);
        },
      });
      // The metric cannot end before the crawl is quiet; it can only fail.
      await Promise.race([index.quiescence(), metric.then(() => undefined)]);
      crawled = true;
      const crawlSeconds = (performance.now() - t0) / 1000;
      const t1 = performance.now();
      const result = await metric;
      const convergeSeconds = (performance.now() - t1) / 1000;
      const scores = await index.scores();
      const counts = await index.counts();
      const gaps = await crawlGapsOf(index);
      if (gaps.length > 0) options.log.warn({ gaps }, 'the crawl ended with URLs not fetched: their retry is scheduled later');
      return { scores, counts, result, crawlSeconds, convergeSeconds, rejectedSeeds, gaps };
    };
    const { scores, counts, result, crawlSeconds, convergeSeconds, rejectedSeeds, gaps } = await raceStops(run(), watchdog.failed, stop);
    return {
      scores,
      converge: result,
      counts,
      ...sumCounts(counts),
      crawlSeconds,
      convergeSeconds,
      rejectedSeeds,
      tree: index.system.renderTree(),
      served: server.served,
      gaps,
    };
  } finally {
    watchdog.stop();
    // Not `onStopped?.(await index.stop())`: an optional call skips its arguments too.
    const stopped = await index.stop();
    options.onStopped?.({ ...stopped, brokerDataLost: watchdog.brokerDataLost });
    await server.close();
  }
}

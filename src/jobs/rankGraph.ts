import { sumCounts } from '../actors/metrics/metricActor.js';
import { convergeFields, type MetricJobOptions } from './metricJobOptions.js';
import type { Broker } from '../runtime/brokers/index.js';
import type { ChaosPolicy } from '../index.js';
import type { WeightFunction } from '../actors/metrics/weights.js';
import type { ConvergeResult } from '../actors/metrics/coordinator.js';
import { startWebIndex, type WebIndex } from '../topology/webIndex.js';
import { aborted, JobWatchdog, raceStops, startOptions, type JobLifecycleOptions } from './watchdog.js';
import { graphPages, publishFetches } from './graphLoader.js';
import type { WebGraph } from '../replay/graphFile.js';

/** Options of `rankGraph`. */
export interface RankGraphOptions extends JobLifecycleOptions, MetricJobOptions {
  /**
   * The graph, or a function that returns it: that form is called once, inside the job, and
   * the graph it returns is dropped as soon as it is loaded, so that its memory (about 850
   * MB of JS heap for cnr-2000's 3.2 M links) is free, and not marked by every major GC,
   * while the metric converges.
   */
  readonly graph: WebGraph | (() => WebGraph | Promise<WebGraph>);
  readonly partitions: number;
  readonly dataDir: string;
  readonly broker: Broker;
  readonly weigh: WeightFunction;
  /** Fault injection before each `receive()` (`--chaos`). */
  readonly chaos?: ChaosPolicy;
  /** Called once the index runs, before the graph is loaded (progress displays, tests). */
  readonly onStarted?: (index: WebIndex) => void;
  /** Called once the graph is loaded, with the web index. */
  readonly onLoaded?: (index: WebIndex, seconds: number) => void;
}

/** What `rankGraph` measured and computed. */
export interface RankGraphResult {
  readonly scores: Array<[string, number]>;
  readonly converge: ConvergeResult;
  readonly loadSeconds: number;
  readonly convergeSeconds: number;
  /**
   * CPU seconds of the whole process (user + system, every thread: main, libuv pool, V8's
   * and RocksDB's; `process.cpuUsage`) over the same spans as `loadSeconds` and
   * `convergeSeconds`: what compares runs on a machine other jobs share, where wall seconds do not.
   */
  readonly loadCpuSeconds: number;
  readonly convergeCpuSeconds: number;
  readonly pages: number;
  readonly outlinks: number;
  readonly backlinks: number;
}

/**
 * Ranks a graph file through the same pipeline as a crawl, with no side channel: each page
 * becomes a `fetches/<p>` message carrying its outlinks (there is no HTML), the indexers
 * store pages and outlinks and send link operations to the backlinks actors, and the metric
 * actors converge by exchanging contribution messages. URLs are kept exactly as written in
 * the graph (no canonicalisation), so a graph whose URLs differ only in case or default port
 * keeps them apart, as the reference rankings do.
 */
export async function rankGraph(options: RankGraphOptions): Promise<RankGraphResult> {
  const stop = aborted(options.signal);
  const index = await startWebIndex({
    partitions: options.partitions,
    dataDir: options.dataDir,
    broker: options.broker,
    weigh: options.weigh,
    log: options.log,
    crawlers: 0,
    // A graph file is the graph to rank, whole: the outlink cap bounds crawled pages only.
    maxOutlinksPerPage: Infinity,
    ...(options.chaos ? { chaos: options.chaos } : {}),
    ...startOptions(options),
  });
  let phase = 'loading the graph';
  const watchdog = new JobWatchdog(index, { log: options.log, phase: () => phase, ...options.stall }).start();
  try {
    options.onStarted?.(index);
    const run = async () => {
      let graph: WebGraph | undefined = typeof options.graph === 'function' ? await options.graph() : options.graph;
      const t0 = performance.now();
      const c0 = cpuSeconds();
      options.log.info('loading the graph');
      await publishFetches(index.broker, index.partitioner, index.counters, graphPages(graph));
      graph = undefined;
      await index.quiescence({ pollMs: 10 });
      const loadSeconds = (performance.now() - t0) / 1000;
      const c1 = cpuSeconds();
      options.log.info({ loadSeconds }, 'graph loaded');
      options.onLoaded?.(index, loadSeconds);
      const t1 = performance.now();
      phase = 'metric rounds';
      const converged = await index.converge({
        ...convergeFields({ ...options, onRound: undefined }),
        onRound: (r) => {
          phase = `metric round ${r.round}`;
          options.log.info({ round: r.round, pushed: r.pushed, messages: r.messages, bound: r.bound }, 'metric round');
          options.onRound?.(r);
        },
      });
      const convergeSeconds = (performance.now() - t1) / 1000;
      const loadCpuSeconds = c1 - c0;
      const convergeCpuSeconds = cpuSeconds() - c1;
      phase = 'reading scores';
      return { converged, loadSeconds, convergeSeconds, loadCpuSeconds, convergeCpuSeconds, scores: await index.scores(), counts: await index.counts() };
    };
    const { converged: result, loadSeconds, convergeSeconds, loadCpuSeconds, convergeCpuSeconds, scores, counts } = await raceStops(run(), watchdog.failed, stop);
    return {
      scores,
      converge: result,
      loadSeconds,
      convergeSeconds,
      loadCpuSeconds,
      convergeCpuSeconds,
      ...sumCounts(counts),
    };
  } finally {
    watchdog.stop();
    // Not `onStopped?.(await index.stop())`: an optional call skips its arguments too.
    const stopped = await index.stop();
    options.onStopped?.({ ...stopped, brokerDataLost: watchdog.brokerDataLost });
  }
}

/** CPU seconds (user + system) this process has used so far, every thread. */
function cpuSeconds(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1e6;
}

/** L1 distance between two score maps over the union of their keys. */
export function l1Distance(a: ReadonlyMap<string, number>, b: ReadonlyMap<string, number>): number {
  let sum = 0;
  for (const [k, v] of a) sum += Math.abs(v - (b.get(k) ?? 0));
  for (const [k, v] of b) if (!a.has(k)) sum += Math.abs(v);
  return sum;
}

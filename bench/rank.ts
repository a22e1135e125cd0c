import { existsSync } from 'node:fs';
import { pino } from 'pino';
import { MemoryBroker } from '../src/runtime/brokers/memory.js';
import { rankGraph, l1Distance } from '../src/jobs/rankGraph.js';
import { readGraph, readScores } from '../src/replay/graphFile.js';
import { uniformWeights } from '../src/actors/metrics/weights.js';
import { tempDir } from '../test/kit/datasets.js';
import { rankBenchOptions } from './lib/rankOptions.js';
import { ownCpuSeconds } from './lib/processCost.js';
import { DirectedGraph } from 'graphology';
import pagerank from 'graphology-metrics/centrality/pagerank.js';


/** Top-level fields of the result line besides bench/run.mjs's (checked by test/bench.smoke.test.ts). */
export const resultFields = ['smoke', 'graph', 'partitions', 'tolerance', 'pages', 'links', 'loadSeconds', 'loadCpuSeconds', 'convergeSeconds', 'seconds', 'rounds', 'converged', 'l1', 'peakRssMiB', 'graphology', 'ratio'] as const;

/**
 * Ranks a graph (default cnr-2000 from bench/data (copied from the LAW dataset, see its README), 325,557 pages and 3,216,152
 * links) through the full pipeline with uniform weights and reports pages, links, load
 * and converge seconds, the load's CPU seconds (`loadCpuSeconds`: `process.cpuUsage`, user +
 * system, every thread of the process: the JS thread, RocksDB's and V8's; steadier than the
 * wall seconds on a shared machine), rounds, pushes, messages, peak RSS and the L1 distance to the
 * reference; then, in the same run, graphology-metrics' in-memory PageRank of the same
 * graph (build and PageRank seconds) and the ratio of the two times (target: <= 3).
 * Args: `--graph DIR` (pages.txt[.xz], links.tsv[.xz], pagerank.tsv[.xz]),
 * `--partitions N` (default 16), `--tolerance T` (default 1e-6: the stopping bound then
 * guarantees L1 <= 1e-6 to the exact scores, 10x inside the 1e-5 target of issue 6), `--threshold-factor F`
 * (the coordinator's, default its own). `--smoke` (bench/lib/options.ts): polblogs
 * (examples/data/polblogs, 1,489 pages, 19,090 link lines, with its reference) on 4 partitions.
 * Logs (warnings) go to stderr: stdout holds the result line only.
 */
export async function run(args: string[]): Promise<Record<string, unknown>> {
  const { options: o, partitions, tolerance, thresholdFactor, file, fields } = rankBenchOptions(args);
  let peakRss = process.memoryUsage.rss();
  const sampler = setInterval(() => (peakRss = Math.max(peakRss, process.memoryUsage.rss())), 100);
  let readSeconds = 0;
  let loadCpu0 = 0;
  let loadCpuSeconds = 0;
  // Read inside the job, which drops the graph once loaded (as `shardflow rank` does); read
  // again below for graphology, so that neither run has the other's data in its heap.
  const read = async () => {
    const t0 = performance.now();
    const g = await readGraph(file('pages.txt'), file('links.tsv'));
    readSeconds = (performance.now() - t0) / 1000;
    loadCpu0 = ownCpuSeconds(); // the load starts when the graph is returned
    return g;
  };
  const { dir: data, cleanup } = tempDir('shardflow-bench-');
  const broker = new MemoryBroker();
  try {
    const { scores, ...result } = await rankGraph({ graph: read, partitions, dataDir: data, broker, weigh: uniformWeights, tolerance, ...(thresholdFactor !== undefined ? { thresholdFactor } : {}), log: pino({ level: 'warn' }, pino.destination(2)), onLoaded: () => (loadCpuSeconds = ownCpuSeconds() - loadCpu0) });
    clearInterval(sampler);
    peakRss = Math.max(peakRss, process.memoryUsage.rss());
    const reference = existsSync(file('pagerank.tsv')) ? await readScores(file('pagerank.tsv')) : undefined;
    const shardflowRss = peakRss;
    const l1 = reference ? l1Distance(new Map(scores), reference) : null;
    scores.length = 0; // out of graphology's heap
    // graphology-metrics on the same graph in the same run: build the in-memory graph, then
    // PageRank (alpha 0.85), both timed. Same guarantee as ours: graphology stops when the
    // L1 change of an iteration is below N x tolerance (centrality/pagerank.js), which bounds
    // the L1 error by N x tolerance x d / (1 - d); so it gets tolerance (1 - d) T / (d N)
    // for our T. (With a fixed 1e-10 it stopped at L1 6e-5 on cnr-2000, looser than ours.)
    const graph = await readGraph(file('pages.txt'), file('links.tsv'));
    const d = 0.85;
    const graphologyTolerance = ((1 - d) * tolerance) / (d * graph.pages.length);
    const g0 = performance.now();
    const g = new DirectedGraph({ allowSelfLoops: true });
    for (const p of graph.pages) g.addNode(p);
    for (const [s, ts] of graph.links) for (const t of ts) g.mergeEdge(s, t);
    const g1 = performance.now();
    const pr = (pagerank as unknown as (g: DirectedGraph, o: object) => Record<string, number>)(g, { alpha: d, tolerance: graphologyTolerance, maxIterations: 10_000, getEdgeWeight: null });
    const g2 = performance.now();
    const graphologySeconds = (g2 - g0) / 1000;
    const shardflowSeconds = result.loadSeconds + result.convergeSeconds;
    return {
      ...fields,
      pages: result.pages,
      links: result.outlinks,
      readSeconds: round(readSeconds),
      loadSeconds: round(result.loadSeconds),
      loadCpuSeconds: round(loadCpuSeconds),
      convergeSeconds: round(result.convergeSeconds),
      seconds: round(result.loadSeconds + result.convergeSeconds),
      rounds: result.converge.rounds,
      pushes: result.converge.pushes,
      messages: result.converge.messages,
      converged: result.converge.converged,
      l1,
      peakRssMiB: Math.round(shardflowRss / 2 ** 20),
      graphology: {
        tolerance: graphologyTolerance,
        buildSeconds: round((g1 - g0) / 1000),
        pagerankSeconds: round((g2 - g1) / 1000),
        seconds: round(graphologySeconds),
        l1: reference ? l1Distance(new Map(Object.entries(pr)), reference) : null,
      },
      ratio: round(shardflowSeconds / graphologySeconds),
    };
  } finally {
    clearInterval(sampler);
    await broker.close();
    cleanup();
  }
}

function round(x: number): number {
  return Math.round(x * 1000) / 1000;
}

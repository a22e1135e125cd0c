// The graph of the update benchmarks (bench/incremental.ts, bench/continuous.ts): a graph file
// held by page index so that changes can be drawn and applied to it, the exact PageRank of its
// current state, the L1 distance of a web index's scores to it, and a web index that ranked it.
import { pino } from 'pino';
import { readGraph } from '../../src/replay/graphFile.js';
import { startWebIndex, type WebIndex } from '../../src/topology/webIndex.js';
import { hostOf } from '../../src/index.js';
import { MemoryBroker } from '../../src/runtime/brokers/memory.js';
import { graphPage, publishFetches } from '../../src/jobs/graphLoader.js';
import { uniformWeights } from '../../src/actors/metrics/weights.js';
import type { ConvergeOptions, ConvergeResult } from '../../src/actors/metrics/coordinator.js';
import { tempDir } from '../../test/kit/datasets.js';

const DAMPING = 0.85;

/** A graph by page index: `out[p]` the distinct targets of page p; `alive[p]` 0 once deleted. */
export interface Graph {
  readonly pages: string[];
  readonly out: number[][];
  readonly alive: Uint8Array;
  /** Page indexes per host, in page order. */
  readonly hosts: Map<string, number[]>;
}

/** Reads a graph file (pages.txt and links.tsv, plain or .xz) by page index, duplicate links dropped. */
export async function loadGraph(pagesFile: string, linksFile: string): Promise<Graph> {
  const raw = await readGraph(pagesFile, linksFile);
  const id = new Map<string, number>();
  raw.pages.forEach((p, i) => id.set(p, i));
  const out = raw.pages.map((p) => [...new Set((raw.links.get(p) ?? []).map((t) => id.get(t)!))]);
  const hosts = new Map<string, number[]>();
  raw.pages.forEach((p, i) => {
    const h = hostOf(p);
    const list = hosts.get(h);
    if (list) list.push(i);
    else hosts.set(h, [i]);
  });
  return { pages: raw.pages, out, alive: new Uint8Array(raw.pages.length).fill(1), hosts };
}

/** Links of the live pages. */
export function linkCount(g: Graph): number {
  let n = 0;
  for (let p = 0; p < g.out.length; p++) if (g.alive[p]) n += g.out[p]!.length;
  return n;
}

/**
 * Replaces `share` of page p's outlinks (at least `min`) by live pages from `pool` that p
 * does not link to yet (drawn uniformly; a pool too small leaves the rest unchanged).
 * @returns links replaced
 */
export function replaceOutlinks(g: Graph, p: number, share: number, min: number, pool: readonly number[], random: () => number): number {
  const out = g.out[p]!;
  const n = Math.min(out.length, Math.max(min, Math.round(out.length * share)));
  let replaced = 0;
  for (let k = 0; k < n; k++) {
    const i = Math.floor(random() * out.length);
    for (let attempt = 0; attempt < 20; attempt++) {
      const t = pool[Math.floor(random() * pool.length)]!;
      if (t === p || !g.alive[t] || out.includes(t)) continue;
      out[i] = t;
      replaced++;
      break;
    }
  }
  return replaced;
}

/** Indexes of the live pages, in page order. */
export function allAlive(g: Graph): number[] {
  const list: number[] = [];
  for (let p = 0; p < g.pages.length; p++) if (g.alive[p]) list.push(p);
  return list;
}

/**
 * The exact PageRank of the live pages (damping 0.85, uniform link weights, dangling mass
 * spread uniformly; normalised to sum 1), by power iteration on y = (1 - d) 1 + d W^T y
 * (dangling rows zero) until an iteration changes y by less than 1e-13 of its L1 norm, then
 * normalised: the same vector (Del Corso, Gullì, Romani, "Fast PageRank computation via a
 * sparse linear system", WAW 2004) with an error ~1e-13 / (1 - d).
 */
export function exactPageRank(g: Graph): Float64Array {
  const n = g.pages.length;
  let y = new Float64Array(n);
  let next = new Float64Array(n);
  for (let p = 0; p < n; p++) y[p] = g.alive[p] ? 1 - DAMPING : 0;
  for (let iteration = 0; iteration < 10_000; iteration++) {
    for (let p = 0; p < n; p++) next[p] = g.alive[p] ? 1 - DAMPING : 0;
    for (let p = 0; p < n; p++) {
      const out = g.out[p]!;
      if (out.length === 0 || y[p] === 0) continue;
      const share = (DAMPING * y[p]!) / out.length;
      for (const t of out) next[t]! += share;
    }
    let change = 0;
    let total = 0;
    for (let p = 0; p < n; p++) {
      change += Math.abs(next[p]! - y[p]!);
      total += next[p]!;
    }
    [y, next] = [next, y];
    if (change < 1e-13 * total) break;
  }
  let total = 0;
  for (let p = 0; p < n; p++) total += y[p]!;
  for (let p = 0; p < n; p++) y[p]! /= total;
  return y;
}

/** L1 distance and largest per-page difference of the index's scores to `exactPageRank` (pages missing on either side count whole). */
export async function errors(index: WebIndex, g: Graph): Promise<{ l1: number; maxError: number }> {
  const exact = exactPageRank(g);
  const id = new Map<string, number>();
  g.pages.forEach((p, i) => id.set(p, i));
  const seen = new Uint8Array(g.pages.length);
  let l1 = 0;
  let maxError = 0;
  for (const [url, score] of await index.scores()) {
    const p = id.get(url);
    const e = p === undefined || !g.alive[p] ? score : Math.abs(score - exact[p]!);
    if (p !== undefined) seen[p] = 1;
    l1 += e;
    maxError = Math.max(maxError, e);
  }
  for (let p = 0; p < g.pages.length; p++) {
    if (seen[p] || !g.alive[p]) continue;
    l1 += exact[p]!;
    maxError = Math.max(maxError, exact[p]!);
  }
  return { l1, maxError };
}

/** Milliseconds as seconds, rounded to the millisecond. */
export function secs(ms: number): number {
  return Math.round(ms) / 1000;
}


/** A web index that ranked a graph (`rankedIndex`). */
export interface RankedIndex {
  readonly index: WebIndex;
  /** The options of its converge calls: the tolerance, and the threshold factor when given. */
  readonly convergeOptions: Omit<ConvergeOptions, 'clock' | 'damping' | 'pages' | 'firstRound'>;
  /** The fresh computation. */
  readonly full: ConvergeResult;
  /** Milliseconds of the load through the pipeline (to quiescence) and of the fresh computation. */
  readonly loadMs: number;
  readonly convergeMs: number;
  /** CPU milliseconds (user and system, every thread of the process) of the fresh computation: on a shared machine, steadier than its wall time. */
  readonly convergeCpuMs: number;
  /** Stops the index, closes its broker and removes its data dir. */
  close(): Promise<void>;
}

/**
 * Starts a web index in a temporary data dir on an in-memory broker (uniform weights, no
 * crawler, no outlink cap), loads `g` through the pipeline (its pages as fetch results on
 * `fetches/<p>`, fetchedAt 0) and converges to `tolerance`: the start of the update benchmarks.
 * @throws what the index throws (it is then stopped and its data dir removed)
 */
export async function rankedIndex(g: Graph, o: { readonly partitions: number; readonly tolerance: number; readonly thresholdFactor: number | undefined }): Promise<RankedIndex> {
  const { dir: data, cleanup } = tempDir('shardflow-bench-');
  const broker = new MemoryBroker();
  const close = async () => {
    try {
      await index?.stop();
      await broker.close();
    } finally {
      cleanup();
    }
  };
  let index: WebIndex | undefined;
  try {
    index = await startWebIndex({ partitions: o.partitions, dataDir: data, broker, weigh: uniformWeights, log: pino({ level: 'warn' }, pino.destination(2)), crawlers: 0, maxOutlinksPerPage: Infinity });
    const convergeOptions = { tolerance: o.tolerance, ...(o.thresholdFactor !== undefined ? { thresholdFactor: o.thresholdFactor } : {}) };
    const t0 = performance.now();
    await publishFetches(index.broker, index.partitioner, index.counters, g.pages.map((u, i) => graphPage(u, g.out[i]!.map((t) => g.pages[t]!), 0)));
    await index.quiescence({ pollMs: 10 });
    const t1 = performance.now();
    const cpu = process.cpuUsage();
    const full = await index.converge(convergeOptions);
    const used = process.cpuUsage(cpu);
    return { index, convergeOptions, full, loadMs: t1 - t0, convergeMs: performance.now() - t1, convergeCpuMs: (used.user + used.system) / 1000, close };
  } catch (err) {
    await close();
    throw err;
  }
}

import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pino } from 'pino';
import { Pool } from 'undici';
import { MemoryBroker } from '../src/runtime/brokers/memory.js';
import type { Broker } from '../src/runtime/brokers/broker.js';
import { uniformWeights } from '../src/actors/metrics/weights.js';
import { readGraph, type WebGraph } from '../src/replay/graphFile.js';
import { startWebIndex } from '../src/topology/webIndex.js';
import { graphPages, publishFetches } from '../src/jobs/graphLoader.js';
import { QueryService } from '../src/query/queryService.js';
import { startQueryServer } from '../src/query/server.js';
import { tempDir } from '../test/kit/datasets.js';
import { benchOptions } from './lib/options.js';

/** Top-level fields of the result line besides bench/run.mjs's (checked by test/bench.smoke.test.ts). */
export const resultFields = ['smoke', 'graph', 'pages', 'links', 'partitions', 'hub', 'backlinks', 'converged', 'loadSeconds', 'uncompactedMedianMs', 'compactSeconds', 'requests', 'medianMs', 'p90Ms', 'p99Ms', 'fanOutMedianMs', 'fanOutP90Ms', 'fanOutP99Ms', 'concurrency', 'qps', 'concurrentMedianMs', 'concurrentP99Ms', 'metric', 'rssMiB'] as const;

/**
 * Latency and throughput of the backlinks query for a page with 1,000+ backlinks.
 *
 * Builds a graph through the pipeline (fetch results with outlinks on `fetches/<p>`, the
 * indexers, `links/<q>`, the backlink stores, then the metric to convergence), starts the
 * query API on 127.0.0.1 and asks `GET /v1/backlinks?url=<hub>&limit=<limit>`: one client,
 * request after request, right after convergence (`uncompacted*`: `ranks` still holds its
 * merge operands) and after a GC sweep compacted it (median, p90, p99); then
 * `--concurrency` clients at once for `--duration-ms` (queries/s, their median and p99).
 * Those are the default path, which sorts by the copies of the sources' metric kept with the
 * backlinks and reads the hub's partition alone; after the sweep the same requests also go,
 * one each in turn, to a second server whose service reads each source's score from its own
 * partition (`backlinkScores: 'sources'`, the fan-out path): `fanOut*`.
 * `metric`: the full computation's rounds, pushes, messages and payload bytes, and what the
 * copies of those cost (`copies`: backlinks sent a copy, `copyMessages`, `copyBytes`, and
 * their shares of the messages and bytes).
 *
 * Graph: synthetic by default, `--pages` pages over `--hosts` hosts, each page with 8
 * outlinks to random pages, and a hub that `--backlinks` pages (on every host, so on every
 * partition) link to; or `--graph DIR` (pages.txt[.xz], links.tsv[.xz], e.g.
 * bench/data/cnr-2000), whose most linked page is the hub.
 * Other args: `--partitions` (16), `--limit` (100), `--requests` (300), `--seed` (1).
 * `--smoke` (bench/lib/options.ts): 600 pages over 20 hosts, a hub with 100 backlinks, 2
 * partitions, 20 requests, 2 clients for 300 ms. Logs (warnings) go to stderr.
 */
export async function run(args: string[]): Promise<Record<string, unknown>> {
  const o = benchOptions(args);
  const partitions = o.number('--partitions', 16, 2);
  const limit = o.number('--limit', 100, 20);
  const requests = o.number('--requests', 300, 20);
  const concurrency = o.number('--concurrency', 16, 2);
  const durationMs = o.number('--duration-ms', 5000, 300);
  const graphDir = o.has('--graph') ? resolve(o.string('--graph', '')) : undefined;
  const t0 = performance.now();
  const { graph, hub } = graphDir
    ? await fileGraph(graphDir)
    : syntheticGraph(o.number('--pages', 20_000, 600), o.number('--hosts', 200, 20), o.number('--backlinks', 2000, 100), o.number('--seed', 1));
  const { dir, cleanup } = tempDir('shardflow-bench-query-');
  const broker = new MemoryBroker();
  const index = await startWebIndex({ partitions, dataDir: dir, broker, weigh: uniformWeights, log: pino({ level: 'warn' }, pino.destination(2)), crawlers: 0 });
  try {
    await load(index, broker, graph);
    await index.quiescence({ pollMs: 10 });
    const metric = await index.converge({});
    const converged = metric.converged;
    const loadSeconds = (performance.now() - t0) / 1000;
    // Right after convergence, `ranks` holds every push and contribution as a merge operand
    // in the memtable; the GC's sweep compacts it (as its hourly timer does). Both states
    // are measured.
    const service = new QueryService({ partitioner: index.partitioner, view: (p) => index.view(p), clock: index.system.clock });
    const server = await startQueryServer({ service, port: 0 });
    const pool = new Pool(server.url, { connections: concurrency, pipelining: 1 });
    const fanOutService = new QueryService({ partitioner: index.partitioner, view: (p) => index.view(p), clock: index.system.clock, backlinkScores: 'sources' });
    const fanOutServer = await startQueryServer({ service: fanOutService, port: 0 });
    const fanOutPool = new Pool(fanOutServer.url, { connections: 1, pipelining: 1 });
    const path = `/v1/backlinks?url=${encodeURIComponent(hub)}&limit=${limit}`;
    const askOn = async (on: Pool): Promise<number> => {
      const s = performance.now();
      const res = await on.request({ path, method: 'GET' });
      const body = (await res.body.json()) as { total: number };
      if (res.statusCode !== 200) throw new Error(`backlinks answered ${res.statusCode}: ${JSON.stringify(body)}`);
      return performance.now() - s;
    };
    const ask = () => askOn(pool);
    try {
      const first = (await (await pool.request({ path, method: 'GET' })).body.json()) as { total: number };
      for (let i = 0; i < 20; i++) await ask(); // warm-up
      const fresh: number[] = [];
      for (let i = 0; i < Math.min(requests, 100); i++) fresh.push(await ask());
      const ts = performance.now();
      await index.gcSweep();
      const compactSeconds = (performance.now() - ts) / 1000;
      for (let i = 0; i < 20; i++) {
        await ask();
        await askOn(fanOutPool);
      }
      // One-partition path and fan-out path in turn, so that both see the same machine.
      const sequential: number[] = [];
      const fanOut: number[] = [];
      for (let i = 0; i < requests; i++) {
        sequential.push(await ask());
        fanOut.push(await askOn(fanOutPool));
      }
      const concurrent: number[] = [];
      const end = performance.now() + durationMs;
      const tc = performance.now();
      await Promise.all(Array.from({ length: concurrency }, async () => {
        while (performance.now() < end) concurrent.push(await ask());
      }));
      const concurrentSeconds = (performance.now() - tc) / 1000;
      return {
        smoke: o.smoke,
        graph: graphDir ? graphDir.split('/').pop() : 'synthetic',
        pages: graph.pages.length,
        links: graph.linkCount,
        partitions,
        hub,
        backlinks: first.total,
        limit,
        converged,
        loadSeconds: round(loadSeconds),
        uncompactedMedianMs: round(quantile(fresh, 0.5)),
        uncompactedP99Ms: round(quantile(fresh, 0.99)),
        compactSeconds: round(compactSeconds),
        requests: sequential.length,
        medianMs: round(quantile(sequential, 0.5)),
        p90Ms: round(quantile(sequential, 0.9)),
        p99Ms: round(quantile(sequential, 0.99)),
        fanOutMedianMs: round(quantile(fanOut, 0.5)),
        fanOutP90Ms: round(quantile(fanOut, 0.9)),
        fanOutP99Ms: round(quantile(fanOut, 0.99)),
        concurrency,
        concurrentRequests: concurrent.length,
        qps: Math.round(concurrent.length / concurrentSeconds),
        concurrentMedianMs: round(quantile(concurrent, 0.5)),
        concurrentP99Ms: round(quantile(concurrent, 0.99)),
        metric: {
          rounds: metric.rounds,
          pushes: metric.pushes,
          messages: metric.messages,
          bytes: metric.bytes,
          copies: metric.copies,
          copiesPerLink: round(metric.copies / graph.linkCount),
          copyMessages: metric.copyMessages,
          copyBytes: metric.copyBytes,
          copyMessageShare: round(metric.copyMessages / Math.max(1, metric.messages)),
          copyByteShare: round(metric.copyBytes / Math.max(1, metric.bytes)),
        },
        rssMiB: Math.round(process.memoryUsage().rss / 2 ** 20),
      };
    } finally {
      await pool.close();
      await server.close();
      await fanOutPool.close();
      await fanOutServer.close();
    }
  } finally {
    await index.stop();
    await broker.close();
    cleanup();
  }
}

/**
 * Publishes every page as a fetch result with its outlinks (no HTML) to `fetches/<p>`, as
 * `shardflow rank` loads a graph (src/jobs/graphLoader.ts): each send is counted in the
 * index's flow counters with its key (producer, topic, sequence), the key its indexer
 * settles, so that quiescence sees the load balance.
 * @throws whatever the broker's `send` throws
 */
export async function load(index: Awaited<ReturnType<typeof startWebIndex>>, broker: Broker, graph: WebGraph): Promise<void> {
  await publishFetches(broker, index.partitioner, index.counters, graphPages(graph, Date.now()));
}

/** A seeded synthetic web: `pages` pages over `hosts` hosts, 8 random outlinks each, and a hub linked by `backlinks` pages. */
export function syntheticGraph(pages: number, hosts: number, backlinks: number, seed: number): { graph: WebGraph; hub: string } {
  let s = seed >>> 0 || 1;
  const rand = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
  const urls = Array.from({ length: pages }, (_, i) => `http://host${i % hosts}.example/page${Math.floor(i / hosts)}.html`);
  const hub = urls[0]!;
  const links = new Map<string, string[]>();
  let linkCount = 0;
  urls.forEach((u, i) => {
    const out = Array.from({ length: 8 }, () => urls[Math.floor(rand() * pages)]!);
    if (i > 0 && i <= backlinks) out.push(hub);
    links.set(u, out);
    linkCount += out.length;
  });
  return { graph: { pages: urls, links, linkCount } as WebGraph, hub };
}

/** A graph file; the hub is its most linked page. */
async function fileGraph(dir: string): Promise<{ graph: WebGraph; hub: string }> {
  const file = (base: string) => (existsSync(join(dir, base)) ? join(dir, base) : join(dir, `${base}.xz`));
  const graph = await readGraph(file('pages.txt'), file('links.tsv'));
  const indegree = new Map<string, number>();
  for (const targets of graph.links.values()) for (const t of new Set(targets)) indegree.set(t, (indegree.get(t) ?? 0) + 1);
  let hub = graph.pages[0]!;
  for (const [u, n] of indegree) if (n > (indegree.get(hub) ?? 0)) hub = u;
  return { graph, hub };
}

function quantile(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? NaN;
}

function round(x: number): number {
  return Math.round(x * 1000) / 1000;
}

// The crawl on a cluster (issue #15, item 4): `shardflow worker --web-index --crawl` processes
// hold the partitions (crawl policies, crawlers reaching a replay server of polblogs in this
// process through a host map file), a client seeds every page and waits for the crawl to be
// done across processes, then converges. The result equals the one-process crawl's
// (crawlGraph): the same page, link and backlink counts and scores within L1 1e-6. Failures: a
// worker SIGKILLed during the crawl; the client (`shardflow crawl --cluster`) SIGKILLed during
// the crawl and the same command run again (it resumes: no page fetched twice).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { crawlGraph } from '../src/jobs/crawlGraph.js';
import { crawlOnCluster, type ClusterCrawlResult } from '../src/jobs/clusterCrawl.js';
import { l1Distance } from '../src/jobs/rankGraph.js';
import { readGraph, readScores, type WebGraph } from '../src/replay/graphFile.js';
import { ReplayServer } from '../src/replay/replayServer.js';
import { canonicalUrl } from '../src/actors/crawler/canonicalUrl.js';
import { uniformWeights } from '../src/actors/metrics/weights.js';
import { MemoryBroker } from '../src/runtime/brokers/memory.js';
import { hostMapLines } from '../src/cli/crawl.js';
import { REDIS_URL, skipWithoutRedis } from './kit/cluster.js';
import { spawnWorkerProcess, until, type WorkerProcess } from './kit/clusterRun.js';
import { graphs, memoryLogger, repoRoot, tempDir } from './kit/datasets.js';
import { withWebIndexCluster, type WebIndexCluster } from './kit/webIndexCluster.js';

const PARTITIONS = 6;
const LEASE_MS = 3000;

interface CrawlCase {
  readonly graph: WebGraph;
  readonly reference: Map<string, number>;
  /** The one-process crawl's scores and counts. */
  readonly scores: Map<string, number>;
  readonly counts: { readonly pages: number; readonly outlinks: number; readonly backlinks: number };
}

let polblogs: Promise<CrawlCase> | undefined;

/** polblogs, its reference (canonical URLs) and its one-process crawl (memory broker, same partitions). */
function polblogsCase(): Promise<CrawlCase> {
  polblogs ??= (async () => {
    const graph = await readGraph(join(graphs.polblogs, 'pages.txt'), join(graphs.polblogs, 'links.tsv'));
    const reference = new Map([...(await readScores(join(graphs.polblogs, 'pagerank.tsv')))].map(([u, s]) => [canonicalUrl(u), s] as [string, number]));
    const d = tempDir('sf-wicc-ref-');
    const broker = new MemoryBroker();
    try {
      const r = await crawlGraph({ graph, partitions: PARTITIONS, dataDir: d.dir, broker, weigh: uniformWeights, log: memoryLogger().log, tolerance: 1e-9 });
      return { graph, reference, scores: new Map(r.scores), counts: { pages: r.pages, outlinks: r.outlinks, backlinks: r.backlinks } };
    } finally {
      await broker.close();
      d.cleanup();
    }
  })();
  return polblogs;
}

/**
 * Runs `body` with a replay server of `graph` in this process and a web-index cluster of
 * three workers that crawl it (unthrottled, any host, the server's host map in a file), once
 * every partition runs.
 */
async function withCrawlCluster(t: import('node:test').TestContext, graph: WebGraph, body: (c: WebIndexCluster, server: ReplayServer, workers: WorkerProcess[]) => Promise<void>): Promise<void> {
  const server = new ReplayServer(graph);
  const port = await server.listen();
  const dir = tempDir('sf-wicc-map-');
  const mapFile = join(dir.dir, 'hosts.map');
  writeFileSync(mapFile, hostMapLines(server.hostMap(port)));
  try {
    await withWebIndexCluster(t, {
      partitions: PARTITIONS, leaseMs: LEASE_MS,
      workerArgs: ['--crawl', '--any-host', '--per-host', '256', '--delay-ms', '0', '--crawlers', '4', '--map-file', mapFile],
    }, async (c) => {
      const ws = [await c.startWorker('w1'), await c.startWorker('w2'), await c.startWorker('w3')];
      await c.allRunningOn(ws);
      await body(c, server, ws);
    });
  } finally {
    await server.close();
    dir.cleanup();
  }
}

/** The counts of the one-process crawl and its scores within L1 1e-6 (and the reference's). */
function assertCrawl(result: Pick<ClusterCrawlResult, 'pages' | 'outlinks' | 'backlinks'> & { scores: Map<string, number> }, c: CrawlCase): void {
  assert.deepEqual({ pages: result.pages, outlinks: result.outlinks, backlinks: result.backlinks }, c.counts, 'the counts of the one-process crawl');
  const l1 = l1Distance(result.scores, c.scores);
  assert.ok(l1 <= 1e-6, `L1 ${l1} to the one-process crawl's scores`);
  const ref = l1Distance(result.scores, c.reference);
  assert.ok(ref <= 1e-6, `L1 ${ref} to the reference`);
}

/** `args` with the value after `flag` replaced by `value`. */
function withArg(args: readonly string[], flag: string, value: string): string[] {
  const i = args.indexOf(flag);
  assert.ok(i >= 0, `${flag} in the worker arguments`);
  return [...args.slice(0, i + 1), value, ...args.slice(i + 2)];
}

async function crawl(c: WebIndexCluster, graph: WebGraph, onProgress?: (p: { pages: number }) => void): Promise<ClusterCrawlResult> {
  return crawlOnCluster({ client: await c.client(), partitions: PARTITIONS, seeds: graph.pages, log: memoryLogger().log, tolerance: 1e-9, crawlTimeoutMs: 240_000, ...(onProgress ? { onProgress } : {}) });
}

test('three workers crawl polblogs: the counts and scores of the one-process crawl, every page fetched once', { timeout: 600_000 }, async (t) => {
  if (await skipWithoutRedis(t)) return;
  const expected = await polblogsCase();
  await withCrawlCluster(t, expected.graph, async (c, server) => {
    // A worker that would crawl differently (another politeness delay), or not at all, is refused at start.
    for (const [name, args] of [['w-delay', withArg(c.workerArgs('w-delay'), '--delay-ms', '5')], ['w-nocrawl', c.workerArgs('w-nocrawl').slice(0, -c.extraWorkerArgs.length)]] as const) {
      const w = spawnWorkerProcess(name, args);
      const { code } = await w.exited;
      assert.notEqual(code, 0, `${name} is refused`);
      assert.match(w.stderr, /runs other stages than this worker/, `${name}'s reason`);
    }
    const result = await crawl(c, expected.graph);
    assert.ok(result.converge?.converged, 'converged');
    assertCrawl({ ...result, scores: new Map(result.scores) }, expected);
    assert.equal(server.served.get(200), expected.counts.pages, 'every page fetched exactly once');
    assert.equal(result.frontier.requested ?? 0, 0, 'no request left out');
    t.diagnostic(`crawl ${result.crawlSeconds.toFixed(1)} s, converge ${result.convergeSeconds.toFixed(1)} s; frontier ${JSON.stringify(result.frontier)}`);
    // Seeding again changes nothing: the frontier knows every seed.
    const again = await crawl(c, expected.graph);
    assert.equal(server.served.get(200), expected.counts.pages, 'seeding again fetched nothing');
    assertCrawl({ ...again, scores: new Map(again.scores) }, expected);
    await c.stopAll();
  });
});

test('a worker SIGKILLed during the crawl: the counts and scores of the one-process crawl', { timeout: 600_000 }, async (t) => {
  if (await skipWithoutRedis(t)) return;
  const expected = await polblogsCase();
  await withCrawlCluster(t, expected.graph, async (c, server, ws) => {
    const job = crawl(c, expected.graph);
    job.catch(() => undefined); // awaited below
    await until('the crawl to be under way', async () => (server.served.get(200) ?? 0) >= 100, 60_000);
    const killedAt = Date.now();
    const servedAtKill = server.served.get(200) ?? 0;
    ws[0]!.child.kill('SIGKILL');
    assert.ok(servedAtKill < expected.counts.pages, `the kill happened during the crawl (${servedAtKill} of ${expected.counts.pages} pages served)`);
    const result = await job;
    assert.ok(result.converge?.converged, 'converged');
    assertCrawl({ ...result, scores: new Map(result.scores) }, expected);
    t.diagnostic(`killed after ${servedAtKill} pages served; the job ended ${Date.now() - killedAt} ms after the kill; ${server.served.get(200)} fetches in all`);
  });
});

test('the crawl client SIGKILLed during the crawl and started again with the same command resumes: exact, no page fetched twice', { timeout: 600_000 }, async (t) => {
  if (await skipWithoutRedis(t)) return;
  const expected = await polblogsCase();
  await withCrawlCluster(t, expected.graph, async (c, server) => {
    const out = join(c.dataDir, 'scores.tsv');
    const args = [
      resolve(repoRoot, 'bin/shardflow.mjs'), 'crawl', '--cluster', REDIS_URL, '--cluster-name', c.clusterName, '--key-prefix', c.keyPrefix, '--broker', c.brokerSpec,
      '--tolerance', '1e-9', '--json', '--out', out, '--seed', ...expected.graph.pages,
    ];
    // Not spawnSync: the replay server runs in this process.
    const run = () => {
      const child = spawn(process.execPath, args, { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout!.on('data', (d: Buffer) => (stdout += d.toString('utf8')));
      child.stderr!.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
      const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }>((r) => child.on('exit', (code, signal) => r({ code, signal, stdout, stderr })));
      return { child, exited };
    };
    const first = run();
    await until('the first client\'s crawl to be under way', async () => (server.served.get(200) ?? 0) >= 100 || (first.child.exitCode !== null && Promise.reject(new Error(`the first client exited: ${(await first.exited).stderr.slice(-2000)}`))), 60_000);
    const servedAtKill = server.served.get(200) ?? 0;
    first.child.kill('SIGKILL');
    assert.equal((await first.exited).signal, 'SIGKILL');
    assert.ok(servedAtKill < expected.counts.pages, `killed during the crawl (${servedAtKill} of ${expected.counts.pages} pages served)`);
    // Again with --serve: after the crawl, the query API of the cluster, until SIGTERM.
    args.push('--serve', '0');
    const second = run();
    let stdout = '';
    second.child.stdout!.on('data', (d: Buffer) => (stdout += d.toString('utf8')));
    const api = await until('the query API after the crawl', async () => /query API on (\S+)/.exec(stdout)?.[1] || (second.child.exitCode !== null && Promise.reject(new Error(`the second client exited: ${(await second.exited).stderr.slice(-2000)}`))), 240_000);
    const top = (await (await fetch(new URL('/v1/top/pages?limit=3', api))).json()) as { pages: number; top: Array<{ url: string }> };
    assert.equal(top.pages, expected.counts.pages, 'served from the workers: every page');
    second.child.kill('SIGTERM');
    const again = await second.exited;
    assert.equal(again.code, 0, again.stderr.slice(-3000));
    const summary = JSON.parse(again.stdout.split('\n')[0]!) as { pages: number; outlinks: number; backlinks: number; converged: boolean; frontier: Record<string, number> };
    assert.equal(summary.converged, true);
    assertCrawl({ ...summary, scores: new Map(await readScores(out)) }, expected);
    assert.equal(server.served.get(200), expected.counts.pages, 'no page fetched twice: seeding again left the known URLs as they were');
    t.diagnostic(`first client killed after ${servedAtKill} pages served; frontier ${JSON.stringify(summary.frontier)}`);
  });
});

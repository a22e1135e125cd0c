// Queries answered while web-index partitions move (issue #16, items 3 and 4): three
// `shardflow worker --web-index --crawl` processes crawl polblogs from a replay server in this
// process; `shardflow crawl --cluster --serve 0` seeds and serves the cluster's query API from
// the start. A client polls pages of every partition over HTTP (page and outlinks) while a
// fourth worker joins mid-crawl and the leader moves partitions to it (planned hand-backs:
// the last checkpoint with reads still answered, then close the ask consumer, stop the
// partition, release; the next owner acquires, restores, starts and consumes the requests
// that waited). Every answer must be 200 with the page's data (its
// canonical URL, status 200, and exactly the distinct outlinks the replay server's HTML has);
// the partitions did move (owners before and after, and the workers' events), and requests
// were asked of the moving partitions across each hand-off.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { readGraph, type WebGraph } from '../src/replay/graphFile.js';
import { ReplayServer } from '../src/replay/replayServer.js';
import { canonicalUrl } from '../src/actors/crawler/canonicalUrl.js';
import { hostPartitioner } from '../src/actors/partition/hostPartitioner.js';
import { hostMapLines } from '../src/cli/crawl.js';
import { WEB_INDEX_STAGE } from '../src/topology/clusterProtocol.js';
import { REDIS_URL, skipWithoutRedis } from './kit/cluster.js';
import { until, type WorkerProcess } from './kit/clusterRun.js';
import { graphs, repoRoot, tempDir } from './kit/datasets.js';
import { withWebIndexCluster, type WebIndexCluster } from './kit/webIndexCluster.js';

const PARTITIONS = 6;
const LEASE_MS = 3000;
/** Pages polled per partition. */
const PER_PARTITION = 2;
/** Longest wait for an answer before the client counts it as none. */
const ANSWER_MS = 30_000;

/** One answer the polling client got. */
interface Answer {
  readonly partition: number;
  readonly path: string;
  readonly sentAt: number;
  readonly at: number;
  readonly status: number;
  /** Why the answer is not the page's data (undefined: right). */
  readonly wrong: string | undefined;
}

/** The distinct canonical outlinks of each graph page, as the replay server's HTML links them. */
function expectedOutlinks(graph: WebGraph): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  for (const page of graph.pages) out.set(canonicalUrl(page), new Set([...new Set(graph.links.get(page) ?? [])].map((t) => canonicalUrl(t))));
  return out;
}

/** Why `body` (of `GET path`) is not page `url`'s data, or undefined when it is. */
function wrongness(kind: 'page' | 'outlinks', url: string, body: any, outlinks: ReadonlySet<string>): string | undefined {
  if (kind === 'page') {
    if (body?.url !== url) return `url ${body?.url}`;
    if (body.status !== 200) return `fetch status ${body.status}`;
    if (body.counts?.outlinks !== outlinks.size) return `${body.counts?.outlinks} outlinks, not ${outlinks.size}`;
    return undefined;
  }
  const got = new Set((body?.links ?? []).map((l: { url: string }) => l.url));
  if (body?.total !== outlinks.size || got.size !== outlinks.size || [...outlinks].some((u) => !got.has(u))) return `outlinks ${JSON.stringify([...got]).slice(0, 300)} (total ${body?.total}), not the page's ${outlinks.size}`;
  return undefined;
}

/** `crawl --cluster --serve 0 --json` as a child process; resolves its query API's URL once it serves. */
function startCrawlClient(c: WebIndexCluster, graph: WebGraph): { child: ReturnType<typeof spawn>; api: Promise<string>; stderr: () => string } {
  const args = [
    resolve(repoRoot, 'bin/shardflow.mjs'), 'crawl', '--cluster', REDIS_URL, '--cluster-name', c.clusterName, '--key-prefix', c.keyPrefix, '--broker', c.brokerSpec,
    '--tolerance', '1e-9', '--json', '--serve', '0', '--seed', ...graph.pages,
  ];
  const child = spawn(process.execPath, args, { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
  child.stdout!.resume();
  const api = until('the crawl client\'s query API', async () => /query API on (\S+) during the crawl/.exec(stderr)?.[1] || (child.exitCode !== null && Promise.reject(new Error(`the crawl client exited ${child.exitCode}: ${stderr.slice(-2000)}`))), 120_000);
  return { child, api, stderr: () => stderr };
}

/** Owner (member id) of every web-index partition, from the cluster status. */
async function owners(c: WebIndexCluster): Promise<Map<number, string | undefined>> {
  const s = await c.status();
  return new Map(s.partitions.filter((p) => p.stage === WEB_INDEX_STAGE).map((p) => [p.partition, p.owner ?? undefined]));
}

/** How the workers keep their partitions: one shared data dir, or each its own with checkpoints in a directory. */
type Variant = { readonly ownDataDirs: false } | { readonly ownDataDirs: true; readonly checkpointIntervalMs: number };

test('a fourth worker joins mid-crawl, then one stops: every query on the moving partitions is answered 200 with the page\'s data (one data dir)', { timeout: 240_000 }, async (t) => {
  if (await skipWithoutRedis(t)) return;
  await moveQueries(t, { ownDataDirs: false });
});

// The old owner answers reads through its hand-back's last checkpoint (before, reads waited
// through it: up to 32 s under load, and over 30 s unanswered at load average 33); docs/cluster.md,
// "Queries during a move".
test('the same with a data dir per worker: partitions move through checkpoints (file:///)', { timeout: 240_000 }, async (t) => {
  if (await skipWithoutRedis(t)) return;
  await moveQueries(t, { ownDataDirs: true, checkpointIntervalMs: 1000 });
});

/** The scenario of this file (top comment), its workers keeping their partitions as `variant` says. */
async function moveQueries(t: import('node:test').TestContext, variant: Variant): Promise<void> {
  const graph = await readGraph(join(graphs.polblogs, 'pages.txt'), join(graphs.polblogs, 'links.tsv'));
  const outlinks = expectedOutlinks(graph);
  const partitioner = hostPartitioner(PARTITIONS);
  const server = new ReplayServer(graph);
  const fetched: Array<{ url: string; at: number }> = [];
  server.onPageServed = (page) => fetched.push({ url: canonicalUrl(page), at: Date.now() });
  const port = await server.listen();
  const dir = tempDir('sf-wimq-map-');
  const mapFile = join(dir.dir, 'hosts.map');
  writeFileSync(mapFile, hostMapLines(server.hostMap(port)));
  let crawlClient: ReturnType<typeof startCrawlClient> | undefined;
  const t0 = Date.now();
  const steps: string[] = [];
  const step = (what: string) => steps.push(`${what} ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  let polling = true;
  try {
    await withWebIndexCluster(t, {
      partitions: PARTITIONS, leaseMs: LEASE_MS, ownDataDirs: variant.ownDataDirs,
      workerArgs: [
        '--crawl', '--any-host', '--per-host', '256', '--delay-ms', '0', '--crawlers', '2', '--map-file', mapFile,
        ...(variant.ownDataDirs ? ['--checkpoints', pathToFileURL(join(dir.dir, 'checkpoints')).href, '--checkpoint-interval-ms', String(variant.checkpointIntervalMs)] : []),
      ],
    }, async (c) => {
      const ws: WorkerProcess[] = await Promise.all(['w1', 'w2', 'w3'].map((n) => c.startWorker(n)));
      crawlClient = startCrawlClient(c, graph); // it waits for every partition to run
      await c.allRunningOn(ws);
      step('3 workers run');
      const api = await crawlClient.api;
      step('query API');
      const get = async (path: string): Promise<{ status: number; body: any }> => {
        const res = await fetch(new URL(path, api), { signal: AbortSignal.timeout(ANSWER_MS) });
        return { status: res.status, body: await res.json() };
      };

      // Pages to poll: PER_PARTITION stored pages of each partition, among those the replay
      // server answered (stored soon after; until then a page answers 404).
      const tracked: Array<{ url: string; partition: number }> = [];
      await until('stored pages on every partition', async () => {
        const candidates = fetched.filter((f) => !tracked.some((x) => x.url === f.url) && tracked.filter((x) => x.partition === partitioner.forUrl(f.url)).length < PER_PARTITION);
        const picked = new Map<number, string>();
        for (const f of candidates) if (!picked.has(partitioner.forUrl(f.url))) picked.set(partitioner.forUrl(f.url), f.url);
        await Promise.all([...picked].map(async ([partition, url]) => {
          const r = await get(`/v1/page?url=${encodeURIComponent(url)}`);
          if (r.status === 200) tracked.push({ url, partition });
          else assert.equal(r.status, 404, `a page not stored yet is 404: ${JSON.stringify(r.body)}`);
        }));
        return tracked.length === PER_PARTITION * PARTITIONS;
      }, 120_000).catch((err: Error) => Promise.reject(new Error(`${err.message}: ${fetched.length} pages fetched, ${tracked.length} of ${PER_PARTITION * PARTITIONS} chosen (${JSON.stringify(tracked)})`)));
      const byPartition = new Map<number, string[]>();
      for (const { url, partition } of tracked) byPartition.set(partition, [...(byPartition.get(partition) ?? []), url]);
      step('pages chosen');
      // The client polls them, page and outlinks by turns, from now until the moves are over.
      const answers: Answer[] = [];
      const ask = async (partition: number, kind: 'page' | 'outlinks', url: string): Promise<void> => {
        const path = kind === 'page' ? `/v1/page?url=${encodeURIComponent(url)}` : `/v1/outlinks?url=${encodeURIComponent(url)}&limit=1000`;
        const sentAt = Date.now();
        let status = 0;
        let wrong: string | undefined;
        try {
          const r = await get(path);
          status = r.status;
          wrong = status === 200 ? wrongness(kind, url, r.body, outlinks.get(url)!) : `HTTP ${status}: ${JSON.stringify(r.body).slice(0, 300)}`;
        } catch (err) {
          wrong = `no answer: ${(err as Error).message} (${((Date.now() - sentAt) / 1000).toFixed(1)} s)`;
        }
        answers.push({ partition, path, sentAt, at: Date.now(), status, wrong });
      };
      // One poller per partition (so a request on each partition is always out), asking its pages and their outlinks by turns.
      const pollers = [...byPartition.keys()].map(async (partition) => {
        const mine = tracked.filter((x) => x.partition === partition);
        for (let i = 0; polling; i++) await ask(partition, Math.floor(i / mine.length) % 2 === 0 ? 'page' : 'outlinks', mine[i % mine.length]!.url);
      });

      // A fourth worker joins mid-crawl; the leader moves partitions to it, one at a time.
      await until('answers before the join', async () => answers.length >= PARTITIONS, 30_000);
      const before = await owners(c);
      const servedAtJoin = server.served.get(200) ?? 0;
      const w4 = await c.startWorker('w4');
      ws.push(w4);
      step('w4 joined');
      const after = await until('w4 to run its share and the others to hold the rest', async () => {
        const s = await c.status();
        const units = s.partitions.filter((p) => p.stage === WEB_INDEX_STAGE);
        if (!units.every((p) => p.state === 'running')) return false;
        const counts = ws.map((w) => units.filter((p) => p.owner === w.id).length);
        return counts.reduce((a, b) => a + b, 0) === PARTITIONS && Math.max(...counts) - Math.min(...counts) <= 1 && counts[3]! >= 1 && new Map(units.map((p) => [p.partition, p.owner ?? undefined]));
      }, 60_000);
      step('w4 runs its share');
      // Then w1 stops (SIGTERM: it leaves and hands every partition back to the others).
      const w1 = ws[0]!;
      const stoppedAt = Date.now();
      w1.child.kill('SIGTERM');
      assert.equal((await w1.exited).code, 0, `w1 exits 0 after its hand-back (stderr: ${w1.stderr.slice(-1500)})`);
      const final = new Map((await c.allRunningOn(ws.slice(1))).partitions.filter((p) => p.stage === WEB_INDEX_STAGE).map((p) => [p.partition, p.owner ?? undefined]));
      step('w1 handed back');
      await new Promise((r) => setTimeout(r, 2000)); // answers after the last move
      polling = false;
      await Promise.all(pollers);

      // Each move, from its old owner's release to its new owner's start, and the requests asked across it.
      const byId = new Map(ws.map((w) => [w.id, w]));
      const moves = [
        ...[...after].filter(([p, owner]) => before.get(p) !== owner).map(([p, owner]) => ({ partition: p, from: before.get(p), to: owner, why: 'to w4' })),
        ...[...final].filter(([p, owner]) => after.get(p) !== owner).map(([p, owner]) => ({ partition: p, from: after.get(p), to: owner, why: 'w1 stopped' })),
      ];
      assert.ok(moves.some((m) => m.why === 'to w4'), `partitions moved to w4 (owners before ${JSON.stringify([...before])}, after ${JSON.stringify([...after])})`);
      assert.ok(moves.some((m) => m.why === 'w1 stopped'), `w1's partitions moved (owners ${JSON.stringify([...after])}, then ${JSON.stringify([...final])})`);
      assert.ok(servedAtJoin < graph.pages.length, `w4 joined during the crawl (${servedAtJoin} of ${graph.pages.length} pages served)`);
      const wrong = answers.filter((a) => a.wrong !== undefined);
      assert.deepEqual(wrong.slice(0, 5), [], `${wrong.length} of ${answers.length} answers not 200 with the page's data`);
      const lines: string[] = [];
      for (const m of moves) {
        const unit = `${WEB_INDEX_STAGE}/${m.partition}`;
        const from = byId.get(m.from)!;
        const to = byId.get(m.to)!;
        const handedBack = from.events.filter((e) => (e.event.type === 'released' || e.event.type === 'fenced') && e.event.unit === unit).at(-1);
        const released = handedBack?.at;
        const started = to.events.filter((e) => e.event.type === 'started' && e.event.unit === unit).at(-1)?.at;
        assert.ok(released !== undefined && started !== undefined && started >= released, `${unit}: released by ${from.name}, then started by ${to.name} (events of ${from.name}: ${JSON.stringify(from.events.filter((e) => 'unit' in e.event && e.event.unit === unit))}; of ${to.name}: ${JSON.stringify(to.events.filter((e) => 'unit' in e.event && e.event.unit === unit))})`);
        // When the hand-back began: the leader's round that moved the unit, or w1's SIGTERM.
        const asked = m.why === 'w1 stopped' ? stoppedAt : ws.flatMap((w) => w.events).filter((e) => e.event.type === 'assigned' && e.event.moves.some((x) => x.unit === unit && x.to === m.to)).at(-1)?.at;
        const across = answers.filter((a) => a.partition === m.partition && a.sentAt <= started && a.at >= released);
        if (variant.ownDataDirs) assert.ok(to.events.some((e) => e.event.type === 'restored' && e.event.unit === unit), `${unit}: ${to.name} restored its checkpoint (its own data dir)`);
        assert.ok(across.length >= 1, `${unit}: a read asked across its move (released ${released}, started ${started})`);
        const waits = across.map((a) => a.at - a.sentAt);
        lines.push(`${unit} ${from.name} -> ${to.name} (${m.why}, ${handedBack!.event.type}): hand-back ${asked === undefined ? '?' : released - asked} ms, released to started ${started - released} ms, ${across.length} requests across it${waits.length ? ` (longest ${Math.max(...waits)} ms)` : ''}`);
      }
      assert.ok(lines.length >= 2, 'moves');
      const waits = answers.map((a) => a.at - a.sentAt).sort((x, y) => x - y);
      t.diagnostic(`${answers.length} answers, all 200 and right (median ${waits[waits.length >> 1]} ms, slowest ${waits.at(-1)} ms); ${lines.join('; ')}; w4 joined after ${servedAtJoin} pages served; ${steps.join(', ')}`);
    }, async () => {
      // Before the cluster goes: the crawl client stops (SIGTERM: its query API closes).
      if (crawlClient && crawlClient.child.exitCode === null && crawlClient.child.signalCode === null) {
        const exited = new Promise((r) => crawlClient!.child.once('exit', r));
        crawlClient.child.kill('SIGTERM');
        await exited;
      }
    });
  } catch (err) {
    t.diagnostic(`steps: ${steps.join(', ')}; crawl client stderr: ${crawlClient?.stderr().slice(-1500)}`);
    throw err;
  } finally {
    polling = false;
    if (crawlClient && crawlClient.child.exitCode === null && crawlClient.child.signalCode === null) crawlClient.child.kill('SIGKILL');
    await server.close();
    dir.cleanup();
  }
}

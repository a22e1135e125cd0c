import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { crawlSites } from '../src/cli/crawl.js';
import { DEFAULT_MAX_OUTLINKS, extractLinks, extractLinksChunked } from '../src/actors/crawler/extractLinks.js';
import { FETCH_MESSAGE_BODY_BYTES, fetchMessageRuns } from '../src/actors/crawler/crawler.js';
import { uniformWeights } from '../src/actors/metrics/weights.js';
import { ColumnFamilies, Counters } from '../src/actors/partition/schema.js';
import { decodeInt64 } from '../src/operators/mergeOperators.js';
import { MemoryBroker } from '../src/runtime/brokers/memory.js';
import { hostPartitioner } from '../src/actors/partition/hostPartitioner.js';
import { tempDir } from './kit/datasets.js';

const PARTITIONS = 4;
const BIG = 'http://big.test/';

/** Link i of the big page: distinct targets on 101 out-of-scope hosts. */
const target = (i: number) => `http://t${i % 101}.test/p${i}.html`;

/** A page of `n` links to distinct out-of-scope targets (about 50 bytes each). */
function bigPage(n: number): string {
  const parts: string[] = ['<!doctype html><html><head><title>all links</title></head><body>'];
  for (let i = 0; i < n; i++) parts.push(`<a href="${target(i)}">p${i}</a>\n`);
  parts.push('</body></html>');
  return parts.join('');
}

/** Hosts `s<k>.test` whose partition is not big.test's (so the big page's indexer is not theirs). */
function smallHosts(count: number): string[] {
  const partitioner = hostPartitioner(PARTITIONS);
  const big = partitioner.forUrl(BIG);
  const out: string[] = [];
  for (let k = 0; out.length < count; k++) if (partitioner.forUrl(`http://s${k}.test/`) !== big) out.push(`s${k}.test`);
  return out;
}

interface Sites {
  readonly port: number;
  /** ms (performance.now) of each small-host page request. */
  readonly smallHits: number[];
  /** When the big page's body was handed to the socket in full. */
  bigServedAt: number;
  /** Small pages stop linking on once set. */
  stop: boolean;
  close(): Promise<void>;
}

/**
 * One server: big.test/ answers `html` (after `bigDelayMs`), every small host a chain
 * /0.html -> /1.html -> ... that goes on until `stop` is set; robots.txt is 404 everywhere.
 */
async function serve(html: string, bigDelayMs: number): Promise<Sites> {
  const body = Buffer.from(html);
  const sites: Sites = { port: 0, smallHits: [], bigServedAt: 0, stop: false, close: async () => undefined };
  const server: Server = createServer((req, res) => {
    const host = String(req.headers.host).replace(/:\d+$/, '');
    if (req.url === '/robots.txt') return void res.writeHead(404).end();
    if (host === 'big.test') {
      setTimeout(() => {
        res.on('finish', () => (sites.bigServedAt = performance.now()));
        res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(body);
      }, bigDelayMs);
      return;
    }
    const n = Number(/^\/(\d+)\.html$/.exec(req.url ?? '')?.[1] ?? -1);
    if (n < 0) return void res.writeHead(404, { 'content-type': 'text/html' }).end('none');
    sites.smallHits.push(performance.now());
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(sites.stop ? '<p>end</p>' : `<a href="/${n + 1}.html">next</a>`);
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', () => ok()));
  return Object.assign(sites, {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((ok) => { server.closeAllConnections(); server.close(() => ok()); }),
  });
}

test('extractLinks caps distinct targets: the first ones in document order, duplicates counted once, the canonical kept in place of the last', async () => {
  const page = 'http://h.test/';
  const html = '<link rel="canonical" href="/canon.html"><a href="/a">A</a><a href="/b">B</a><a href="/a#x">A again</a><a href="/c">C</a><a href="/d">D</a>';
  const capped = extractLinks(html, page, { maxOutlinks: 3 });
  assert.deepEqual(capped.outlinks.map((l) => l.target), ['http://h.test/a', 'http://h.test/b', 'http://h.test/canon.html']);
  assert.deepEqual(capped.truncated, { found: 5, kept: 3 }, 'a, b, c, d and the canonical URL: five distinct targets');
  assert.deepEqual(capped.outlinks.map((l) => l.features.anchor), ['A', 'B', '']);
  assert.deepEqual(capped.outlinks.map((l) => l.features.position), [0, 0.2, 0], 'positions count every link of the page');
  const whole = extractLinks(html, page, { maxOutlinks: 5 });
  assert.equal(whole.truncated, undefined);
  assert.equal(whole.outlinks.length, 5);
  assert.deepEqual(await extractLinksChunked(bigPage(70_000), page, { maxOutlinks: 100 }), extractLinks(bigPage(70_000), page, { maxOutlinks: 100 }), 'parsed in slices: the same result');
  assert.throws(() => extractLinks(html, page, { maxOutlinks: 0 }), /maxOutlinks must be >= 1/);
});

test('fetches/<p> messages: the bodies of one delivery are split at 4 MiB per message, a larger body travels alone, order kept', () => {
  const page = (name: string, bytes: number) => ({ url: `http://h.test/${name}`, status: 200, fetchedAt: 0, body: 'x'.repeat(bytes) });
  const mib = 1024 * 1024;
  const results = [page('a', 3 * mib), page('b', 0.5 * mib), page('c', 1 * mib), page('d', 9 * mib), page('e', 10)];
  const runs = fetchMessageRuns(results);
  assert.deepEqual(runs.map((r) => r.map((x) => x.url.slice(-1))), [['a', 'b'], ['c'], ['d'], ['e']]);
  for (const run of runs) {
    const bytes = run.reduce((n, r) => n + (r.body?.length ?? 0), 0);
    assert.ok(bytes <= FETCH_MESSAGE_BODY_BYTES || run.length === 1, `a run of ${run.length} carries ${bytes} bytes`);
  }
  assert.deepEqual(runs.flat(), results, 'nothing lost, nothing reordered');
});

test('a page of 200,000 links: stored with its first 10,000, the truncation recorded on the page, counted and logged; pages of other hosts are indexed while it is parsed', { timeout: 300_000 }, async (t) => {
  const links = 200_000;
  const small = smallHosts(3);
  const sites = await serve(bigPage(links), 300);
  const { dir, cleanup } = tempDir();
  // The page is about 8 MB of HTML: more than a broker message takes by default (5 MiB,
  // Pulsar's limit), which would store it without its body (test/crawl.bad-input-outcomes.test.ts).
  const broker = new MemoryBroker({ maxPayloadBytes: 64 * 2 ** 20 });
  const warnings: Array<Record<string, unknown>> = [];
  let truncatedAt = 0;
  // The indexer logs the truncation while it indexes the big page (after its links are
  // parsed, before the write): the end of the window in which other pages must move on.
  const log = pino({ level: 'warn', base: undefined }, {
    write: (line: string) => {
      const entry = JSON.parse(line) as Record<string, unknown>;
      warnings.push(entry);
      if (entry.msg === 'outlinks truncated') {
        truncatedAt = performance.now();
        sites.stop = true;
      }
    },
  });
  try {
    const hostMap = new Map(['big.test', ...small].map((h) => [h, `127.0.0.1:${sites.port}`]));
    const result = await crawlSites({
      seeds: [BIG, ...small.map((h) => `http://${h}/0.html`)], hostMap,
      partitions: PARTITIONS, dataDir: dir, broker, weigh: uniformWeights, log, crawlers: 4,
      policy: { minDelayMs: 0 }, maxBodyBytes: 32 * 1024 * 1024, rank: false, keepOpen: true,
    });
    const index = result.index!;
    try {
      const view = await index.view(index.partitioner.forUrl(BIG));
      const page = await view.page(BIG);
      assert.equal(page.record?.status, 200);
      assert.equal(page.record?.outlinkCount, DEFAULT_MAX_OUTLINKS, 'the first 10,000 distinct targets are stored');
      assert.equal(page.record?.outlinksFound, links, 'the page says how many it named');
      assert.match(page.record?.error ?? '', /outlinks truncated: first 10000 of 200000 distinct targets kept/);
      assert.equal((await view.outlinks(BIG)).length, DEFAULT_MAX_OUTLINKS);
      const counter = await view.store.get(ColumnFamilies.counters, Counters.outlinksTruncated);
      assert.equal(counter ? Number(decodeInt64(counter)) : 0, 1, 'the outlinksTruncated counter counts the page');
      // The first targets in document order are kept, the later ones are not known at all.
      const kept = target(DEFAULT_MAX_OUTLINKS - 1);
      const dropped = target(DEFAULT_MAX_OUTLINKS);
      const keptPage = await (await index.view(index.partitioner.forUrl(kept))).page(kept);
      assert.equal(keptPage.backlinks, 1);
      assert.equal(keptPage.frontier?.state, 'out-of-scope');
      const droppedPage = await (await index.view(index.partitioner.forUrl(dropped))).page(dropped);
      assert.equal(droppedPage.backlinks, 0);
      assert.equal(droppedPage.frontier, undefined);
      assert.equal(result.frontier['out-of-scope'], DEFAULT_MAX_OUTLINKS);
      const warning = warnings.find((w) => w.msg === 'outlinks truncated');
      assert.deepEqual([warning?.url, warning?.found, warning?.kept], [BIG, links, DEFAULT_MAX_OUTLINKS]);

      // Other hosts' pages kept being fetched, hence indexed (a chain page is requested only
      // after its predecessor was indexed and its link went through backlinks and the
      // policy) between the big page leaving the server and the indexer logging its cut.
      // With the parse in one synchronous call, 1 or 2 were (before it started); sliced, 10
      // to 13.
      assert.ok(sites.bigServedAt > 0 && truncatedAt > sites.bigServedAt, 'the big page was served, then indexed');
      const during = sites.smallHits.filter((t) => t > sites.bigServedAt && t < truncatedAt).length;
      t.diagnostic(`${during} pages of other hosts requested in the ${(truncatedAt - sites.bigServedAt).toFixed(0)} ms from the big page served to its links cut`);
      assert.ok(during >= 5, `${during} pages of other hosts requested while the big page was on its way to the store (${(truncatedAt - sites.bigServedAt).toFixed(0)} ms)`);
    } finally {
      await index.stop();
    }
  } finally {
    await broker.close();
    await sites.close();
    cleanup();
  }
});

test('work is linear in the page size: without a cap, 200,000 links take less than 8 times the CPU time of 50,000 (linear: 4, quadratic: 16)', { timeout: 600_000 }, async (t) => {
  // CPU time of this process (all its threads: the crawl, RocksDB's, the page's server), not
  // wall time: anything else running on the machine would stretch one run's wall time and not
  // the other's.
  const seconds: number[] = [];
  for (const links of [50_000, 200_000]) {
    const sites = await serve(bigPage(links), 0);
    const { dir, cleanup } = tempDir();
    const broker = new MemoryBroker({ maxPayloadBytes: 64 * 2 ** 20 });
    try {
      const cpu = process.cpuUsage();
      const result = await crawlSites({
        seeds: [BIG], hostMap: new Map([['big.test', `127.0.0.1:${sites.port}`]]),
        partitions: PARTITIONS, dataDir: dir, broker, weigh: uniformWeights, log: pino({ level: 'silent' }),
        policy: { minDelayMs: 0 }, maxBodyBytes: 32 * 1024 * 1024, maxOutlinks: Infinity,
      });
      const used = process.cpuUsage(cpu);
      // The page is whole: every step (parse, diff, outlinks, link operations, backlinks,
      // pending targets, frontier, metric corrections and rounds) ran on all its links.
      assert.equal(result.outlinks, links);
      assert.equal(result.backlinks, links);
      assert.equal(result.frontier['out-of-scope'], links);
      assert.equal(result.converged, true);
      seconds.push((used.user + used.system) / 1e6);
    } finally {
      await broker.close();
      await sites.close();
      cleanup();
    }
  }
  const [small, large] = seconds as [number, number];
  t.diagnostic(`50,000 links: ${small.toFixed(2)} CPU s; 200,000 links: ${large.toFixed(2)} CPU s; ratio ${(large / small).toFixed(2)}`);
  assert.ok(large < 8 * small, `200,000 links took ${(large / small).toFixed(1)} times the CPU time of 50,000`);
});

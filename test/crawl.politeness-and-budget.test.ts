import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Packr } from 'msgpackr';
import { crawlSites } from '../src/cli/crawl.js';
import { uniformWeights } from '../src/actors/metrics/weights.js';
import { MemoryBroker } from '../src/runtime/brokers/memory.js';
import { hostPartitioner } from '../src/actors/partition/hostPartitioner.js';
import { Store } from '../src/storage/store.js';
import { ColumnFamilies, partitionColumnFamilies, type FrontierEntry } from '../src/actors/partition/schema.js';
import { memoryLogger, tempDir } from './kit/datasets.js';

interface Hit {
  readonly host: string;
  readonly path: string;
  readonly start: number;
  end: number;
}

/**
 * Three generated hosts on one server: p.test (12 pages, no robots.txt, answers after
 * 20 ms), q.test (8 pages, Crawl-delay 0.2 s, answers after 100 ms: longer than p.test's
 * 50 ms delay plus its answer time, so while both hosts are crawled a q.test request
 * overlaps a p.test one unless p.test's pipeline stalls; with 20 ms each, the overlap the
 * test asserts was left to chance, and CI once saw none), r.test (robots.txt answers 503).
 * Every page links to the next one of its host and to the first page of the others.
 */
async function sites(): Promise<{ port: number; hits: Hit[]; close: () => Promise<void> }> {
  const pages: Record<string, number> = { 'p.test': 12, 'q.test': 8, 'r.test': 4 };
  const hits: Hit[] = [];
  const server = createServer((req, res) => {
    const host = String(req.headers.host).replace(/:\d+$/, '');
    const hit: Hit = { host, path: req.url ?? '/', start: performance.now(), end: 0 };
    hits.push(hit);
    setTimeout(() => {
      const done = (status: number, type: string, body: string) => {
        hit.end = performance.now();
        res.writeHead(status, { 'content-type': type });
        res.end(body);
      };
      if (hit.path === '/robots.txt') {
        if (host === 'q.test') return done(200, 'text/plain', 'User-agent: *\nCrawl-delay: 0.2\n');
        if (host === 'r.test') return done(503, 'text/plain', 'busy');
        return done(404, 'text/plain', 'none');
      }
      const m = /^\/(\d+)\.html$/.exec(hit.path);
      const n = m ? Number(m[1]) : -1;
      if (!(n >= 0 && n < (pages[host] ?? 0))) return done(404, 'text/html', 'none');
      const links = [`/${n + 1}.html`, ...Object.keys(pages).filter((h) => h !== host).map((h) => `http://${h}/0.html`)];
      done(200, 'text/html; charset=utf-8', links.map((l) => `<a href="${l}">${l}</a>`).join(' '));
    }, host === 'q.test' ? 100 : 20);
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', () => ok()));
  return { port: (server.address() as AddressInfo).port, hits, close: () => new Promise((ok) => { server.closeAllConnections(); server.close(() => ok()); }) };
}

async function frontierOf(dataDir: string, partitions: number, url: string): Promise<FrontierEntry | undefined> {
  const p = hostPartitioner(partitions).forUrl(url);
  const store = await Store.open({ path: join(dataDir, `p${p}`), columnFamilies: partitionColumnFamilies() });
  try {
    const v = await store.get(ColumnFamilies.frontier, url);
    return v ? (new Packr({ useRecords: false }).unpack(v) as FrontierEntry) : undefined;
  } finally {
    await store.close();
  }
}

test('politeness: one request at a time per host, the minimum delay and Crawl-delay between them, hosts in parallel; an unreachable robots.txt blocks its host', { timeout: 120_000 }, async () => {
  const s = await sites();
  const { dir, cleanup } = tempDir();
  const broker = new MemoryBroker();
  try {
    const hostMap = new Map(['p.test', 'q.test', 'r.test'].map((h) => [h, `127.0.0.1:${s.port}`]));
    const result = await crawlSites({
      seeds: ['http://p.test/0.html'], allowHosts: ['q.test', 'r.test'], hostMap,
      partitions: 2, dataDir: dir, broker, weigh: uniformWeights, log: memoryLogger().log, crawlers: 4,
      policy: { minDelayMs: 50, robotsRetryMs: 60_000 },
    });
    const pageHits = (host: string) => s.hits.filter((h) => h.host === host && h.path !== '/robots.txt');
    assert.equal(pageHits('p.test').length, 13, 'p.test: its 12 pages and the 404 past the last');
    assert.equal(pageHits('q.test').length, 9);
    assert.equal(pageHits('r.test').length, 0, 'nothing of r.test is fetched while its robots.txt is unreachable');
    for (const [host, delay] of [['p.test', 50], ['q.test', 200]] as const) {
      const hits = pageHits(host).sort((a, b) => a.start - b.start);
      for (let i = 1; i < hits.length; i++) {
        const gap = hits[i]!.start - hits[i - 1]!.end;
        assert.ok(gap >= 0, `${host}: request ${i} started before request ${i - 1} ended (one at a time)`);
        assert.ok(gap >= delay - 2, `${host}: ${gap.toFixed(1)} ms between two requests, want >= ${delay}`);
      }
    }
    const p = pageHits('p.test');
    const q = pageHits('q.test');
    assert.ok(q.some((a) => p.some((b) => a.start < b.end && b.start < a.end)), 'two hosts are crawled at the same time');
    const blocked = await frontierOf(dir, 2, 'http://r.test/0.html');
    assert.equal(blocked?.state, 'blocked');
    assert.match(blocked?.reason ?? '', /robots\.txt unreachable \(HTTP 503\)/);
    assert.equal(result.frontier.blocked, 1);
  } finally {
    await broker.close();
    await s.close();
    cleanup();
  }
});

test('--max-pages: the budget stops requests, the rest stays queued in the frontier and the crawl ends', { timeout: 60_000 }, async () => {
  const s = await sites();
  const { dir, cleanup } = tempDir();
  const broker = new MemoryBroker();
  try {
    const hostMap = new Map(['p.test', 'q.test'].map((h) => [h, `127.0.0.1:${s.port}`]));
    const result = await crawlSites({
      seeds: ['http://p.test/0.html'], allowHosts: ['q.test'], hostMap, maxPages: 5,
      partitions: 2, dataDir: dir, broker, weigh: uniformWeights, log: memoryLogger().log,
      policy: { minDelayMs: 0 }, rank: false,
    });
    assert.equal(s.hits.filter((h) => h.path !== '/robots.txt').length, 5);
    assert.equal(result.frontier.fetched, 5);
    assert.ok((result.frontier.queued ?? 0) >= 1, `queued: ${JSON.stringify(result.frontier)}`);
    assert.equal(result.frontier['out-of-scope'], 1, 'r.test is not in scope: recorded, not fetched');
  } finally {
    await broker.close();
    await s.close();
    cleanup();
  }
});

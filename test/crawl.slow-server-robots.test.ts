import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { crawlSites } from '../src/cli/crawl.js';
import { uniformWeights } from '../src/actors/metrics/weights.js';
import { MemoryBroker } from '../src/runtime/brokers/memory.js';
import { memoryLogger, tempDir } from './kit/datasets.js';

/**
 * A server of limited capacity, the deterministic stand-in for a machine too loaded to
 * answer: it answers one request at a time, each `serviceMs` after the previous answer
 * (requests wait in its queue, as they waited in the loaded process's event loop). Hosts
 * `h0.test` ... are one page each (`/`, linking to the next host); robots.txt answers 404
 * (everything allowed). `hang` holds chosen URLs (`host/path`) unanswered for 5 s, past any
 * fetch timeout of these tests. Counts the robots.txt requests received and not answered yet.
 */
async function slowSites(hosts: number, serviceMs: number, hang: ReadonlySet<string> = new Set()) {
  const robots = { inFlight: 0, peak: 0, received: 0 };
  const timers = new Set<NodeJS.Timeout>();
  let queue: Promise<void> = Promise.resolve();
  const wait = (ms: number) => new Promise<void>((resolve) => {
    const t = setTimeout(() => { timers.delete(t); resolve(); }, ms);
    timers.add(t);
  });
  const server = createServer((req, res) => {
    const host = String(req.headers.host).replace(/:\d+$/, '');
    const path = req.url ?? '/';
    const isRobots = path === '/robots.txt';
    if (isRobots) {
      robots.received++;
      robots.peak = Math.max(robots.peak, ++robots.inFlight);
    }
    const answer = () => {
      if (isRobots) robots.inFlight--;
      if (res.destroyed) return;
      if (isRobots) return void res.writeHead(404, { 'content-type': 'text/plain' }).end('none');
      const n = Number(/^h(\d+)\.test$/.exec(host)?.[1] ?? -1);
      if (path !== '/' || !(n >= 0 && n < hosts)) return void res.writeHead(404, { 'content-type': 'text/html' }).end('none');
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(`<a href="http://h${(n + 1) % hosts}.test/">next</a>`);
    };
    if (hang.has(`${host}${path}`)) return void wait(5000).then(answer);
    queue = queue.then(() => wait(serviceMs)).then(answer);
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', () => ok()));
  const port = (server.address() as AddressInfo).port;
  return {
    robots,
    hostMap: new Map(Array.from({ length: hosts }, (_, i) => [`h${i}.test`, `127.0.0.1:${port}`] as const)),
    seeds: Array.from({ length: hosts }, (_, i) => `http://h${i}.test/`),
    close: () => new Promise<void>((ok) => {
      for (const t of timers) clearTimeout(t);
      server.closeAllConnections();
      server.close(() => ok());
    }),
  };
}

/** `crawlSites` over the slow sites: no politeness delay, no metric, failures retried only after 10 minutes (after the test). */
async function crawl(sites: Awaited<ReturnType<typeof slowSites>>, maxRobotsFetches: number, timeoutMs: number) {
  const { dir, cleanup } = tempDir();
  const broker = new MemoryBroker();
  try {
    return await crawlSites({
      seeds: sites.seeds, hostMap: sites.hostMap, anyHost: true, partitions: 2, dataDir: dir, broker,
      weigh: uniformWeights, log: memoryLogger().log, crawlers: 4, rank: false, timeoutMs,
      policy: { minDelayMs: 0, maxRobotsFetches, retryDelayMs: 600_000 },
    });
  } finally {
    await broker.close();
    cleanup();
  }
}

test('a server slower than the fetch timeout for a burst of robots.txt requests: with them bounded every page is stored; unbounded, the blocked hosts are reported with the reason, never silently', { timeout: 180_000 }, async () => {
  // 250 hosts at 12 ms per answer: a burst of all 250 robots.txt requests keeps the last
  // ones queued for 3 s, three times the 1 s timeout (timers never fire early), so some time
  // out unless the policies spread the burst over more than 2 s. With 4 per policy (2
  // policies) and the crawlers' 32 page fetches, a request waits behind at most 39 others:
  // about 0.5 s.
  const HOSTS = 250;
  const bounded = await slowSites(HOSTS, 12);
  try {
    const r = await crawl(bounded, 4, 1000);
    assert.deepEqual(r.gaps, [], 'no URL left unfetched');
    assert.equal(r.pages, HOSTS);
    assert.equal(r.outlinks, HOSTS);
    assert.equal(bounded.robots.received, HOSTS, 'one robots.txt fetch per origin');
    assert.ok(bounded.robots.peak <= 2 * 4, `at most 4 robots.txt fetches in flight per policy (peak ${bounded.robots.peak})`);
  } finally {
    await bounded.close();
  }

  const unbounded = await slowSites(HOSTS, 12);
  try {
    const r = await crawl(unbounded, 100_000, 1000);
    assert.ok(unbounded.robots.peak > 2 * 4, `the burst reached the server (peak ${unbounded.robots.peak})`);
    const blocked = r.gaps.filter((g) => g.state === 'blocked');
    assert.ok(blocked.length > 0, `hosts blocked by a robots.txt that timed out: ${JSON.stringify(r.gaps)}`);
    for (const g of blocked) assert.match(g.reason, /^robots\.txt unreachable \(fetch failed: /);
    const blockedUrls = blocked.reduce((a, g) => a + g.urls, 0);
    // Every seed is a page (fetched, perhaps with its failure stored) or a blocked URL in the report.
    assert.equal(r.pages + blockedUrls, HOSTS, JSON.stringify(r.gaps));
    for (const g of r.gaps.filter((x) => x.state === 'fetched')) assert.match(g.reason, /^fetch failed: /);
    assert.equal(r.gaps.filter((g) => g.state !== 'blocked' && g.state !== 'fetched').length, 0, JSON.stringify(r.gaps));
  } finally {
    await unbounded.close();
  }
});

test('a robots.txt and a page that never answer in time: the crawl ends quiet and its result names both, with their reasons', { timeout: 120_000 }, async () => {
  const sites = await slowSites(4, 1, new Set(['h1.test/robots.txt', 'h2.test/']));
  try {
    const r = await crawl(sites, 4, 500);
    // h1.test/ waits for its robots.txt (RFC 9309 section 2.3.1.4: unreachable is complete
    // disallow), h2.test/ is stored with its failure (status 0, no links), retried later.
    assert.equal(r.pages, 3);
    assert.deepEqual(r.gaps.map((g) => ({ state: g.state, urls: g.urls, examples: g.examples })), [
      { state: 'blocked', urls: 1, examples: ['http://h1.test/'] },
      { state: 'fetched', urls: 1, examples: ['http://h2.test/'] },
    ]);
    assert.match(r.gaps[0]!.reason, /^robots\.txt unreachable \(fetch failed: .*Timeout/);
    assert.match(r.gaps[1]!.reason, /^fetch failed: .*(Timeout|timed out)/);
  } finally {
    await sites.close();
  }
});

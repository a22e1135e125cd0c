import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Packr } from 'msgpackr';
import { crawlSites } from '../src/cli/crawl.js';
import { uniformWeights } from '../src/actors/metrics/weights.js';
import { MemoryBroker } from '../src/runtime/brokers/memory.js';
import { QueryService } from '../src/query/queryService.js';
import { startWebIndex } from '../src/topology/webIndex.js';
import { ColumnFamilies, type GcRecord } from '../src/actors/partition/schema.js';
import type { WebIndex } from '../src/topology/webIndex.js';
import { memoryLogger, tempDir } from './kit/datasets.js';
import { StaticSiteServer } from './kit/staticSites.js';

const A = 'http://a.test';
const B = 'http://b.test';

/** a.test (partition 2 of 4) and b.test (partition 1), linking to each other. */
function writeSites(root: string): Map<string, string[]> {
  const graph = new Map<string, string[]>([
    [`${A}/index.html`, [`${A}/a1.html`, `${A}/a2.html`, `${B}/index.html`, `${B}/x.html`]],
    [`${A}/a1.html`, [`${A}/a2.html`, `${B}/x.html`]],
    [`${A}/a2.html`, [`${A}/index.html`, `${B}/y.html`]],
    [`${B}/index.html`, [`${B}/x.html`, `${B}/y.html`, `${A}/index.html`]],
    [`${B}/x.html`, [`${B}/y.html`, `${A}/a1.html`]],
    [`${B}/y.html`, [`${B}/index.html`]],
  ]);
  for (const [url, links] of graph) {
    const u = new URL(url);
    mkdirSync(join(root, u.host), { recursive: true });
    writeFileSync(join(root, u.host, u.pathname.slice(1)), `<!doctype html><title>${url}</title>${links.map((l) => `<a href="${l}">${l}</a>`).join(' ')}`);
  }
  return graph;
}

async function keysUnder(index: WebIndex, cf: string, prefix: string): Promise<number> {
  let n = 0;
  for (let p = 0; p < index.partitioner.partitions; p++) {
    for await (const _ of (await index.view(p)).store.iterate(cf, { prefix, keysOnly: true })) n++;
  }
  return n;
}

test('GC sweep removes pages not fetched since the cutoff with their backlinks and logs it; dropping a host removes every key under it and its links elsewhere', { timeout: 120_000 }, async () => {
  const { dir, cleanup } = tempDir();
  writeSites(join(dir, 'www'));
  const server = new StaticSiteServer([{ host: 'a.test', root: join(dir, 'www/a.test') }, { host: 'b.test', root: join(dir, 'www/b.test') }]);
  const port = await server.listen();
  const broker = new MemoryBroker();
  const common = { hostMap: server.hostMap(port), partitions: 4, dataDir: join(dir, 'data'), broker, weigh: uniformWeights, log: memoryLogger().log, policy: { minDelayMs: 0 } } as const;
  let index: WebIndex | undefined;
  try {
    // a.test first (b.test out of scope), then b.test in a second run on the same stores.
    const first = await crawlSites({ ...common, seeds: [`${A}/index.html`], rank: false });
    assert.equal(first.pages, 3);
    const cutoff = Date.now();
    await new Promise((ok) => setTimeout(ok, 5));
    const second = await crawlSites({ ...common, seeds: [`${B}/index.html`], keepOpen: true, rank: false });
    index = second.index!;
    assert.equal(second.pages, 6, 'b.test pages, out of scope before, are crawled now');
    const service = new QueryService({ partitioner: index.partitioner, view: (p) => index!.view(p), clock: index.system.clock, summaryTtlMs: 0 });
    const sources = async (url: string) => {
      const r = await service.backlinks(url, { limit: 100 });
      return r.found ? r.body.links.map((l) => l.url).sort() : [];
    };
    assert.deepEqual(await sources(`${B}/x.html`), [`${A}/a1.html`, `${A}/index.html`, `${B}/index.html`]);

    const reports = await index.gcSweep(cutoff);
    assert.equal(reports.reduce((a, r) => a + r.removed, 0), 3, 'the three a.test pages, fetched before the cutoff');
    assert.equal(reports.reduce((a, r) => a + r.linkRemovals, 0), 8, "4 + 2 + 2 outlinks");
    await index.quiescence();
    assert.deepEqual(await sources(`${B}/x.html`), [`${B}/index.html`], 'backlinks from removed pages are gone on the other partition');
    const gone = await service.page(`${A}/a1.html`);
    assert.equal(gone.found, false);
    assert.match(gone.found ? '' : gone.reason, /deleted/);
    assert.equal((await index.counts()).reduce((a, c) => a + c.pages, 0), 3);
    assert.equal((await index.counts()).reduce((a, c) => a + c.outlinks, 0), 6, 'b.test outlinks only: 3 + 2 + 1');
    const log: GcRecord[] = [];
    const pa = index.partitioner.forHost('a.test');
    for await (const [, v] of (await index.view(pa)).store.iterate(ColumnFamilies.gcLog)) log.push(new Packr({ useRecords: false }).unpack(v) as GcRecord);
    assert.deepEqual(log.map((r) => [r.url, r.reason]).sort(), [[`${A}/a1.html`, 'not-seen'], [`${A}/a2.html`, 'not-seen'], [`${A}/index.html`, 'not-seen']]);
    assert.ok((await index.converge({ thresholdFactor: 0 })).converged);
    const scores = await index.scores();
    assert.deepEqual(scores.map(([u]) => u).sort(), [`${B}/index.html`, `${B}/x.html`, `${B}/y.html`]);

    // Drop b.test: every key under its prefix, and its links into a.test.
    const drop = await index.dropHost('B.test');
    assert.deepEqual({ ...drop }, { host: 'b.test', pages: 3, outlinks: 6, backlinks: 4, frontier: 3 });
    await index.quiescence();
    for (const cf of [ColumnFamilies.pages, ColumnFamilies.outlinks, ColumnFamilies.backlinks, ColumnFamilies.ranks, ColumnFamilies.frontier, ColumnFamilies.pending]) {
      assert.equal(await keysUnder(index, cf, `${B}/`), 0, `no ${cf} key of b.test is left`);
    }
    assert.deepEqual(await sources(`${A}/index.html`), [], 'b.test/index.html -> a.test/index.html is removed on a.test\'s partition');
    assert.equal((await index.counts()).reduce((a, c) => a + c.pages, 0), 0);
    await assert.rejects(index.dropHost('a.test/x'), /not a host/);
    const before = server.requests.get(`${B}/index.html`);
    await index.seed([`${B}/index.html`]);
    await index.quiescence();
    assert.equal(server.requests.get(`${B}/index.html`), before, 'a dropped host is never requested again');
  } finally {
    await index?.stop();
    await broker.close();
    await server.close();
    cleanup();
  }
});

test('the GC sweeps by itself on its ctx.clock timer', { timeout: 60_000 }, async () => {
  const { dir, cleanup } = tempDir();
  writeSites(join(dir, 'www'));
  const server = new StaticSiteServer([{ host: 'a.test', root: join(dir, 'www/a.test') }]);
  const port = await server.listen();
  const broker = new MemoryBroker();
  const index = await startWebIndex({
    partitions: 2, dataDir: join(dir, 'data'), broker, weigh: uniformWeights, log: memoryLogger().log, crawlers: 1,
    fetcher: { hostMap: server.hostMap(port) },
    crawlPolicy: { minDelayMs: 0 },
    gc: { intervalMs: 100, maxAgeMs: 300 },
  });
  try {
    await index.seed([`${A}/index.html`]);
    await index.quiescence();
    const pages = async () => (await index.counts()).reduce((a, c) => a + c.pages, 0);
    // The three pages were fetched (so stored); on a loaded machine the GC may have swept some
    // already (older than 300 ms by the time the crawl is quiet), so the count is at most 3.
    const fetched = [...server.requests].filter(([url, n]) => url.startsWith(A) && url.endsWith('.html') && n > 0);
    assert.equal(fetched.length, 3, JSON.stringify([...server.requests]));
    assert.ok((await pages()) <= 3);
    const t0 = Date.now();
    while ((await pages()) > 0 && Date.now() - t0 < 10_000) await new Promise((ok) => setTimeout(ok, 50));
    assert.equal(await pages(), 0, 'pages older than 300 ms were swept within 10 s');
  } finally {
    await index.stop();
    await broker.close();
    await server.close();
    cleanup();
  }
});

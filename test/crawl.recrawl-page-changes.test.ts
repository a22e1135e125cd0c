import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { crawlSites } from '../src/cli/crawl.js';
import { uniformWeights } from '../src/actors/metrics/weights.js';
import { MemoryBroker } from '../src/runtime/brokers/memory.js';
import { QueryService } from '../src/query/queryService.js';
import { memoryLogger, tempDir } from './kit/datasets.js';
import { StaticSiteServer } from './kit/staticSites.js';

const A = 'http://a.test';
const B = 'http://b.test';

/** The two sites: page -> links (absolute URLs). a.test and b.test live on different partitions of 4. */
function siteGraph(): Map<string, string[]> {
  return new Map([
    [`${A}/index.html`, [1, 2, 3, 4, 5, 6].map((i) => `${A}/p${i}.html`).concat(`${B}/index.html`)],
    [`${A}/p1.html`, [`${A}/p2.html`, `${B}/x.html`]],
    [`${A}/p2.html`, [`${A}/p3.html`, `${B}/x.html`, `${B}/z.html`]],
    [`${A}/p3.html`, [`${A}/index.html`, `${B}/y.html`]],
    [`${A}/p4.html`, [`${A}/p5.html`]],
    [`${A}/p5.html`, [`${A}/p4.html`, `${A}/p6.html`]],
    [`${A}/p6.html`, []],
    [`${B}/index.html`, [`${B}/x.html`, `${B}/y.html`, `${B}/z.html`, `${A}/index.html`]],
    [`${B}/x.html`, [`${B}/y.html`]],
    [`${B}/y.html`, [`${B}/x.html`, `${B}/z.html`]],
    [`${B}/z.html`, [`${B}/index.html`]],
  ]);
}

function writeSites(root: string, graph: Map<string, string[]>): void {
  for (const [url, links] of graph) {
    const u = new URL(url);
    const dir = join(root, u.host);
    mkdirSync(dir, { recursive: true });
    // Relative links for the same host, absolute for the other: both resolve the same.
    const hrefs = links.map((l) => (new URL(l).host === u.host ? new URL(l).pathname.slice(1) : l));
    writeFileSync(join(dir, u.pathname.slice(1)), `<!doctype html><html><head><meta charset="utf-8"><title>${url}</title></head><body>${hrefs.map((h) => `<p><a href="${h}">${h}</a></p>`).join('')}</body></html>`);
  }
}

/** PageRank (d = 0.85, dangling mass spread uniformly) by power iteration, independent of the index. */
function pageRank(graph: Map<string, string[]>): Map<string, number> {
  const pages = [...graph.keys()];
  const n = pages.length;
  let x = new Map(pages.map((p) => [p, 1 / n]));
  for (let it = 0; it < 1000; it++) {
    const next = new Map(pages.map((p) => [p, (1 - 0.85) / n]));
    let dangling = 0;
    for (const p of pages) {
      const out = [...new Set(graph.get(p)!.filter((t) => graph.has(t)))];
      if (out.length === 0) dangling += x.get(p)!;
      else for (const t of out) next.set(t, next.get(t)! + (0.85 * x.get(p)!) / out.length);
    }
    for (const p of pages) next.set(p, next.get(p)! + (0.85 * dangling) / n);
    let delta = 0;
    for (const p of pages) delta += Math.abs(next.get(p)! - x.get(p)!);
    x = next;
    if (delta < 1e-14) break;
  }
  return x;
}

/** L1 distances to an independent PageRank: after the first crawl, after the change (filled by the first test). */
const l1Changed: number[] = [];

function l1Of(expected: Map<string, number>, got: Map<string, number>): number {
  let l1 = 0;
  for (const [url, s] of expected) l1 += Math.abs(s - (got.get(url) ?? 0));
  return l1;
}

test('a changed page, recrawled, moves its backlinks on the other partition and the scores re-converge; a page gone (410) twice leaves with its backlinks', { timeout: 300_000 }, async () => {
  const { dir, cleanup } = tempDir();
  const graph = siteGraph();
  writeSites(join(dir, 'www'), graph);
  const server = new StaticSiteServer([{ host: 'a.test', root: join(dir, 'www/a.test') }, { host: 'b.test', root: join(dir, 'www/b.test') }]);
  const port = await server.listen();
  const broker = new MemoryBroker();
  const result = await crawlSites({
    seeds: [`${A}/index.html`], allowHosts: ['b.test'], hostMap: server.hostMap(port),
    partitions: 4, dataDir: join(dir, 'data'), broker, weigh: uniformWeights, log: memoryLogger().log,
    policy: { minDelayMs: 0 }, keepOpen: true,
  });
  const index = result.index!;
  const service = new QueryService({ partitioner: index.partitioner, view: (p) => index.view(p), clock: index.system.clock, summaryTtlMs: 0 });
  const sources = async (url: string) => {
    const r = await service.backlinks(url, { limit: 1000 });
    return r.found ? new Set(r.body.links.map((l) => l.url)) : new Set<string>();
  };
  try {
    assert.notEqual(index.partitioner.forHost('a.test'), index.partitioner.forHost('b.test'), 'the two hosts are on different partitions');
    assert.equal(result.pages, graph.size);
    assert.ok(result.converged);
    assert.ok((await sources(`${B}/x.html`)).has(`${A}/p1.html`));
    assert.ok(!(await sources(`${B}/y.html`)).has(`${A}/p1.html`));
    const l1First = l1Of(pageRank(graph), new Map(await index.scores()));

    // p1 drops its link to b.test/x.html and links to b.test/y.html instead.
    graph.set(`${A}/p1.html`, [`${A}/p2.html`, `${B}/y.html`]);
    writeSites(join(dir, 'www'), graph);
    await index.recrawl([`${A}/p1.html`]);
    await index.quiescence();
    assert.equal(server.requests.get(`${A}/p1.html`), 2, 'p1 fetched again');
    assert.deepEqual(await sources(`${B}/x.html`), new Set([`${A}/p2.html`, `${B}/index.html`, `${B}/y.html`]), 'the removed link\'s backlink is gone');
    assert.ok((await sources(`${B}/y.html`)).has(`${A}/p1.html`), 'the added link\'s backlink is there');
    const again = await index.converge({ thresholdFactor: 0 });
    assert.ok(again.converged, 'scores re-converged');
    l1Changed.push(l1First, l1Of(pageRank(graph), new Map(await index.scores())));

    // p2 answers 410 twice: it is deleted and its backlinks on both partitions go.
    server.overrides.set(`${A}/p2.html`, 410);
    for (let i = 0; i < 2; i++) {
      await index.recrawl([`${A}/p2.html`]);
      await index.quiescence();
    }
    assert.equal(server.requests.get(`${A}/p2.html`), 3);
    const page = await service.page(`${A}/p2.html`);
    assert.equal(page.found, false);
    assert.match(page.found ? '' : page.reason, /deleted/);
    for (const target of [`${A}/p3.html`, `${B}/x.html`, `${B}/z.html`]) {
      assert.ok(!(await sources(target)).has(`${A}/p2.html`), `backlink p2 -> ${target} is gone`);
    }
    // Found by a new user: the next recrawl of a deleted page that answers 410 again stored
    // it as a live page (status 410, with a score), and the one after deleted it again.
    const pagesBefore = (await index.counts()).reduce((a, c) => a + c.pages, 0);
    await index.recrawl([`${A}/p2.html`]);
    await index.quiescence();
    assert.equal(server.requests.get(`${A}/p2.html`), 4);
    const still = await service.page(`${A}/p2.html`);
    assert.equal(still.found, false, 'a deleted page that answers 410 again stays deleted');
    assert.match(still.found ? '' : still.reason, /deleted/);
    assert.equal((await index.counts()).reduce((a, c) => a + c.pages, 0), pagesBefore);
    assert.ok((await index.converge({ thresholdFactor: 0 })).converged);
    const after = new Map(await index.scores());
    assert.ok(!after.has(`${A}/p2.html`), 'a deleted page has no score');
    assert.ok(Math.abs([...after.values()].reduce((a, b) => a + b, 0) - 1) < 1e-9);
  } finally {
    await index.stop();
    await broker.close();
    await server.close();
    cleanup();
  }
});

// The scores after the first crawl and after the change, against an independent PageRank
// (converge once stopped a round early here: the barrier lost a partition's mass; fixed).
test('scores after the recrawl equal PageRank of the changed graph (L1 <= 1e-6)', () => {
  assert.equal(l1Changed.length, 2, 'the first test ran');
  assert.ok(l1Changed[0]! <= 1e-6, `after the first crawl: L1 ${l1Changed[0]}`);
  assert.ok(l1Changed[1]! <= 1e-6, `after the change: L1 ${l1Changed[1]}`);
});

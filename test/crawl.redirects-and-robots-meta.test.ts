import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { crawlSites } from '../src/cli/crawl.js';
import { uniformWeights } from '../src/actors/metrics/weights.js';
import { MemoryBroker } from '../src/runtime/brokers/memory.js';
import { QueryService } from '../src/query/queryService.js';
import { memoryLogger, tempDir } from './kit/datasets.js';

const H = 'http://site.test';

test('through the pipeline: a redirect is a stored link whose target is crawled once; noindex pages keep their links, nofollow pages lose theirs; non-HTML is stored unparsed', { timeout: 60_000 }, async () => {
  const pages: Record<string, { status?: number; type?: string; headers?: Record<string, string>; body: string }> = {
    '/index.html': { body: '<a href="/old.html">old</a> <a href="/noindex.html">n</a> <a href="/nofollow.html">f</a> <a href="/data.csv">csv</a> <a href="/new.html">new</a>' },
    '/old.html': { status: 301, headers: { location: '/new.html#top' }, body: '' },
    '/new.html': { body: '<a href="/index.html">home</a>' },
    '/noindex.html': { body: '<html><head><meta name="robots" content="noindex"></head><body><a href="/hidden.html">hidden</a></body></html>' },
    '/hidden.html': { body: 'found through a noindex page' },
    '/nofollow.html': { body: '<meta name="robots" content="nofollow"><a href="/never.html">never</a>' },
    '/data.csv': { type: 'text/csv', body: 'a,b\n<a href="/never.html">not a link</a>\n' },
  };
  const hits = new Map<string, number>();
  const server = createServer((req, res) => {
    const path = req.url ?? '/';
    if (req.method === 'GET') hits.set(path, (hits.get(path) ?? 0) + 1); // HEAD: the fetcher checking a redirect chain
    const p = pages[path];
    if (!p) {
      res.writeHead(404, { 'content-type': 'text/plain' });
      res.end('none');
      return;
    }
    res.writeHead(p.status ?? 200, { 'content-type': p.type ?? 'text/html; charset=utf-8', ...p.headers });
    res.end(p.body);
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', () => ok()));
  const port = (server.address() as AddressInfo).port;
  const { dir, cleanup } = tempDir();
  const broker = new MemoryBroker();
  const result = await crawlSites({
    seeds: [`${H}/index.html`], hostMap: new Map([['site.test', `127.0.0.1:${port}`]]), partitions: 2, dataDir: dir,
    broker, weigh: uniformWeights, log: memoryLogger().log, policy: { minDelayMs: 0 }, keepOpen: true,
  });
  const index = result.index!;
  const service = new QueryService({ partitioner: index.partitioner, view: (p) => index.view(p), clock: index.system.clock });
  try {
    assert.equal(hits.get('/new.html'), 1, 'the redirect target is crawled once, though linked twice');
    assert.equal(hits.get('/old.html'), 1);
    assert.equal(hits.get('/hidden.html'), 1, 'a noindex page\'s links are followed');
    assert.equal(hits.get('/never.html'), undefined, 'neither a nofollow page\'s links nor text in a CSV are followed');
    const old = await service.page(`${H}/old.html`);
    assert.ok(old.found);
    assert.equal(old.body.status, 301);
    assert.match(old.body.error ?? '', /redirect \(301\) to http:\/\/site\.test\/new\.html/);
    const out = await service.outlinks(`${H}/old.html`);
    assert.ok(out.found);
    assert.deepEqual(out.body.links.map((l) => [l.url, l.rel]), [[`${H}/new.html`, ['redirect']]]);
    const back = await service.backlinks(`${H}/new.html`);
    assert.ok(back.found);
    // A 301 makes old.html an alias of new.html: index.html's link to it is a backlink of
    // new.html too, through the alias (docs/crawling.md, "Redirects and aliases").
    assert.deepEqual(back.body.links.map((l) => [l.url, l.via ?? []]).sort(), [[`${H}/index.html`, []], [`${H}/index.html`, [`${H}/old.html`]], [`${H}/old.html`, []]]);
    const noindex = await service.page(`${H}/noindex.html`);
    assert.ok(noindex.found);
    assert.match(noindex.body.error ?? '', /noindex \(meta robots\)/);
    assert.equal(noindex.body.contentHash, null, 'stored without content');
    assert.equal(noindex.body.counts.outlinks, 1);
    const nofollow = await service.page(`${H}/nofollow.html`);
    assert.ok(nofollow.found);
    assert.equal(nofollow.body.counts.outlinks, 0);
    assert.match(nofollow.body.error ?? '', /nofollow \(meta robots\)/, 'says why it has no links (found by a new user: it said nothing)');
    const csv = await service.page(`${H}/data.csv`);
    assert.ok(csv.found);
    assert.equal(csv.body.contentType, 'text/csv');
    assert.equal(csv.body.counts.outlinks, 0);
    assert.equal(result.pages, 6, '7 stored, the alias old.html not counted as a page');
  } finally {
    await index.stop();
    await broker.close();
    server.closeAllConnections();
    await new Promise<void>((ok) => server.close(() => ok()));
    cleanup();
  }
});

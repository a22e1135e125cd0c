import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { request } from 'undici';
import { crawlSites } from '../src/cli/crawl.js';
import { uniformWeights } from '../src/actors/metrics/weights.js';
import { MemoryBroker } from '../src/runtime/brokers/memory.js';
import { QueryService } from '../src/query/queryService.js';
import { startQueryServer } from '../src/query/server.js';
import { memoryLogger, tempDir } from './kit/datasets.js';
import { StaticSiteServer } from './kit/staticSites.js';

const A = 'http://a.test';
const B = 'http://b.test';

/** a.test: a hub linked by 30 pages of a.test and 10 of b.test. */
function writeSites(root: string): void {
  const pages = new Map<string, string[]>();
  pages.set(`${A}/index.html`, [...Array.from({ length: 30 }, (_, i) => `${A}/p${i}.html`), `${B}/index.html`]);
  for (let i = 0; i < 30; i++) pages.set(`${A}/p${i}.html`, [`${A}/hub.html`, ...(i < 3 ? [`${A}/p${i + 1}.html`] : [])]);
  pages.set(`${A}/hub.html`, [`${A}/index.html`, `${A}/p0.html`, `${B}/b0.html`, 'http://elsewhere.test/page']);
  pages.set(`${B}/index.html`, Array.from({ length: 10 }, (_, i) => `${B}/b${i}.html`));
  for (let i = 0; i < 10; i++) pages.set(`${B}/b${i}.html`, [`${A}/hub.html`]);
  for (const [url, links] of pages) {
    const u = new URL(url);
    mkdirSync(join(root, u.host), { recursive: true });
    writeFileSync(join(root, u.host, u.pathname.slice(1)), `<!doctype html><title>${url}</title><nav><a href="${links[0]}">first</a></nav>${links.slice(1).map((l) => `<a href="${l}">to ${l}</a>`).join(' ')}`);
  }
}

async function get(url: string, token?: string, method: 'GET' | 'DELETE' = 'GET'): Promise<{ status: number; body: any }> {
  const res = await request(url, { method, headers: token ? { authorization: `Bearer ${token}` } : {} });
  return { status: res.statusCode, body: await res.body.json() };
}

test('query API: documented shapes, paging, backlinks by source score, 400/401/404 with reasons', { timeout: 120_000 }, async () => {
  const { dir, cleanup } = tempDir();
  writeSites(join(dir, 'www'));
  const server = new StaticSiteServer([{ host: 'a.test', root: join(dir, 'www/a.test') }, { host: 'b.test', root: join(dir, 'www/b.test') }]);
  const port = await server.listen();
  const broker = new MemoryBroker();
  const result = await crawlSites({
    seeds: [`${A}/index.html`], allowHosts: ['b.test'], hostMap: server.hostMap(port), partitions: 4, dataDir: join(dir, 'data'),
    broker, weigh: uniformWeights, log: memoryLogger().log, policy: { minDelayMs: 0 }, keepOpen: true,
  });
  const index = result.index!;
  const service = new QueryService({ partitioner: index.partitioner, view: (p) => index.view(p), clock: index.system.clock });
  const api = await startQueryServer({ service, port: 0, token: 'secret', dropHost: (h) => index.dropHost(h) });
  const T = 'secret';
  const q = (path: string) => `${api.url}${path}`;
  try {
    assert.match(api.url, /^http:\/\/127\.0\.0\.1:\d+$/, 'listens on 127.0.0.1');
    assert.deepEqual((await get(q('/v1/health'))).body, { status: 'ok', partitions: 4 });

    // Bearer token.
    const no = await get(q(`/v1/page?url=${A}/hub.html`));
    assert.equal(no.status, 401);
    assert.equal(no.body.error, 'unauthorized');
    assert.equal((await get(q(`/v1/page?url=${A}/hub.html`), 'wrong')).status, 401);

    // A page.
    const page = await get(q(`/v1/page?url=${encodeURIComponent('HTTP://A.TEST:80/hub.html#top')}`), T);
    assert.equal(page.status, 200);
    assert.deepEqual(Object.keys(page.body).sort(), ['aliasOf', 'contentHash', 'contentType', 'counts', 'crawl', 'error', 'fetchedAt', 'host', 'partition', 'rank', 'score', 'status', 'url'].sort());
    assert.equal(page.body.url, `${A}/hub.html`, 'the URL is canonicalised');
    assert.equal(page.body.host, 'a.test');
    assert.equal(page.body.partition, index.partitioner.forHost('a.test'));
    assert.equal(page.body.status, 200);
    assert.match(page.body.contentType, /text\/html/);
    assert.match(page.body.fetchedAt, /^\d{4}-\d\d-\d\dT/);
    assert.deepEqual(page.body.counts, { outlinks: 4, backlinks: 40 });
    assert.equal(page.body.crawl.state, 'fetched');
    assert.equal(page.body.crawl.fetches, 1);
    assert.ok(page.body.score > 0 && page.body.score < 1);
    const top = await get(q('/v1/top/pages?limit=3'), T);
    assert.equal(top.body.pages, 43);
    assert.equal(top.body.top[0].url, `${A}/hub.html`, 'the hub is the best page');
    assert.equal(top.body.top[0].score, page.body.score);

    // Outlinks in document order, paged.
    const out = await get(q(`/v1/outlinks?url=${A}/hub.html&limit=2&offset=1`), T);
    assert.equal(out.body.total, 4);
    assert.deepEqual(out.body.links.map((l: any) => l.url), [`${A}/p0.html`, `${B}/b0.html`]);
    assert.deepEqual(Object.keys(out.body.links[0]).sort(), ['anchor', 'anchors', 'occurrences', 'position', 'rel', 'region', 'sameHost', 'sameSite', 'selfLink', 'score', 'url', 'weight'].sort());
    assert.equal((await get(q(`/v1/outlinks?url=${A}/hub.html&limit=10`), T)).body.links[0].region, 'nav');

    // Backlinks sorted by the source's score, paged without overlap.
    const all = await get(q(`/v1/backlinks?url=${A}/hub.html&limit=1000`), T);
    assert.equal(all.body.total, 40);
    const scores = all.body.links.map((l: any) => l.score);
    assert.deepEqual(scores, [...scores].sort((a: number, b: number) => b - a));
    assert.ok(scores[0] > scores[scores.length - 1], 'sources differ in score (p0..p3 are linked more)');
    const pageA = await get(q(`/v1/backlinks?url=${A}/hub.html&limit=15&offset=0`), T);
    const pageB = await get(q(`/v1/backlinks?url=${A}/hub.html&limit=15&offset=15`), T);
    assert.deepEqual([...pageA.body.links, ...pageB.body.links].map((l: any) => l.url), all.body.links.slice(0, 30).map((l: any) => l.url));

    // A host and the top hosts.
    const host = await get(q('/v1/hosts/A.test?limit=2'), T);
    assert.equal(host.status, 200);
    assert.equal(host.body.host, 'a.test');
    assert.equal(host.body.pages, 32);
    assert.equal(host.body.top.length, 2);
    assert.ok(host.body.authority > 0.5 && host.body.authority < 1);
    const hosts = await get(q('/v1/top/hosts'), T);
    assert.deepEqual(hosts.body.top.map((h: any) => h.host), ['a.test', 'b.test']);
    assert.ok(Math.abs(hosts.body.top[0].authority + hosts.body.top[1].authority - 1) < 1e-9, 'authorities sum to 1');
    // From the hosts index kept since the metric converged: the same as the host's own walk.
    assert.equal(hosts.body.source, 'index');
    assert.ok(Math.abs(hosts.body.top[0].authority - host.body.authority) < 1e-12);
    assert.equal(hosts.body.top[0].best, host.body.top[0].url);
    assert.ok(Math.abs(hosts.body.top[0].max - host.body.top[0].score) < 1e-12);

    // Errors with reasons.
    for (const [path, error, reason] of [
      ['/v1/page?url=ftp://a.test/x', 'invalid_url', /scheme ftp: is not crawled/],
      ['/v1/page?url=not%20a%20url', 'invalid_url', /does not parse/],
      ['/v1/page', 'invalid_request', /"url" is required/],
      [`/v1/backlinks?url=${A}/hub.html&limit=0`, 'invalid_request', /limit must be an integer in \[1, 1000\]/],
      [`/v1/backlinks?url=${A}/hub.html&limit=abc`, 'invalid_request', /"limit" must be a non-negative integer/],
      [`/v1/backlinks?url=${A}/hub.html&offset=-1`, 'invalid_request', /"offset"/],
      // Beyond 2^53 - 1 an offset was read rounded and answered 200 (found by a new user).
      [`/v1/backlinks?url=${A}/hub.html&offset=99999999999999999999999`, 'invalid_request', /offset must be an integer from 0 to 9007199254740991, got 1e\+23/],
      [`/v1/backlinks?url=${A}/hub.html&offset=9007199254740993`, 'invalid_request', /offset must be an integer from 0 to 9007199254740991/],
      ['/v1/hosts/a.test%2Fpath', 'invalid_request', /not a host/],
    ] as const) {
      const r = await get(q(path), T);
      assert.equal(r.status, 400, path);
      assert.equal(r.body.error, error, path);
      assert.match(r.body.reason, reason, path);
    }
    for (const [path, reason] of [
      [`/v1/page?url=${A}/nothing.html`, /no page stored for http:\/\/a\.test\/nothing\.html/],
      ['/v1/page?url=http://elsewhere.test/page', /known to the crawl frontier \(out-of-scope/],
      ['/v1/backlinks?url=http://unknown.test/', /no page stored/],
      ['/v1/hosts/unknown.test', /no live page of host unknown\.test/],
      ['/v1/nothing', /no route GET \/v1\/nothing/],
    ] as const) {
      const r = await get(q(path), T);
      assert.equal(r.status, 404, path);
      assert.equal(r.body.error, 'not_found');
      assert.match(r.body.reason, reason, path);
    }
    const ext = await get(q('/v1/backlinks?url=http://elsewhere.test/page'), T);
    assert.equal(ext.status, 200, 'an unfetched URL with backlinks has a backlinks answer');
    assert.deepEqual(ext.body.links.map((l: any) => l.url), [`${A}/hub.html`]);

    // Admin: drop a host.
    assert.equal((await get(q('/v1/hosts/b.test'), undefined, 'DELETE')).status, 401);
    const dropped = await get(q('/v1/hosts/b.test'), T, 'DELETE');
    assert.equal(dropped.status, 200);
    assert.equal(dropped.body.pages, 11);
    assert.equal((await get(q('/v1/hosts/b.test'), T)).status, 404);
    // A server that does not drop hosts (a cluster's) says so: 501, not a 404 (found by a new user).
    const readOnly = await startQueryServer({ service, port: 0, token: 'secret' });
    try {
      const r = await get(new URL('/v1/hosts/a.test', readOnly.url).href, T, 'DELETE');
      assert.equal(r.status, 501, JSON.stringify(r.body));
      assert.equal(r.body.error, 'not_implemented');
      assert.match(r.body.reason, /this server does not drop hosts: `shardflow serve --data-dir DIR` \(one process\) does/);
    } finally {
      await readOnly.close();
    }
  } finally {
    await api.close();
    await index.stop();
    await broker.close();
    await server.close();
    cleanup();
  }
});

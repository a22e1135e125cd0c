import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { extname, resolve } from 'node:path';
import { Parser } from 'htmlparser2';
import { request } from 'undici';
import { crawlSites } from '../src/cli/crawl.js';
import { reasonableSurferWeights } from '../src/actors/metrics/weights.js';
import { MemoryBroker } from '../src/runtime/brokers/memory.js';
import { QueryService } from '../src/query/queryService.js';
import { startQueryServer } from '../src/query/server.js';
import { memoryLogger, tempDir } from './kit/datasets.js';
import { StaticSiteServer, type StaticSite } from './kit/staticSites.js';

// Debian's documentation packages, each served on its own virtual host (installed by
// .ci/run: postgresql-doc-15 python3.11-doc python-django-doc).
const SITES: Array<StaticSite & { readonly rules: ReadonlyArray<readonly ['allow' | 'disallow', string]>; readonly chosen: string }> = [
  {
    host: 'postgresql.docs.test', root: '/usr/share/doc/postgresql-doc-15/html',
    robots: 'User-agent: *\nDisallow: /sql-\n',
    rules: [['disallow', '/sql-']],
    chosen: 'http://postgresql.docs.test/glossary.html',
  },
  {
    host: 'python.docs.test', root: '/usr/share/doc/python3.11/html',
    // Our group wins over `*`: /library/ is closed except os.html, and so is /_sources/.
    robots: 'User-agent: *\nDisallow: /library/\n\nUser-agent: shardflow\nDisallow: /library/\nDisallow: /_sources/\nAllow: /library/os.html\n',
    rules: [['disallow', '/library/'], ['disallow', '/_sources/'], ['allow', '/library/os.html']],
    chosen: 'http://python.docs.test/glossary.html',
  },
  {
    host: 'django.docs.test', root: '/usr/share/doc/python-django-doc/html',
    robots: 'User-agent: *\nDisallow: /ref/\nDisallow: /_modules/\n',
    rules: [['disallow', '/ref/'], ['disallow', '/_modules/']],
    chosen: 'http://django.docs.test/topics/index.html',
  },
];

const missing = SITES.filter((s) => !existsSync(s.root)).map((s) => s.root);

/** robots.txt as the test reads it: the longest matching rule wins, Allow wins a tie, default allow. */
function allowed(site: (typeof SITES)[number], url: URL): boolean {
  const path = url.pathname + url.search;
  let best: readonly ['allow' | 'disallow', string] | undefined;
  for (const rule of site.rules) {
    if (!path.startsWith(rule[1])) continue;
    if (!best || rule[1].length > best[1].length || (rule[1].length === best[1].length && rule[0] === 'allow')) best = rule;
  }
  return !best || best[0] === 'allow';
}

/** The file a URL names on its site, as the static server finds it. */
function fileOf(site: StaticSite, url: URL): string | undefined {
  let path: string;
  try {
    path = decodeURIComponent(url.pathname);
  } catch {
    return undefined;
  }
  let file = resolve(site.root, `.${path}`);
  try {
    if (statSync(file).isDirectory()) {
      if (!url.pathname.endsWith('/')) return undefined;
      file = resolve(file, 'index.html');
    }
    return statSync(file).isFile() ? file : undefined;
  } catch {
    return undefined;
  }
}

/** Distinct link targets of a page, read with htmlparser2 here, independently of the crawler. */
function linksOf(html: string, pageUrl: string): string[] {
  const hrefs: string[] = [];
  let base: string | undefined;
  let canonical: string | undefined;
  let nofollow = false;
  const parser = new Parser({
    onopentag(name, a) {
      if (name === 'base' && a.href !== undefined && base === undefined) base = a.href;
      if ((name === 'a' || name === 'area') && a.href !== undefined) hrefs.push(a.href);
      if (name === 'link' && a.href !== undefined && canonical === undefined && (a.rel ?? '').toLowerCase().split(/\s+/).includes('canonical')) canonical = a.href;
      if (name === 'meta' && (a.name ?? '').toLowerCase() === 'robots' && /nofollow|none/i.test(a.content ?? '')) nofollow = true;
    },
  }, { decodeEntities: true, lowerCaseTags: true, lowerCaseAttributeNames: true });
  parser.write(html);
  parser.end();
  const baseUrl = base !== undefined ? new URL(base.trim(), pageUrl).href : pageUrl;
  const out = new Set<string>();
  for (const href of [...(nofollow ? [] : hrefs), ...(canonical !== undefined ? [canonical] : [])]) {
    let u: URL;
    try {
      u = new URL(href.trim(), baseUrl);
    } catch {
      continue;
    }
    if ((u.protocol !== 'http:' && u.protocol !== 'https:') || u.username || u.password) continue;
    u.hash = '';
    const s = u.href.endsWith('?') ? u.href.slice(0, -1) : u.href;
    if (href === canonical && s === pageUrl) continue;
    out.add(s);
  }
  return [...out];
}

test('crawl of three Debian doc sites: every reachable page fetched once, robots.txt obeyed, backlink counts equal the HTML', { timeout: 900_000, skip: missing.length > 0 ? `not installed: ${missing.join(', ')} (apt-get install postgresql-doc-15 python3.11-doc python-django-doc)` : false }, async (t) => {
  // The crawl the test expects, computed from the files: breadth-first from each index page.
  const fetched = new Set<string>();
  const blocked = new Set<string>();
  const external = new Set<string>();
  const linkers = new Map<string, Set<string>>();
  for (const site of SITES) {
    const queue = [`http://${site.host}/index.html`];
    fetched.add(queue[0]!);
    while (queue.length > 0) {
      const url = queue.shift()!;
      const file = fileOf(site, new URL(url));
      if (!file || !['.html', '.htm'].includes(extname(file).toLowerCase())) continue;
      for (const target of linksOf(readFileSync(file, 'utf8'), url)) {
        let set = linkers.get(target);
        if (!set) linkers.set(target, (set = new Set()));
        set.add(url);
        const t = new URL(target);
        if (t.host !== site.host) external.add(target);
        else if (!allowed(site, t)) blocked.add(target);
        else if (!fetched.has(target)) {
          fetched.add(target);
          queue.push(target);
        }
      }
    }
  }
  for (const site of SITES) {
    assert.ok([...blocked].some((u) => new URL(u).host === site.host), `the HTML of ${site.host} links to pages its robots.txt disallows`);
  }

  const server = new StaticSiteServer(SITES);
  const port = await server.listen();
  const { dir, cleanup } = tempDir();
  const broker = new MemoryBroker();
  const result = await crawlSites({
    seeds: SITES.map((s) => `http://${s.host}/index.html`),
    hostMap: server.hostMap(port),
    partitions: 4,
    dataDir: dir,
    broker,
    weigh: reasonableSurferWeights,
    log: memoryLogger().log,
    crawlers: 4,
    policy: { minDelayMs: 0 },
    keepOpen: true,
  });
  const index = result.index!;
  t.diagnostic(`crawl ${result.crawlSeconds.toFixed(1)} s, metric ${result.rankSeconds.toFixed(1)} s: ${result.pages} pages, ${result.outlinks} links, frontier ${JSON.stringify(result.frontier)}`);
  try {
    const service = new QueryService({ partitioner: index.partitioner, view: (p) => index.view(p), clock: index.system.clock });
    const api = await startQueryServer({ service, port: 0 });
    try {
      // Fetched once each, and nothing else.
      const robots = SITES.map((s) => `http://${s.host}/robots.txt`);
      for (const r of robots) assert.equal(server.requests.get(r), 1, `${r} fetched once`);
      const requested = [...server.requests.keys()].filter((u) => !robots.includes(u));
      const twice = requested.filter((u) => server.requests.get(u) !== 1);
      assert.deepEqual(twice, [], 'no URL requested more than once');
      const unexpected = requested.filter((u) => !fetched.has(u));
      const never = [...fetched].filter((u) => !server.requests.has(u));
      assert.deepEqual(unexpected.slice(0, 10), [], 'only reachable, allowed URLs are requested');
      assert.deepEqual(never.slice(0, 10), [], 'every reachable, allowed URL is requested');
      assert.equal(requested.length, fetched.size);
      for (const u of requested) {
        const site = SITES.find((s) => s.host === new URL(u).host)!;
        assert.ok(allowed(site, new URL(u)), `${u} is allowed by robots.txt`);
      }
      assert.equal(result.frontier.blocked, blocked.size, 'every disallowed URL found is a blocked frontier entry');
      assert.equal(result.frontier['out-of-scope'], external.size, 'external links become out-of-scope frontier entries on their partitions');
      assert.equal(result.frontier.fetched, fetched.size);
      assert.ok(result.converged, 'the metric converged');

      // Backlink counts against the HTML.
      for (const site of SITES) {
        const expected = linkers.get(site.chosen)?.size ?? 0;
        assert.ok(expected >= 10, `${site.chosen} is linked from ${expected} pages`);
        const page = await getJson(`${api.url}/v1/page?url=${encodeURIComponent(site.chosen)}`);
        assert.equal(page.status, 200);
        assert.equal(page.body.counts.backlinks, expected, `backlinks of ${site.chosen}`);
        const links = await getJson(`${api.url}/v1/backlinks?url=${encodeURIComponent(site.chosen)}&limit=1000`);
        assert.equal(links.body.total, expected);
        assert.deepEqual(new Set(links.body.links.map((l: { url: string }) => l.url)), linkers.get(site.chosen));
        const scores = links.body.links.map((l: { score: number }) => l.score);
        assert.deepEqual(scores, [...scores].sort((a, b) => b - a), 'backlinks sorted by the source\'s score');
      }

      // A disallowed page and an external one: known to the frontier, not fetched.
      const someBlocked = [...blocked][0]!;
      const b = await getJson(`${api.url}/v1/page?url=${encodeURIComponent(someBlocked)}`);
      assert.equal(b.status, 404);
      assert.match(b.body.reason, /blocked: disallowed by robots\.txt/);
      const someExternal = [...external].find((u) => u.startsWith('https://www.postgresql.org/')) ?? [...external][0]!;
      const e = await getJson(`${api.url}/v1/page?url=${encodeURIComponent(someExternal)}`);
      assert.equal(e.status, 404);
      assert.match(e.body.reason, /out-of-scope/);
      const top = await getJson(`${api.url}/v1/top/hosts?limit=10`);
      assert.deepEqual(new Set(top.body.top.map((h: { host: string }) => h.host)), new Set(SITES.map((s) => s.host)));
    } finally {
      await api.close();
    }
  } finally {
    await index.stop();
    await broker.close();
    await server.close();
    cleanup();
  }
});

async function getJson(url: string): Promise<{ status: number; body: any }> {
  const res = await request(url);
  return { status: res.statusCode, body: await res.body.json() };
}

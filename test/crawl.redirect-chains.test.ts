import { test } from 'node:test';
import assert from 'node:assert/strict';
import { crawlPageSites, type PageAnswer } from './kit/pageSites.js';

const H = 'http://rd.test';
const to = (status: number, location: string): PageAnswer => ({ status, headers: { location, 'content-type': 'text/html' }, body: '' });

// RFC 9110 section 15.4: a client SHOULD detect and intervene in cyclical redirections.
// The cap is ours (10 by default, 3 here), a stated option.
test('a redirect loop and an over-long chain are errors on their pages, with no outlinks; a chain within the cap is crawled to its end', { timeout: 60_000 }, async () => {
  const pages: Record<string, PageAnswer> = {
    '/': { body: '<a href="/l1">l1</a> <a href="/l2">l2</a> <a href="/c0">chain</a> <a href="/ok0">ok</a> <a href="/self">self</a> <a href="/t">temp</a>' },
    '/l1': to(301, '/l2'),
    '/l2': to(302, 'http://rd.test/l1'),
    '/self': to(308, '/self#again'),
    '/ok0': to(301, '/ok1'),
    '/ok1': to(307, '/ok2'),
    '/ok2': to(308, '/ok3'),
    '/ok3': { body: '<a href="/">home</a>' },
    '/t': to(302, '/ok3'),
  };
  for (let i = 0; i < 30; i++) pages[`/c${i}`] = to(301, `/c${i + 1}`);
  pages['/c30'] = { body: 'end of a 30-hop chain' };
  const crawl = await crawlPageSites({ 'rd.test': pages }, [`${H}/`], { maxRedirects: 3 });
  try {
    for (const [path, error] of [
      ['/l1', `redirect loop: ${H}/l1 -> ${H}/l2 -> ${H}/l1 (301 to ${H}/l2)`],
      ['/l2', `redirect loop: ${H}/l2 -> ${H}/l1 -> ${H}/l2 (302 to ${H}/l1)`],
      ['/c0', `redirect chain longer than 3 hops: ${H}/c0 -> ${H}/c1 -> ${H}/c2 -> ... (301 to ${H}/c1)`],
      ['/self', 'redirect (308) to itself'],
    ] as const) {
      const page = await crawl.service.page(`${H}${path}`);
      assert.ok(page.found, path);
      assert.equal(page.body.error, error);
      assert.equal(page.body.counts.outlinks, 0, `${path} has no outlinks`);
    }
    for (const path of ['/c1', '/c5', '/c30']) assert.equal((await crawl.service.page(`${H}${path}`)).found, false, `${path} is not a page`);
    assert.equal(crawl.sites.hits('rd.test/c30'), 0, 'the over-long chain is not followed to its end');
    // A chain of 3 hops is within the cap: each hop is a page with one redirect link.
    for (const [path, next] of [['/ok0', '/ok1'], ['/ok1', '/ok2'], ['/ok2', '/ok3'], ['/t', '/ok3']] as const) {
      const out = await crawl.service.outlinks(`${H}${path}`);
      assert.ok(out.found, path);
      assert.deepEqual(out.body.links.map((l) => [l.url, l.rel]), [[`${H}${next}`, ['redirect']]]);
    }
    const end = await crawl.service.page(`${H}/ok3`);
    assert.ok(end.found);
    assert.equal(end.body.status, 200);
    // The loop soaks up no rank: its pages are dangling, each keeps only what reaches it.
    const top = await crawl.service.topPages({ limit: 3 });
    assert.ok(!top.top.slice(0, 2).some((p) => p.url === `${H}/l1` || p.url === `${H}/l2`), JSON.stringify(top.top));
  } finally {
    await crawl.done();
  }
});

// Found by a new user: 57 pages, one linking to 10,003 out-of-scope URLs (link targets that
// are not pages, each left a residual far under the floor) and a 301 -> 302 chain (its hops
// shrink the floor and weigh the bound): the metric ran 1,000 rounds that pushed nothing and
// the crawl exited 1. A round at the floor that pushes nothing is followed by one that pushes
// every nonzero residual.
test('many out-of-scope link targets and a redirect chain: the metric converges', { timeout: 120_000 }, async () => {
  const many = Array.from({ length: 10_000 }, (_, i) => `<a href="http://out${i % 50}.test/p${i}">x</a>`).join(' ');
  const pages: Record<string, PageAnswer> = {
    '/': { body: `<a href="/many">many</a> <a href="/r301">chain</a> <a href="/p1">p1</a>` },
    '/many': { body: many },
    '/r301': to(301, '/r302'),
    '/r302': to(302, '/end'),
    '/end': { body: '<a href="/">home</a> <a href="/p1">p1</a>' },
    '/p1': { body: '<a href="/">home</a> <a href="/r301">chain</a>' },
  };
  const crawl = await crawlPageSites({ 'rd.test': pages }, [`${H}/`]);
  try {
    assert.equal(crawl.result.converged, true);
    const top = await crawl.service.topPages({ limit: 10 });
    assert.ok(Math.abs(top.top.reduce((a, p) => a + p.score, 0) - 1) < 1e-6, 'the scores sum to 1');
  } finally {
    await crawl.done();
  }
});

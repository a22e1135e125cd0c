import { test } from 'node:test';
import assert from 'node:assert/strict';
import { crawlPageSites } from './kit/pageSites.js';

// Sites by registrable domain (URL Standard; Public Suffix List, private section included):
// www.shop.co.uk and blog.shop.co.uk are one site (co.uk is a public suffix);
// alice.github.io and bob.github.io are two (github.io is a public suffix in the private
// section); 127.0.0.1 is its own site.
const hosts = {
  'www.shop.co.uk': { '/': { body: '<a href="http://blog.shop.co.uk/">blog</a> <a href="http://alice.github.io/">alice</a> <a href="/a.html">a</a>' }, '/a.html': { body: '<a href="/">home</a>' } },
  'blog.shop.co.uk': { '/': { body: '<a href="http://www.shop.co.uk/">shop</a>' } },
  'alice.github.io': { '/': { body: '<a href="http://bob.github.io/">bob</a> <a href="/x.html">x</a>' }, '/x.html': { body: 'x' } },
  'bob.github.io': { '/': { body: '<a href="http://alice.github.io/">alice</a>' } },
};

test('sameSite link feature and per-site aggregates by registrable domain (public suffix list)', { timeout: 60_000 }, async () => {
  const crawl = await crawlPageSites(hosts, ['http://www.shop.co.uk/'], { anyHost: true });
  try {
    const out = await crawl.service.outlinks('http://www.shop.co.uk/');
    assert.ok(out.found);
    assert.deepEqual(out.body.links.map((l) => [l.url, l.sameHost, l.sameSite]), [
      ['http://blog.shop.co.uk/', false, true],
      ['http://alice.github.io/', false, false],
      ['http://www.shop.co.uk/a.html', true, true],
    ]);
    const alice = await crawl.service.outlinks('http://alice.github.io/');
    assert.ok(alice.found);
    assert.deepEqual(alice.body.links.map((l) => [l.url, l.sameHost, l.sameSite]), [
      ['http://bob.github.io/', false, false],
      ['http://alice.github.io/x.html', true, true],
    ]);
    const sites = await crawl.service.topSites();
    assert.equal(sites.sites, 3);
    const bySite = new Map(sites.top.map((s) => [s.site, s]));
    assert.deepEqual([...bySite.keys()].sort(), ['alice.github.io', 'bob.github.io', 'shop.co.uk']);
    assert.equal(bySite.get('shop.co.uk')!.hosts, 2);
    assert.equal(bySite.get('shop.co.uk')!.pages, 3);
    assert.equal(bySite.get('alice.github.io')!.pages, 2);
    const hostsTop = await crawl.service.topHosts();
    const authority = (h: string) => hostsTop.top.find((x) => x.host === h)!.authority;
    assert.ok(Math.abs(bySite.get('shop.co.uk')!.authority - (authority('www.shop.co.uk') + authority('blog.shop.co.uk'))) < 1e-12, 'a site\'s authority is its hosts\' sum');
    assert.ok(Math.abs(sites.top.reduce((t, s) => t + s.authority, 0) - 1) < 1e-9, 'authorities sum to 1');
    assert.equal(sites.source, 'index');
  } finally {
    await crawl.done();
  }
});

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { crawlPageSites } from './kit/pageSites.js';
import { runCli } from './kit/cliRun.js';

const txt = (body: string) => ({ headers: { 'content-type': 'text/plain; charset=utf-8' }, body });

// RFC 9309 section 2.2.1: the crawler matches its product token (letters, "_", "-")
// case-insensitively against User-agent lines and obeys the matching groups, else "*";
// section 2.2.2: "The /robots.txt URI is implicitly allowed."
test('robots.txt: the product token is its own option, matched case-insensitively; /robots.txt is allowed under Disallow: /', { timeout: 60_000 }, async () => {
  const userAgent = 'Mozilla/5.0 (compatible; Example-Crawler/2.1; +http://example.test/bot)';
  const crawl = await crawlPageSites({
    'a.test': {
      '/robots.txt': txt('User-agent: Mozilla\nDisallow: /\n\nUser-agent: EXAMPLE-crawler\nDisallow: /private/\nAllow: /private/ok.html\n\nUser-agent: *\nDisallow: /\n'),
      '/': { body: '<a href="/private/secret.html">s</a> <a href="/private/ok.html">ok</a> <a href="/pub.html">pub</a> <a href="http://b.test/robots.txt">b robots</a> <a href="http://b.test/x.html">b x</a>' },
      '/private/secret.html': { body: 'secret' },
      '/private/ok.html': { body: 'ok' },
      '/pub.html': { body: 'pub' },
    },
    'b.test': {
      '/robots.txt': txt('User-agent: *\nDisallow: /\n'),
      '/x.html': { body: 'never' },
    },
  }, ['http://a.test/'], { userAgent, robotsToken: 'Example-Crawler', allowHosts: ['b.test'] });
  try {
    assert.ok(crawl.sites.userAgents.every((ua) => ua === userAgent), 'the User-Agent header is sent as given');
    assert.equal(crawl.sites.hits('a.test/'), 1, 'not blocked by the Mozilla group nor *: the token is Example-Crawler');
    assert.equal(crawl.sites.hits('a.test/pub.html'), 1);
    assert.equal(crawl.sites.hits('a.test/private/ok.html'), 1, 'Allow wins a longer match');
    assert.equal(crawl.sites.hits('a.test/private/secret.html'), 0);
    assert.equal(crawl.sites.hits('b.test/x.html'), 0, 'Disallow: / blocks b.test');
    const robots = await crawl.service.page('http://b.test/robots.txt');
    assert.ok(robots.found, 'b.test/robots.txt is crawled as a page though every path is disallowed');
    assert.equal(robots.body.status, 200);
    assert.equal(robots.body.contentType, 'text/plain; charset=utf-8');
    const x = await crawl.service.page('http://b.test/x.html');
    assert.equal(x.found, false);
    assert.equal(crawl.result.frontier.blocked, 2);
  } finally {
    await crawl.done();
  }
});

test('shardflow crawl refuses a --robots-token RFC 9309 does not allow', { timeout: 60_000 }, async () => {
  const bad = await runCli(['crawl', '--seed', 'http://a.test/', '--robots-token', 'shardflow/1.0']);
  assert.notEqual(bad.code, 0);
  assert.match(bad.stderr, /robots token "shardflow\/1\.0": RFC 9309 section 2\.2\.1 allows only letters, "_" and "-"/);
});

// RFC 9309 section 2.2.2: "If a percent-encoded ASCII octet is encountered in the URI, it
// MUST be unencoded prior to comparison, unless it is a reserved character in the URI".
test('robots.txt rules with percent-escapes match the URLs they name in any spelling; reserved escapes stay distinct', { timeout: 60_000 }, async () => {
  const crawl = await crawlPageSites({
    'pe.test': {
      '/robots.txt': txt('User-agent: *\nDisallow: /%7euser/\nDisallow: /a%2Fb\nDisallow: /x%3ay\n'),
      '/': { body: '<a href="/~user/p.html">tilde</a> <a href="/%7Euser/q.html">escaped</a> <a href="/a/b">path</a> <a href="/a%2fb">escaped slash</a> <a href="/x%3Ay">colon</a> <a href="/~other/">other</a>' },
      '/~user/p.html': { body: 'p' },
      '/~user/q.html': { body: 'q' },
      '/a/b': { body: 'a/b' },
      '/a%2Fb': { body: 'a%2Fb' },
      '/x%3Ay': { body: 'x:y' },
      '/~other/': { body: 'other' },
    },
  }, ['http://pe.test/']);
  try {
    assert.equal(crawl.sites.requests.filter((r) => r.startsWith('pe.test/~user/')).length, 0, '/%7euser/ disallows /~user/');
    assert.equal(crawl.sites.hits('pe.test/a%2Fb'), 0);
    assert.equal(crawl.sites.hits('pe.test/x%3Ay'), 0);
    assert.equal(crawl.sites.hits('pe.test/a/b'), 1, '%2F is reserved: /a%2Fb does not disallow /a/b');
    assert.equal(crawl.sites.hits('pe.test/~other/'), 1);
    assert.equal(crawl.result.frontier.blocked, 4);
  } finally {
    await crawl.done();
  }
});

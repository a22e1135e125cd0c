import { test } from 'node:test';
import assert from 'node:assert/strict';
import { crawlPageSites } from './kit/pageSites.js';

const H = 'http://mr.test';
const meta = (content: string) => `<!doctype html><html><head><meta http-equiv="Refresh" content="${content}"><title>moved</title></head><body>moved</body></html>`;

// Inputs and expected targets from the HTML Living Standard's shared declarative refresh
// steps (https://html.spec.whatwg.org/multipage/semantics.html#shared-declarative-refresh-steps).
const cases: Array<[path: string, content: string, target: string | null]> = [
  ['/plain.html', '0; url=/t1.html', '/t1.html'],
  ['/upper.html', '5;URL=t2.html', '/t2.html'],
  ['/comma.html', '3,t3.html', '/t3.html'], // "," separates, "url=" is optional
  ['/spaces.html', '  1   url =  t4.html', '/t4.html'], // whitespace alone separates; spaces around "="
  ['/quoted.html', "0; url='t5.html'ignored", '/t5.html'], // the matching quote ends the URL
  ['/dquoted.html', '0; url=&quot;t6.html', '/t6.html'], // an unmatched quote is skipped
  ['/fraction.html', '.5; url=t7.html', '/t7.html'], // no digits before "." is a delay of 0
  ['/ur.html', '0; urx.html', '/urx.html'], // "ur" then not "l": the whole rest is the URL
  ['/self.html', '30', null], // no URL: the page refreshes itself, not a link
  ['/bad-delay.html', 'soon; url=/never1.html', null], // malformed: ignored
  ['/bad-sep.html', '5x; url=/never2.html', null], // a delay followed by neither ; , nor whitespace
  ['/empty.html', '', null],
];

test('<meta http-equiv=refresh> is parsed by the HTML standard\'s declarative refresh steps and its target is a link of rel refresh', { timeout: 60_000 }, async () => {
  const pages: Record<string, { body: string }> = {
    '/': { body: cases.map(([p]) => `<a href="${p}">${p}</a>`).join(' ') },
    '/both.html': { body: '<meta http-equiv="refresh" content="0;url=/t1.html"><meta http-equiv="refresh" content="0;url=/never3.html"><a href="/t1.html">t1</a>' },
    '/nofollow.html': { body: '<meta name="robots" content="nofollow"><meta http-equiv="refresh" content="0; url=/t8.html"><a href="/never4.html">x</a>' },
  };
  for (const [path, content] of cases) pages[path] = { body: meta(content) };
  for (const t of ['/t1.html', '/t2.html', '/t3.html', '/t4.html', '/t5.html', '/t6.html', '/t7.html', '/urx.html', '/t8.html']) pages[t] ??= { body: 'target' };
  pages['/'] = { body: `${pages['/']!.body} <a href="/both.html">both</a> <a href="/nofollow.html">nf</a>` };
  const crawl = await crawlPageSites({ 'mr.test': pages }, [`${H}/`]);
  try {
    for (const [path, content, target] of cases) {
      const out = await crawl.service.outlinks(`${H}${path}`);
      assert.ok(out.found, path);
      if (target === null) {
        assert.deepEqual(out.body.links.map((l) => l.url), [], `${path} (${content}): no link`);
        continue;
      }
      assert.deepEqual(out.body.links.map((l) => [l.url, l.rel, l.anchor]), [[`${H}${target}`, ['refresh'], '']], `${path} (${content})`);
      assert.equal(crawl.sites.hits(`mr.test${target}`), 1, `${target} crawled once`);
      const page = await crawl.service.page(`${H}${path}`);
      assert.ok(page.found);
      assert.equal(page.body.error, null, 'a refresh page is a valid page');
    }
    for (const n of [1, 2, 3, 4]) assert.equal(crawl.sites.hits(`mr.test/never${n}.html`), 0, `never${n}.html not followed`);
    const both = await crawl.service.outlinks(`${H}/both.html`);
    assert.ok(both.found);
    assert.deepEqual(both.body.links.map((l) => [l.url, l.occurrences, l.anchors]), [[`${H}/t1.html`, 2, ['t1', '']]], 'the first refresh counts, as one more occurrence of the link');
    const nofollow = await crawl.service.outlinks(`${H}/nofollow.html`);
    assert.ok(nofollow.found);
    assert.deepEqual(nofollow.body.links.map((l) => [l.url, l.rel]), [[`${H}/t8.html`, ['refresh']]], 'kept under nofollow, like a redirect');
  } finally {
    await crawl.done();
  }
});

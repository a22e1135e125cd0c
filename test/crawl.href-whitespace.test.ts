import { test } from 'node:test';
import assert from 'node:assert/strict';
import { crawlPageSites } from './kit/pageSites.js';

const H = 'http://ws.test';

// Inputs and expectations from the URL Standard's basic URL parser
// (https://url.spec.whatwg.org/#concept-basic-url-parser): leading and trailing C0 control
// or space (U+0000..U+0020) is removed, ASCII tab or newline (U+0009, U+000A, U+000D) is
// removed anywhere; any other code point is kept and percent-encoded with the path
// percent-encode set (UTF-8 bytes), e.g. U+00A0 is %C2%A0 and U+FEFF is %EF%BB%BF.
test('hrefs keep the whitespace the URL Standard keeps: &nbsp; and U+FEFF are part of the path, C0 and tab/newline are stripped', { timeout: 60_000 }, async () => {
  const crawl = await crawlPageSites({
    'ws.test': {
      '/dir/index.html': {
        body: '<a href="&nbsp;page.html">nbsp</a> <a href="&#xFEFF;page.html">bom</a> ' +
          '<a href=" &#x1F;\tpa&#10;ge.html&#13; ">c0</a> <a href="&#x2003;page.html">em space</a>',
      },
      '/dir/page.html': { body: 'plain' },
      '/dir/%C2%A0page.html': { body: 'nbsp' },
      '/dir/%EF%BB%BFpage.html': { body: 'bom' },
      '/dir/%E2%80%83page.html': { body: 'em space' },
    },
  }, [`${H}/dir/index.html`]);
  try {
    const out = await crawl.service.outlinks(`${H}/dir/index.html`);
    assert.ok(out.found);
    assert.deepEqual(out.body.links.map((l) => [l.anchor, l.url]), [
      ['nbsp', `${H}/dir/%C2%A0page.html`],
      ['bom', `${H}/dir/%EF%BB%BFpage.html`],
      ['c0', `${H}/dir/page.html`],
      ['em space', `${H}/dir/%E2%80%83page.html`],
    ]);
    for (const path of ['/dir/page.html', '/dir/%C2%A0page.html', '/dir/%EF%BB%BFpage.html', '/dir/%E2%80%83page.html']) {
      assert.equal(crawl.sites.hits(`ws.test${path}`), 1, `${path} fetched once`);
      const page = await crawl.service.page(`${H}${path}`);
      assert.ok(page.found, path);
      assert.equal(page.body.status, 200);
    }
  } finally {
    await crawl.done();
  }
});

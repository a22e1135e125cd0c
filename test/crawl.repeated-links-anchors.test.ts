import { test } from 'node:test';
import assert from 'node:assert/strict';
import { crawlPageSites } from './kit/pageSites.js';
import { reasonableSurferWeights } from '../src/actors/metrics/weights.js';

const H = 'http://rep.test';

const site = {
  'rep.test': {
    '/a.html': {
      body: '<nav><a href="/b.html">menu</a></nav><p><a href="/b.html">first <b>in text</b></a> <a href="/c.html">c</a> ' +
        '<a href="#top">top</a> <a href="/b.html#x"><img alt=""></a> <a href="a.html">self</a> <a href="/b.html" rel="nofollow">again</a></p>',
    },
    '/b.html': { body: '<a href="/a.html">back</a>' },
    '/c.html': { body: 'leaf' },
  },
};

test('every occurrence of a link is kept on its (source, target) edge: all anchor texts, a summed weight; self-links flagged', { timeout: 60_000 }, async () => {
  const crawl = await crawlPageSites(site, [`${H}/a.html`]);
  try {
    const back = await crawl.service.backlinks(`${H}/b.html`);
    assert.ok(back.found);
    assert.equal(back.body.total, 1, 'one edge from a.html');
    const edge = back.body.links[0]!;
    assert.equal(edge.url, `${H}/a.html`);
    assert.deepEqual(edge.anchors, ['menu', 'first in text', '', 'again']);
    assert.equal(edge.anchor, 'menu');
    assert.equal(edge.occurrences, 4);
    assert.equal(edge.weight, 4, 'uniform weights: one per occurrence');
    assert.equal(edge.selfLink, false);
    const out = await crawl.service.outlinks(`${H}/a.html`);
    assert.ok(out.found);
    assert.deepEqual(out.body.links.map((l) => [l.url, l.occurrences, l.selfLink, l.weight]), [
      [`${H}/b.html`, 4, false, 4],
      [`${H}/c.html`, 1, false, 1],
      [`${H}/a.html`, 2, true, 2],
    ]);
    const self = await crawl.service.backlinks(`${H}/a.html`);
    assert.ok(self.found);
    assert.deepEqual(self.body.links.map((l) => [l.url, l.selfLink, l.anchors]).sort(), [[`${H}/a.html`, true, ['top', 'self']], [`${H}/b.html`, false, ['back']]]);
  } finally {
    await crawl.done();
  }
});

test('with reasonable-surfer weights the edge weight is the sum of its occurrences\' weights', { timeout: 60_000 }, async () => {
  const crawl = await crawlPageSites(site, [`${H}/a.html`], { weigh: reasonableSurferWeights });
  try {
    const back = await crawl.service.backlinks(`${H}/b.html`);
    assert.ok(back.found);
    // a.html has 7 links; b.html occurs at indexes 0 (nav), 1, 4 (no anchor), 6 (nofollow).
    // Factors (reasonableSurferTable): nav 0.5, same host 0.7, no anchor 0.6, nofollow 0.1,
    // position 1.2 up to 0.2 then linear to 0.8 at 1.
    const pos = (i: number) => { const x = i / 7; return x <= 0.2 ? 1.2 : 1.2 + (0.8 - 1.2) * ((x - 0.2) / 0.8); };
    const expected = 0.7 * (0.5 * pos(0) + pos(1) + 0.6 * pos(4) + 0.1 * pos(6));
    assert.ok(Math.abs(back.body.links[0]!.weight - expected) < 1e-12, `${back.body.links[0]!.weight} vs ${expected}`);
  } finally {
    await crawl.done();
  }
});

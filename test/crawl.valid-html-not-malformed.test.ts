import { test } from 'node:test';
import assert from 'node:assert/strict';
import { crawlPageSites } from './kit/pageSites.js';

const H = 'http://v.test';

// Valid per the HTML Living Standard: void elements have no end tag (13.1.2), the end tags
// of html, head, body, p, li, dt, dd, option, tr, td, ... may be omitted (13.1.2.4), and
// foreign elements (SVG, MathML) may be self-closing (13.1.2, "Foreign elements").
const valid = '<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>ok</title><base href="/"><link rel=stylesheet href=s.css>' +
  '<meta name=viewport content="width=device-width"></head><body><p>one<br>two<img src=i.png alt=""><p>three' +
  '<ul><li><a href="a.html">a</a><li><a href="b.html">b</a></ul><dl><dt>t<dd>d</dl><select><option>x<option>y</select>' +
  '<table><colgroup><col><col></colgroup><tr><td>1<td>2<tr><th>3</table><svg viewBox="0 0 1 1"><path d="M0 0"/><circle r="1"/></svg>' +
  '<math><mi>x</mi><mspace width="1em"/></math><input type=text><hr><wbr><embed src=e.swf><video><source src=v.mp4><track src=t.vtt></video>';

test('valid HTML5 pages are not stored as malformed; a page whose elements are left open still is', { timeout: 60_000 }, async () => {
  const crawl = await crawlPageSites({
    'v.test': {
      '/': { body: valid },
      '/a.html': { body: '<!doctype html><title>a</title><p>minimal, valid<a href="/bad.html">bad</a>' },
      '/b.html': { body: '<!doctype html><title>b</title><p>x<div><span><a href="/">home</a></div><b>bold, never closed' },
      '/bad.html': { body: '<div><p><a href="/">first<a href="/a.html">second</a><table><tr><td>never closed' },
    },
  }, [`${H}/`]);
  try {
    for (const path of ['/', '/a.html']) {
      const page = await crawl.service.page(`${H}${path}`);
      assert.ok(page.found, path);
      assert.equal(page.body.error, null, `${path}: ${page.body.error}`);
    }
    // b.html: <span> closed by </div> (an end tag with that element open: parse error),
    // <b> open at end of file (not in the end-of-file list: parse error).
    const b = await crawl.service.page(`${H}/b.html`);
    assert.ok(b.found);
    assert.equal(b.body.error, 'malformed HTML: 2 implied end tags');
    // bad.html: the first <a> closed by the second, <table> and <div> open at end of file.
    const bad = await crawl.service.page(`${H}/bad.html`);
    assert.ok(bad.found);
    assert.equal(bad.body.error, 'malformed HTML: 3 implied end tags');
    assert.equal(bad.body.counts.outlinks, 2, 'its links are kept');
  } finally {
    await crawl.done();
  }
});

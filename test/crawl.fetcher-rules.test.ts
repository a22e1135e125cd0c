import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { HttpFetcher } from '../src/actors/crawler/httpFetch.js';
import { canonicalUrl } from '../src/actors/crawler/canonicalUrl.js';
import { extractLinks } from '../src/actors/crawler/extractLinks.js';
import { decodeBody } from '../src/actors/crawler/decodeBody.js';
import { isPublicAddress } from '../src/actors/crawler/publicAddress.js';

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

/** A local server answering per path; counts requests. */
async function serve(routes: Record<string, Handler>): Promise<{ port: number; hits: string[]; close: () => Promise<void> }> {
  const hits: string[] = [];
  const server = createServer((req, res) => {
    hits.push(req.url ?? '/');
    const h = routes[req.url ?? '/'];
    if (h) h(req, res);
    else {
      res.writeHead(404, { 'content-type': 'text/html' });
      res.end('nope');
    }
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', () => ok()));
  return {
    port: (server.address() as AddressInfo).port,
    hits,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((ok) => server.close(() => ok()));
    },
  };
}

const html = (body: string, type = 'text/html; charset=utf-8', headers: Record<string, string> = {}): Handler => (_req, res) => {
  res.writeHead(200, { 'content-type': type, ...headers });
  res.end(body);
};

test('canonicalUrl: lower-case host, default port, dot segments, fragment and empty query removed; other schemes and credentials refused', () => {
  assert.equal(canonicalUrl('HTTP://Example.COM.:80/a/./b/../c?#frag'), 'http://example.com/a/c');
  assert.equal(canonicalUrl('https://x.org:443'), 'https://x.org/');
  assert.equal(canonicalUrl('../d?q=2&a=1#x', 'http://h.test/a/b/c.html'), 'http://h.test/a/d?q=2&a=1');
  assert.equal(canonicalUrl('http://bücher.test/ä'), 'http://xn--bcher-kva.test/%C3%A4');
  assert.throws(() => canonicalUrl('mailto:a@b.c'), /scheme mailto: is not crawled/);
  assert.throws(() => canonicalUrl('http://user:pw@h.test/'), /credentials/);
  assert.throws(() => canonicalUrl('http://exa mple.com/'), /does not parse/);
});

test('extractLinks: <base href>, <area>, rel=canonical as a link, meta robots nofollow drops links and noindex is reported', () => {
  const page = 'http://h.test/dir/page.html';
  const a = extractLinks('<html><head><base href="/other/"><link rel="canonical" href="http://h.test/canon.html"></head><body><a href="x.html">X</a><map><area href="y.html" alt="Y"></map><a href="x.html#f">again</a></body></html>', page);
  assert.deepEqual(a.outlinks.map((l) => l.target), ['http://h.test/other/x.html', 'http://h.test/other/y.html', 'http://h.test/canon.html']);
  assert.deepEqual(a.outlinks[2]!.features.rel, ['canonical']);
  assert.equal(a.canonical, 'http://h.test/canon.html');
  const self = extractLinks(`<link rel="canonical" href="${page}"><a href="x.html">x</a>`, page);
  assert.deepEqual(self.outlinks.map((l) => l.target), ['http://h.test/dir/x.html'], 'a canonical naming the page itself is no link');
  const nf = extractLinks('<meta name="robots" content="noindex, nofollow"><a href="x.html">x</a>', page);
  assert.equal(nf.noFollow, true);
  assert.equal(nf.noIndex, true);
  assert.equal(nf.notFollowed, 1);
  assert.deepEqual(nf.outlinks, []);
  const other = extractLinks('<meta name="otherbot" content="nofollow"><a href="x.html">x</a>', page);
  assert.equal(other.outlinks.length, 1, 'directives for another crawler do not apply');
});

test('decodeBody: BOM, then header charset, then <meta charset>, then UTF-8', () => {
  const latin = Buffer.from('<p>caf\xe9</p>', 'latin1');
  assert.equal(decodeBody(latin, 'text/html; charset=ISO-8859-1').text, '<p>café</p>');
  const meta = Buffer.concat([Buffer.from('<meta http-equiv="Content-Type" content="text/html; charset=windows-1252"><p>'), Buffer.from([0x80]), Buffer.from('</p>')]);
  const m = decodeBody(meta, 'text/html');
  assert.equal(m.source, 'meta');
  assert.match(m.text, /€/);
  const sjis = decodeBody(Buffer.from([0x82, 0xa0]), 'text/html; charset=shift_jis');
  assert.equal(sjis.text, 'あ');
  const bom = decodeBody(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('é')]), 'text/html; charset=iso-8859-1');
  assert.equal(bom.source, 'bom');
  assert.equal(bom.text, 'é');
  const unknown = decodeBody(Buffer.from('é'), 'text/html; charset=x-unknown-thing');
  assert.equal(unknown.text, 'é');
  assert.match(unknown.note ?? '', /unknown charset/);
});

test('isPublicAddress: loopback, private, link-local, unique-local and mapped addresses are not public', () => {
  for (const a of ['127.0.0.1', '10.1.2.3', '172.16.0.1', '192.168.1.1', '169.254.169.254', '100.64.0.1', '0.0.0.0', '::1', '::', 'fc00::1', 'fe80::1', '::ffff:10.0.0.1', '::ffff:7f00:1', 'localhost']) {
    assert.equal(isPublicAddress(a), false, a);
  }
  for (const a of ['93.184.216.34', '8.8.8.8', '2606:4700::1111', '::ffff:8.8.8.8']) assert.equal(isPublicAddress(a), true, a);
});

test('HttpFetcher: redirects become links, charset, noindex, X-Robots-Tag, non-HTML, oversized, timeouts, robots.txt', { timeout: 60_000 }, async () => {
  const never: Handler = () => undefined; // answers nothing: the timeout ends it
  const s = await serve({
    '/moved': (_req, res) => { res.writeHead(301, { location: '/target.html#x' }); res.end(); },
    '/away': (_req, res) => { res.writeHead(302, { location: 'http://other.test/' }); res.end(); },
    '/latin.html': (_req, res) => { res.writeHead(200, { 'content-type': 'text/html; charset=iso-8859-1' }); res.end(Buffer.from('<a href="caf\xe9.html">caf\xe9</a>', 'latin1')); },
    '/noindex.html': html('<meta name="robots" content="noindex"><a href="a.html">a</a><a href="b.html">b</a>'),
    '/header-nofollow.html': html('<a href="a.html">a</a>', 'text/html', { 'x-robots-tag': 'nofollow' }),
    '/other-bot.html': html('<a href="a.html">a</a>', 'text/html', { 'x-robots-tag': 'googlebot: noindex' }),
    '/data.json': html('{"a":1}', 'application/json'),
    '/big.html': html(`<p>${'x'.repeat(5000)}</p>`),
    '/slow.html': never,
    // Found by a new user: a body cut off was a fetched page without links, next fetched a week later.
    '/cut.html': (req, res) => {
      res.writeHead(200, { 'content-type': 'text/html', 'content-length': '5000' });
      res.write('<a href="a.html">a</a>');
      setTimeout(() => req.socket.destroy(), 50);
    },
    '/robots.txt': (_req, res) => { res.writeHead(301, { location: '/real-robots.txt' }); res.end(); },
    '/real-robots.txt': html('User-agent: *\nDisallow: /private/\n', 'text/plain'),
  });
  const map = new Map([['site.test', `127.0.0.1:${s.port}`]]);
  const fetcher = new HttpFetcher({ hostMap: map, maxBodyBytes: 4000, timeoutMs: 500, totalTimeoutMs: 1500 });
  try {
    const moved = await fetcher.fetch('http://site.test/moved', 1);
    assert.equal(moved.status, 301);
    assert.deepEqual(moved.outlinks?.map((l) => [l.target, l.features.rel, l.features.redirect]), [['http://site.test/target.html', ['redirect'], 301]]);
    assert.match(moved.error ?? '', /redirect \(301\) to http:\/\/site\.test\/target\.html/);
    assert.equal(moved.body, undefined);
    assert.equal((await fetcher.fetch('http://site.test/away', 1)).outlinks?.[0]?.features.sameHost, false);

    const latin = await fetcher.fetch('http://site.test/latin.html', 1);
    assert.equal(latin.body, '<a href="café.html">café</a>');

    const noindex = await fetcher.fetch('http://site.test/noindex.html', 1);
    assert.equal(noindex.body, undefined, 'a noindex page is stored without content');
    assert.match(noindex.error ?? '', /noindex \(meta robots\)/);
    assert.deepEqual(noindex.outlinks?.map((l) => l.target), ['http://site.test/a.html', 'http://site.test/b.html'], 'its links are still followed');

    const hnf = await fetcher.fetch('http://site.test/header-nofollow.html', 1);
    assert.deepEqual(hnf.outlinks, []);
    assert.ok(hnf.body, 'indexable, so the body is kept');
    assert.ok((await fetcher.fetch('http://site.test/other-bot.html', 1)).body, 'X-Robots-Tag for another crawler is ignored');

    const json = await fetcher.fetch('http://site.test/data.json', 1);
    assert.equal(json.status, 200);
    assert.equal(json.contentType, 'application/json');
    assert.equal(json.body, undefined, 'non-HTML is stored without parsing');
    assert.equal(json.error, undefined);

    assert.match((await fetcher.fetch('http://site.test/big.html', 1)).error ?? '', /oversized: body exceeds 4000 bytes/);
    const t0 = performance.now();
    const slow = await fetcher.fetch('http://site.test/slow.html', 1);
    assert.equal(slow.status, 0);
    assert.match(slow.error ?? '', /fetch failed/);
    assert.ok(performance.now() - t0 < 5000, 'the timeout ends a fetch that gets no answer');

    const cut = await fetcher.fetch('http://site.test/cut.html', 1);
    assert.equal(cut.status, 0, 'an answer cut off is a failed fetch (retried), not a page');
    assert.match(cut.error ?? '', /body read failed \(HTTP 200\): /);
    assert.equal(cut.outlinks, undefined);

    const robots = await fetcher.fetchRobots('http://site.test', 7);
    assert.equal(robots.status, 200);
    assert.match(robots.body ?? '', /Disallow: \/private\//, 'robots.txt redirects are followed');
  } finally {
    await fetcher.close();
    await s.close();
  }
});

test('HttpFetcher refuses loopback and private addresses unless the host map names the host, before any traffic', { timeout: 30_000 }, async () => {
  const s = await serve({ '/': html('<p>secret</p>') });
  const fetcher = new HttpFetcher({ hostMap: new Map([['allowed.test', `127.0.0.1:${s.port}`]]), timeoutMs: 2000 });
  try {
    for (const url of [`http://127.0.0.1:${s.port}/`, `http://localhost:${s.port}/`, `http://[::1]:${s.port}/`, 'http://10.0.0.1/', 'http://169.254.169.254/latest/meta-data/', `http://0x7f.1:${s.port}/`]) {
      const r = await fetcher.fetch(canonicalUrl(url), 1);
      assert.equal(r.status, 0, url);
      assert.match(r.error ?? '', /refused: .* (is not a public address|resolves to non-public address)/, `${url}: ${r.error}`);
    }
    const robots = await fetcher.fetchRobots(`http://127.0.0.1:${s.port}`, 1);
    assert.match(robots.error ?? '', /refused/);
    assert.equal(s.hits.length, 0, 'no request reached the server');
    const ok = await fetcher.fetch('http://allowed.test/', 1);
    assert.equal(ok.status, 200, 'a mapped host may be on loopback');
    assert.equal(s.hits.length, 1);
  } finally {
    await fetcher.close();
    await s.close();
  }
});

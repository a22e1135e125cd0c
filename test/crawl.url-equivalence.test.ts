import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { crawlPageSites, PageSites } from './kit/pageSites.js';
import { runCli } from './kit/cliRun.js';
import { memoryLogger, tempDir } from './kit/datasets.js';
import { crawlGraph } from '../src/jobs/crawlGraph.js';
import { MemoryBroker } from '../src/runtime/brokers/memory.js';
import { uniformWeights } from '../src/actors/metrics/weights.js';

const H = 'http://eq.test';

// RFC 3986 section 6.2.2: %7E, %7e and ~ are equivalent (6.2.2.2: unreserved characters
// decoded; section 2.3 lists ALPHA DIGIT - . _ ~), %3a and %3A are equivalent (6.2.2.1:
// hex digits upper-cased), %2F and / are not (a reserved character is never decoded).
// Scheme and host case (6.2.2.1), dot segments (6.2.2.3) and the default port (6.2.3).
const site = {
  'eq.test': {
    '/': { body: '<a href="/s1.html">1</a> <a href="/s2.html">2</a> <a href="/s3.html">3</a> <a href="/s4.html">4</a>' },
    '/s1.html': { body: '<a href="/~user/">tilde</a> <a href="/a%3ab?q=%7e">q</a> <a href="/x%2Fy">slash escaped</a>' },
    '/s2.html': { body: '<a href="/%7Euser/">upper</a> <a href="/a%3Ab?q=~">q</a> <a href="/x/y">slash</a>' },
    '/s3.html': { body: '<a href="/%7euser/">lower</a> <a href="HTTP://EQ.TEST:80/a/../a%3Ab?q=%7E">q</a>' },
    '/s4.html': { body: '<a href="/%7E%75%73%65%72/">all escaped</a> <a href="http://eq.test/./~user/#top">dot</a>' },
    '/~user/': { body: 'home' },
    '/a%3Ab?q=~': { body: 'colon' },
    '/x%2Fy': { body: 'escaped slash' },
    '/x/y': { body: 'path' },
  },
};

test('one page per RFC 3986 section 6.2.2 normal form: ~, %7E and %7e are one page with all its backlinks; %2F stays distinct', { timeout: 60_000 }, async () => {
  const crawl = await crawlPageSites(site, [`${H}/`]);
  try {
    for (const form of [`${H}/~user/`, `${H}/%7Euser/`, `${H}/%7euser/`, `${H}/%7E%75ser/`]) {
      const back = await crawl.service.backlinks(form);
      assert.ok(back.found, form);
      assert.equal(back.body.url, `${H}/~user/`, 'the query API answers with the normal form');
      assert.deepEqual(back.body.links.map((l) => l.url).sort(), [`${H}/s1.html`, `${H}/s2.html`, `${H}/s3.html`, `${H}/s4.html`]);
    }
    const colon = await crawl.service.backlinks(`${H}/a%3ab?q=%7e`);
    assert.ok(colon.found);
    assert.equal(colon.body.url, `${H}/a%3Ab?q=~`);
    assert.deepEqual(colon.body.links.map((l) => l.url).sort(), [`${H}/s1.html`, `${H}/s2.html`, `${H}/s3.html`]);
    const escaped = await crawl.service.backlinks(`${H}/x%2fy`);
    assert.ok(escaped.found);
    assert.equal(escaped.body.url, `${H}/x%2Fy`);
    assert.deepEqual(escaped.body.links.map((l) => l.url), [`${H}/s1.html`]);
    const path = await crawl.service.backlinks(`${H}/x/y`);
    assert.ok(path.found);
    assert.deepEqual(path.body.links.map((l) => l.url), [`${H}/s2.html`]);
    assert.equal(crawl.sites.hits('eq.test/~user/'), 1, 'requested once, in normal form');
    assert.equal(crawl.sites.requests.filter((r) => /%7e/i.test(r)).length, 0);
    assert.equal(crawl.result.pages, 9);
  } finally {
    await crawl.done();
  }
});

test('a data dir written before the RFC 3986 key is refused with the reason; one written with it is crawled again', { timeout: 180_000 }, async () => {
  const sites = new PageSites(site);
  const port = await sites.listen();
  const { dir, cleanup } = tempDir();
  const data = join(dir, 'data');
  const crawl = () => runCli(['crawl', '--seed', `${H}/`, '--map', `eq.test=127.0.0.1:${port}`, '--delay-ms', '0', '--partitions', '2', '--data-dir', data, '--json', '--no-rank']);
  try {
    const first = await crawl();
    assert.equal(first.code, 0, first.stderr);
    assert.equal(JSON.parse(first.stdout).pages, 9);
    const again = await crawl();
    assert.equal(again.code, 0, again.stderr);
    assert.equal(JSON.parse(again.stdout).pages, 9, 'the same pages, none split');
    const file = join(data, 'shardflow.json');
    const record = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
    delete record.urlKey; // as a data dir written before the key form was recorded
    writeFileSync(file, JSON.stringify(record));
    const before = readFileSync(file, 'utf8');
    const old = await crawl();
    assert.equal(old.code, 1, old.stderr);
    assert.match(old.stderr, /holds pages keyed by the URL form used before RFC 3986 section 6\.2\.2/);
    assert.match(old.stderr, /fresh --data-dir/);
    assert.equal(readFileSync(file, 'utf8'), before, 'the data dir is left as it was');
  } finally {
    await sites.close();
    cleanup();
  }
});

test('a replayed graph whose URLs carry %7E and lower-case escapes is served under the normal form the crawler requests', { timeout: 120_000 }, async () => {
  const a = 'http://g.test/%7Ea/';
  const b = 'http://g.test/x%3ay';
  const graph = { pages: ['http://g.test/', a, b], links: new Map([['http://g.test/', [a, b]], [a, [b]], [b, ['http://g.test/']]]), linkCount: 4 };
  const { dir, cleanup } = tempDir();
  const broker = new MemoryBroker();
  try {
    const result = await crawlGraph({ graph, partitions: 2, dataDir: dir, broker, weigh: uniformWeights, log: memoryLogger().log });
    assert.equal(result.served.get(200), 3, 'every page of the graph is served (the one 404 is /robots.txt)');
    assert.equal(result.pages, 3);
    assert.deepEqual(result.scores.map(([u]) => u).sort(), ['http://g.test/', 'http://g.test/x%3Ay', 'http://g.test/~a/']);
  } finally {
    await broker.close();
    cleanup();
  }
});

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { Packr } from 'msgpackr';
import { crawlGraph } from '../src/jobs/crawlGraph.js';
import { readGraph } from '../src/replay/graphFile.js';
import { uniformWeights } from '../src/actors/metrics/weights.js';
import { MemoryBroker } from '../src/runtime/brokers/memory.js';
import { hostPartitioner } from '../src/actors/partition/hostPartitioner.js';
import { Store } from '../src/storage/store.js';
import { ColumnFamilies, partitionColumnFamilies, type PageRecord } from '../src/actors/partition/schema.js';
import { graphs, memoryLogger, tempDir } from './kit/datasets.js';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ActorSystem, FlowCounters, partitionId, producerId } from '../src/index.js';
import { topic } from '../src/runtime/brokers/index.js';
import { crawler } from '../src/actors/crawler/crawler.js';
import { HttpFetcher } from '../src/actors/crawler/httpFetch.js';
import { Namespaces } from '../src/actors/namespaces.js';
import { crawlRequestCodec, fetchCodec, type FetchResult } from '../src/actors/messages.js';

test('404, 500, malformed HTML, an oversized body and invalid URLs each get a stored or logged outcome and the crawl goes on', { timeout: 600_000 }, async () => {
  const graph = await readGraph(join(graphs.polblogs, 'pages.txt'), join(graphs.polblogs, 'links.tsv'));
  const [notFound, serverError, malformed, oversized] = graph.pages.slice(10, 14) as [string, string, string, string];
  const overrides = new Map([
    [notFound, { status: 404, body: 'gone' }],
    [serverError, { status: 500, body: 'boom' }],
    [malformed, { status: 200, body: `<html><body><div><p><a href="${graph.pages[0]}">first<a href="http://exa mple.com/">bad</a><table><tr><td>never closed` }],
    [oversized, { status: 200, body: `<html><body>${'x'.repeat(100_000)}</body></html>` }],
  ]);
  const { dir, cleanup } = tempDir();
  const broker = new MemoryBroker();
  const { log, lines } = memoryLogger();
  try {
    const result = await crawlGraph({
      graph, partitions: 4, dataDir: dir, broker, weigh: uniformWeights, log, overrides,
      maxBodyBytes: 50_000, extraSeeds: ['http://exa mple.com/', 'ftp://example.com/file'],
    });
    assert.equal(result.pages, graph.pages.length, 'every page has a record, bad ones included');
    assert.deepEqual(result.rejectedSeeds.map((s) => s.url), ['http://exa mple.com/', 'ftp://example.com/file']);
    assert.match(result.rejectedSeeds[0]!.reason, /does not parse/);
    assert.match(result.rejectedSeeds[1]!.reason, /scheme ftp: is not crawled/);
    assert.ok(result.converge.converged, 'the crawl went on to the metric');
    // The one URL the crawl left for a retry: the 500 (a 404 is an answer, not a failure).
    assert.deepEqual(result.gaps.map((g) => [g.state, g.reason, g.urls, g.examples]), [['fetched', 'HTTP 500', 1, [new URL(serverError).href]]]);

    const partitioner = hostPartitioner(4);
    const packr = new Packr({ useRecords: false });
    const record = async (url: string): Promise<PageRecord> => {
      const canonical = new URL(url).href;
      const store = await Store.open({ path: join(dir, `p${partitioner.forUrl(canonical)}`), columnFamilies: partitionColumnFamilies() });
      try {
        const v = await store.get(ColumnFamilies.pages, canonical);
        assert.ok(v, `record of ${canonical}`);
        return packr.unpack(v) as PageRecord;
      } finally {
        await store.close();
      }
    };
    const r404 = await record(notFound);
    assert.equal(r404.status, 404);
    assert.match(r404.error ?? '', /HTTP 404/);
    assert.equal(r404.outlinkCount, 0);
    const r500 = await record(serverError);
    assert.equal(r500.status, 500);
    assert.match(r500.error ?? '', /HTTP 500/);
    const rMal = await record(malformed);
    assert.equal(rMal.status, 200);
    assert.equal(rMal.outlinkCount, 1, 'the parseable link of the malformed page is kept');
    assert.match(rMal.error ?? '', /malformed HTML: \d+ implied end tags/);
    assert.match(rMal.error ?? '', /1 hrefs rejected/);
    const rBig = await record(oversized);
    assert.match(rBig.error ?? '', /oversized: body exceeds 50000 bytes/);
    assert.equal(rBig.outlinkCount, 0);
    for (const reason of [/HTTP 404/, /HTTP 500/, /oversized/]) {
      assert.ok(lines.some((l) => reason.test(String(l.reason ?? ''))), `a log line gives ${reason}`);
    }
  } finally {
    await broker.close();
    cleanup();
  }
});

test('a fetch result larger than one broker message is stored without its body, with the reason, and the crawl goes on', { timeout: 600_000 }, async () => {
  const graph = await readGraph(join(graphs.polblogs, 'pages.txt'), join(graphs.polblogs, 'links.tsv'));
  const big = graph.pages[20]!;
  const overrides = new Map([[big, { status: 200, body: `<html><body><a href="${graph.pages[0]}">a</a>${'y'.repeat(300_000)}</body></html>` }]]);
  const { dir, cleanup } = tempDir();
  // 256 KiB messages: the 300 KB page fits the fetcher's body limit, not a broker message.
  const broker = new MemoryBroker({ maxPayloadBytes: 256 * 1024 });
  const { log, lines } = memoryLogger();
  try {
    const result = await crawlGraph({ graph, partitions: 4, dataDir: dir, broker, weigh: uniformWeights, log, overrides });
    assert.equal(result.pages, graph.pages.length, 'every page has a record');
    assert.ok(result.converge.converged);
    const canonical = new URL(big).href;
    const store = await Store.open({ path: join(dir, `p${hostPartitioner(4).forUrl(canonical)}`), columnFamilies: partitionColumnFamilies() });
    try {
      const record = new Packr({ useRecords: false }).unpack((await store.get(ColumnFamilies.pages, canonical))!) as PageRecord;
      assert.equal(record.status, 200);
      assert.match(record.error ?? '', /oversized: the result of \d+ bytes does not fit one broker message \(maxPayloadBytes 262144\)/);
      assert.equal(record.outlinkCount, 0);
    } finally {
      await store.close();
    }
    assert.ok(lines.some((l) => l.msg === 'fetch result too large for one broker message: stored without its body'));
  } finally {
    await broker.close();
    cleanup();
  }
});

// Found by a new user on Pulsar (784,896-byte messages): the results of one delivery were cut
// into messages by a 4 MiB budget of body length, so several medium pages made one message
// the broker refused, and every page of it was stored without its body. The crawler now cuts
// by the broker's limit too, and sends a refused message again as two halves.
test('pages that fit a broker message each but not together keep their bodies', { timeout: 120_000 }, async () => {
  const pages = Array.from({ length: 6 }, (_, i) => `/m${i}.html`);
  const server = createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end(`<html><body><a href="/m0.html">m</a>${'z'.repeat(100_000)}${req.url}</body></html>`);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const broker = new MemoryBroker({ maxPayloadBytes: 256 * 1024 });
  const system = ActorSystem.create({ name: 'crawl-runs', logger: memoryLogger().log as never });
  try {
    const partitioner = hostPartitioner(1);
    const fetches = await broker.subscribe(topic(Namespaces.fetches, partitionId(0)), { subscription: 'test', type: 'exclusive' });
    system.spawn('crawler', crawler({ name: 'c', broker, partitioner, fetcher: new HttpFetcher({ hostMap: new Map([['m.test', `127.0.0.1:${port}`]]) }), counters: new FlowCounters(), log: memoryLogger().log }));
    const requests = await broker.producer(topic(Namespaces.crawlRequests, partitionId(0)), { producer: producerId('policy') });
    // One message, one delivery: the six results go out together.
    await requests.send(crawlRequestCodec.encode({ type: 'crawl-requests', urls: pages.map((p) => `http://m.test${p}`) }));
    const results: FetchResult[] = [];
    for (let i = 0; i < 100 && results.length < pages.length; i++) {
      for (const m of await fetches.receive(10, 500)) {
        assert.ok(m.payload.byteLength <= 256 * 1024);
        results.push(...(fetchCodec.decode(m.payload) as { readonly results: readonly FetchResult[] }).results);
        await fetches.ack(m);
      }
    }
    assert.deepEqual(results.map((r) => new URL(r.url).pathname).sort(), [...pages].sort());
    for (const r of results) {
      assert.equal(r.error, undefined, `${r.url}: ${r.error}`);
      assert.ok((r.body?.length ?? 0) > 100_000, `${r.url} kept its body`);
    }
  } finally {
    await system.terminate();
    await broker.close();
    server.close();
  }
});

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { uniformWeights } from '../src/actors/metrics/weights.js';
import { MemoryBroker } from '../src/runtime/brokers/memory.js';
import { rankGraph } from '../src/jobs/rankGraph.js';
import { startWebIndex } from '../src/topology/webIndex.js';
import { QueryService } from '../src/query/queryService.js';
import { InvalidUrlError } from '../src/index.js';
import type { WebGraph } from '../src/replay/graphFile.js';
import { memoryLogger, tempDir } from './kit/datasets.js';

// Graph files keep URLs as written (rankGraph): pages whose canonical forms differ from the
// file's, or coincide, are still found by the URL the file and the scores file give them.
const UPPER = 'http://A.TEST/';
const LOWER = 'http://a.test/';
const ENTITY = 'http://h.test/blog.aspx?name=jamie&#38;cat=48'; // canonical form drops "#38;cat=48"
const BACKSLASH = 'http://h.test/dir\\page.htm'; // canonical form reads "\" as "/"
const PLAIN = 'http://h.test/';

test('query API: pages of a graph file are found by the URL as the file writes it, and by the canonical URL when that is the key', { timeout: 120_000 }, async () => {
  const { dir, cleanup } = tempDir();
  const links = new Map<string, string[]>([
    [UPPER, [LOWER, ENTITY]],
    [LOWER, [PLAIN]],
    [ENTITY, [BACKSLASH, UPPER]],
    [BACKSLASH, [PLAIN]],
    [PLAIN, [UPPER, LOWER, ENTITY]],
  ]);
  const graph: WebGraph = { pages: [...links.keys()], links, linkCount: [...links.values()].reduce((n, l) => n + l.length, 0) };
  const dataDir = join(dir, 'data');
  const { log } = memoryLogger();
  const ranked = await rankGraph({ graph, partitions: 2, dataDir, broker: new MemoryBroker(), weigh: uniformWeights, log, tolerance: 1e-9 });
  const scores = new Map(ranked.scores);
  assert.equal(scores.size, 5, 'five pages: A.TEST and a.test are two');
  const index = await startWebIndex({ partitions: 2, dataDir, broker: new MemoryBroker(), weigh: uniformWeights, log, crawlers: 0 });
  try {
    const service = new QueryService({ partitioner: index.partitioner, view: (p) => index.view(p), clock: index.system.clock });
    const total = [...scores.values()].reduce((a, b) => a + b, 0);
    for (const url of [UPPER, LOWER, ENTITY, BACKSLASH, PLAIN]) {
      const page = await service.page(url);
      assert.ok(page.found, `${url} is found: ${page.found ? '' : page.reason}`);
      assert.equal(page.body.url, url, 'the key as written');
      assert.ok(Math.abs(page.body.score - scores.get(url)! / total) < 1e-9, `${url}: the score of the scores file`);
      const out = await service.outlinks(url);
      assert.ok(out.found);
      assert.deepEqual(out.body.links.map((l) => l.url).sort(), [...links.get(url)!].sort(), `${url}: its outlinks`);
      const back = await service.backlinks(url);
      assert.ok(back.found);
      assert.deepEqual(back.body.links.map((l) => l.url).sort(), [...links].filter(([, t]) => t.includes(url)).map(([s]) => s).sort(), `${url}: its backlinks`);
    }
    // Two pages, two answers: neither shadows the other.
    const upper = await service.page(UPPER);
    const lower = await service.page(LOWER);
    assert.ok(upper.found && lower.found);
    assert.notEqual(upper.body.score, lower.body.score);
    // Another spelling of a stored canonical key still finds it (the crawl's rule).
    const again = await service.page('HTTP://a.test:80/#top');
    assert.ok(again.found);
    assert.equal(again.body.url, LOWER);
    // A URL with no page under either key is a 404 with its reason; one that is no URL is refused.
    const missing = await service.page('http://A.TEST/nothing');
    assert.equal(missing.found, false);
    assert.match(missing.found ? '' : missing.reason, /no page stored for http:\/\/a\.test\/nothing/);
    await assert.rejects(service.page('mailto:x@a.test'), InvalidUrlError);
  } finally {
    await index.stop();
    cleanup();
  }
});

// Found by a new user: `/v1/top/hosts` listed hosts of a graph file (`www.mixed.test` from
// `http://WWW.Mixed.test/...`, `ünï.test`) that `/v1/hosts/HOST` answered 404 for, and gave
// `a.test` 5 pages where the host route found 4 (it read only the `http://a.test/` prefix).
test('query API: every host of /v1/top/hosts is found by the host route with the same pages and authority', { timeout: 120_000 }, async () => {
  const { dir, cleanup } = tempDir();
  const mixed = (i: number) => `http://WWW.Mixed.test/p${i}`;
  const idn = (i: number) => `http://ünï.test/p${i}`;
  const links = new Map<string, string[]>([
    [mixed(1), [mixed(2), idn(1)]],
    [mixed(2), [UPPER]],
    [idn(1), [idn(2), LOWER]],
    [idn(2), [mixed(1)]],
    [UPPER, [LOWER]],
    [LOWER, ['http://a.test:80/x']],
    ['http://a.test:80/x', [UPPER]],
  ]);
  const graph: WebGraph = { pages: [...links.keys()], links, linkCount: [...links.values()].reduce((n, l) => n + l.length, 0) };
  const dataDir = join(dir, 'data');
  const { log } = memoryLogger();
  const ranked = await rankGraph({ graph, partitions: 3, dataDir, broker: new MemoryBroker(), weigh: uniformWeights, log, tolerance: 1e-9 });
  assert.ok(ranked.converge.converged);
  const index = await startWebIndex({ partitions: 3, dataDir, broker: new MemoryBroker(), weigh: uniformWeights, log, crawlers: 0 });
  try {
    const service = new QueryService({ partitioner: index.partitioner, view: (p) => index.view(p), clock: index.system.clock });
    const top = await service.topHosts({ limit: 100 });
    assert.deepEqual(top.top.map((h) => [h.host, h.pages]).sort(), [['a.test', 2], ['a.test:80', 1], ['www.mixed.test', 2], ['ünï.test', 2]]);
    for (const h of top.top) {
      for (const asked of [h.host, h.host.toUpperCase()]) {
        const found = await service.host(asked);
        assert.ok(found.found, `${asked}: ${found.found ? '' : found.reason}`);
        assert.equal(found.body.host, h.host);
        assert.equal(found.body.pages, h.pages, `${asked}: pages`);
        assert.ok(Math.abs(found.body.authority - h.authority) < 1e-12, `${asked}: authority ${found.body.authority} against ${h.authority}`);
      }
    }
    const none = await service.host('nothing.test');
    assert.equal(none.found, false);
  } finally {
    await index.stop();
    cleanup();
  }
});

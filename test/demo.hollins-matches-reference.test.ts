import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { crawlGraph } from '../src/jobs/crawlGraph.js';
import { readGraph, readScores } from '../src/replay/graphFile.js';
import { canonicalUrl } from '../src/actors/crawler/canonicalUrl.js';
import { uniformWeights } from '../src/actors/metrics/weights.js';
import { MemoryBroker } from '../src/runtime/brokers/memory.js';
import { graphs, memoryLogger, tempDir, assertMatchesReference } from './kit/datasets.js';

test('the demo crawls all of hollins over HTTP and its PageRank matches the reference within L1 1e-6', { timeout: 600_000 }, async () => {
  const graph = await readGraph(join(graphs.hollins, 'pages.txt'), join(graphs.hollins, 'links.tsv'));
  const reference = new Map<string, number>();
  for (const [u, s] of await readScores(join(graphs.hollins, 'pagerank.tsv'))) reference.set(canonicalUrl(u), s);
  assert.equal(reference.size, 6012, 'hollins URLs stay distinct after canonicalisation');
  const { dir, cleanup } = tempDir();
  const broker = new MemoryBroker();
  try {
    const result = await crawlGraph({ graph, partitions: 16, dataDir: dir, broker, weigh: uniformWeights, log: memoryLogger().log });
    assert.equal(result.pages, 6012);
    assert.equal(result.outlinks, 23875);
    assert.equal(result.backlinks, 23875);
    assert.equal(result.served.get(200), 6012, 'every page fetched exactly once');
    assertMatchesReference(result, reference);
  } finally {
    await broker.close();
    cleanup();
  }
});

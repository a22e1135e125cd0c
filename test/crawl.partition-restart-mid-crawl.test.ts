import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { crawlGraph } from '../src/jobs/crawlGraph.js';
import { readGraph, readScores } from '../src/replay/graphFile.js';
import { canonicalUrl } from '../src/actors/crawler/canonicalUrl.js';
import { uniformWeights } from '../src/actors/metrics/weights.js';
import { MemoryBroker } from '../src/runtime/brokers/memory.js';
import { ChaosPolicy } from '../src/runtime/actor/chaosPolicy.js';
import { graphs, memoryLogger, tempDir, assertMatchesReference } from './kit/datasets.js';

test('partition actors killed in the middle of the crawl and of the metric are restarted by their supervisors and the counts and scores equal a run without faults', { timeout: 600_000 }, async () => {
  const graph = await readGraph(join(graphs.hollins, 'pages.txt'), join(graphs.hollins, 'links.tsv'));
  const reference = new Map<string, number>();
  for (const [u, s] of await readScores(join(graphs.hollins, 'pagerank.tsv'))) reference.set(canonicalUrl(u), s);
  // Seeded faults in the partition actors, about one message in 20: during the crawl
  // (crawl policies, indexers, backlinks) and during the metric rounds (metric actors).
  const chaos = ChaosPolicy.create({ rate: 0.05, seed: 7, kinds: ['indexer', 'backlinks', 'metrics'] });
  const { dir, cleanup } = tempDir();
  const broker = new MemoryBroker();
  const restarted = new Map<string, number>();
  try {
    const result = await crawlGraph({
      graph, partitions: 16, dataDir: dir, broker, weigh: uniformWeights, log: memoryLogger().log, chaos,
      onStarted(index) {
        index.system.events$.subscribe((e) => {
          if (e.type === '@shardflow.restarted') restarted.set(e.kind, (restarted.get(e.kind) ?? 0) + 1);
        });
      },
    });
    const during = (kind: string) => restarted.get(kind) ?? 0;
    // Which kind a seeded fault hits depends on message timing; with ~300 crawl batches at
    // 5% the chance that none of them is hit is about 1e-7.
    assert.ok(during('indexer') + during('backlinks') > 0, `an indexer or backlinks actor was killed mid-crawl and restarted (${JSON.stringify([...restarted])})`);
    assert.ok(during('metrics') > 0, `a metric actor was killed mid-metric and restarted (${JSON.stringify([...restarted])})`);
    assert.equal(result.pages, 6012);
    assert.equal(result.outlinks, 23875);
    assert.equal(result.backlinks, 23875);
    assertMatchesReference(result, reference);
  } finally {
    await broker.close();
    cleanup();
  }
});

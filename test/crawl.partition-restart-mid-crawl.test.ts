import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { crawlGraph } from '../src/jobs/crawlGraph.js';
import { l1Distance } from '../src/jobs/rankGraph.js';
import { readGraph, readScores } from '../src/replay/graphFile.js';
import { canonicalUrl } from '../src/actors/crawler/canonicalUrl.js';
import { uniformWeights } from '../src/actors/metrics/weights.js';
import { MemoryBroker } from '../src/runtime/brokers/memory.js';
import { InjectedFaultError } from '../src/errors.js';
import { graphs, memoryLogger, tempDir } from './kit/datasets.js';

test('partition actors killed in the middle of the crawl and of the metric are restarted and the results equal a run without faults', { timeout: 600_000 }, async () => {
  const graph = await readGraph(join(graphs.hollins, 'pages.txt'), join(graphs.hollins, 'links.tsv'));
  const reference = new Map<string, number>();
  for (const [u, s] of await readScores(join(graphs.hollins, 'pagerank.tsv'))) reference.set(canonicalUrl(u), s);
  // Kill, once each: an indexer and a backlinks actor while the crawl runs, a crawl
  // policy, and a metric actor during the rounds.
  const kills = new Map([
    ['/partitions/p3/indexer', 20],
    ['/partitions/p5/backlinks', 40],
    ['/partitions/p7/crawl-policy', 3],
    ['/partitions/p1/metrics', 150],
  ]);
  const seen = new Map<string, number>();
  const killed = new Set<string>();
  const beforeReceive = (path: string) => {
    const at = kills.get(path);
    if (at === undefined) return;
    const n = (seen.get(path) ?? 0) + 1;
    seen.set(path, n);
    if (n === at) {
      killed.add(path);
      throw new InjectedFaultError(`test kills ${path} at message ${n}`);
    }
  };
  const { dir, cleanup } = tempDir();
  const broker = new MemoryBroker();
  const restarts: string[] = [];
  try {
    const result = await crawlGraph({
      graph, partitions: 16, dataDir: dir, broker, weigh: uniformWeights, log: memoryLogger().log, beforeReceive,
      onStarted(index) {
        index.system.events$.subscribe((e) => { if (e.type === '@shardflow.restarted') restarts.push(e.path); });
      },
    });
    assert.deepEqual([...killed].sort(), [...kills.keys()].sort(), 'every planned kill happened');
    for (const path of kills.keys()) assert.ok(restarts.includes(path), `${path} was restarted by its supervisor`);
    assert.equal(result.pages, 6012);
    assert.equal(result.outlinks, 23875);
    assert.equal(result.backlinks, 23875);
    assert.ok(result.converge.converged);
    const l1 = l1Distance(new Map(result.scores), reference);
    assert.ok(l1 <= 1e-6, `L1 ${l1}`);
  } finally {
    await broker.close();
    cleanup();
  }
});

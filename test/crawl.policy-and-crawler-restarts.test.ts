import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { crawlGraph } from '../src/jobs/crawlGraph.js';
import { readGraph } from '../src/replay/graphFile.js';
import { uniformWeights } from '../src/actors/metrics/weights.js';
import { MemoryBroker } from '../src/runtime/brokers/memory.js';
import { ChaosPolicy } from '../src/runtime/actor/chaosPolicy.js';
import { graphs, memoryLogger, tempDir } from './kit/datasets.js';

test('crawl policies, crawlers and GCs killed during a crawl are restarted and the crawl still stores every page and link once', { timeout: 600_000 }, async () => {
  const graph = await readGraph(join(graphs.polblogs, 'pages.txt'), join(graphs.polblogs, 'links.tsv'));
  const reference = await (async () => {
    const { dir, cleanup } = tempDir();
    const broker = new MemoryBroker();
    try {
      return await crawlGraph({ graph, partitions: 4, dataDir: dir, broker, weigh: uniformWeights, log: memoryLogger().log, tolerance: 1e-6 });
    } finally {
      await broker.close();
      cleanup();
    }
  })();
  // About one message in 20 fails a crawl policy (seeds, pokes, fetch results, robots.txt
  // answers, timer ticks), a crawler (crawl request batches) or a GC.
  const chaos = ChaosPolicy.create({ rate: 0.05, seed: 11, kinds: ['crawl-policy', 'crawler', 'gc'] });
  const { dir, cleanup } = tempDir();
  const broker = new MemoryBroker();
  const restarted = new Map<string, number>();
  try {
    const result = await crawlGraph({
      graph, partitions: 4, dataDir: dir, broker, weigh: uniformWeights, log: memoryLogger().log, chaos, tolerance: 1e-6,
      onStarted(index) {
        index.system.events$.subscribe((e) => {
          if (e.type === '@shardflow.restarted') restarted.set(e.kind, (restarted.get(e.kind) ?? 0) + 1);
        });
      },
    });
    // A crawl that went quiet with URLs left for later (a robots.txt or page that timed out
    // under load) says so here, with the reason, before the counts differ.
    assert.deepEqual(reference.gaps, [], 'the reference crawl fetched every URL');
    assert.deepEqual(result.gaps, [], 'the crawl under faults fetched every URL');
    assert.ok((restarted.get('crawl-policy') ?? 0) > 0, `a crawl policy was restarted (${JSON.stringify([...restarted])})`);
    assert.ok((restarted.get('crawler') ?? 0) > 0, `a crawler was restarted (${JSON.stringify([...restarted])})`);
    assert.equal(result.pages, reference.pages);
    assert.equal(result.outlinks, reference.outlinks);
    assert.equal(result.backlinks, reference.backlinks);
    const fetched = [...result.served.entries()].filter(([status]) => status === 200).reduce((a, [, n]) => a + n, 0);
    assert.ok(fetched >= reference.served.get(200)!, 'every page was fetched (a crawler killed after fetching may fetch a page again)');
    assert.ok(result.converge.converged);
  } finally {
    await broker.close();
    cleanup();
  }
});

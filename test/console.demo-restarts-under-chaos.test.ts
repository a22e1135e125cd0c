import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { canonicalUrl } from '../src/actors/crawler/canonicalUrl.js';
import { uniformWeights } from '../src/actors/metrics/weights.js';
import { chaosKinds } from '../src/cli/options.js';
import { crawlGraph } from '../src/jobs/crawlGraph.js';
import { l1Distance } from '../src/jobs/rankGraph.js';
import { readGraph, readScores } from '../src/replay/graphFile.js';
import { ChaosPolicy } from '../src/runtime/actor/index.js';
import { MemoryBroker } from '../src/runtime/brokers/memory.js';
import type { TreeNode } from '../src/runtime/inspection.js';
import { listenInspection } from '../src/runtime/inspection/server.js';
import { graphs, memoryLogger, tempDir } from './kit/datasets.js';

/** Total restarts over a tree snapshot. */
function restartsOf(node: TreeNode): number {
  return node.children.reduce((sum, child) => sum + restartsOf(child), node.restarts);
}

test('the demo under --chaos 0.01 shows restarts on the endpoint while it runs and still matches the reference', { timeout: 600_000 }, async () => {
  const graph = await readGraph(join(graphs.hollins, 'pages.txt'), join(graphs.hollins, 'links.tsv'));
  const reference = new Map<string, number>();
  for (const [u, s] of await readScores(join(graphs.hollins, 'pagerank.tsv'))) reference.set(canonicalUrl(u), s);
  assert.equal(reference.size, 6012, 'hollins URLs stay distinct after canonicalisation');

  const { dir, cleanup } = tempDir();
  const broker = new MemoryBroker();
  const endpoint = await listenInspection();
  /** Restart totals read from GET /tree while the job ran, in order. */
  const seen: number[] = [];
  let lagSeries = 0;
  let running = true;
  const poll = (async () => {
    while (running) {
      const response = await fetch(`${endpoint.url}/tree`);
      if (response.status === 200) seen.push(restartsOf((await response.json()) as TreeNode));
      else await response.body?.cancel(); // 503 until the job attached its system
      if (lagSeries === 0 && seen.length > 0) {
        const metrics = await (await fetch(`${endpoint.url}/metrics`)).text();
        lagSeries = metrics.match(/^shardflow_broker_topic_lag_messages\{namespace="[a-z-]+",partition="\d+"\} \d+$/gm)?.length ?? 0;
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  })();
  try {
    const result = await crawlGraph({
      graph,
      partitions: 16,
      dataDir: dir,
      broker,
      weigh: uniformWeights,
      log: memoryLogger().log,
      chaos: ChaosPolicy.create({ rate: 0.01, seed: 42, kinds: chaosKinds }),
      onStarted: (index) => endpoint.attach(index.system, { flow: index.counters, topicFlow: index.topicFlow }),
    });
    running = false;
    await poll;

    assert.ok(seen.length > 0, 'the endpoint served /tree while the job ran');
    assert.ok(seen.some((n) => n > 0), `restarts > 0 seen during the run (polls: ${seen.length}, last total ${seen.at(-1)})`);
    assert.ok(lagSeries > 0, 'per-topic lag series on /metrics during the run');
    assert.match(result.tree, /restarts=[1-9]/, 'the final tree has restarts too');

    assert.equal(result.pages, 6012);
    assert.equal(result.outlinks, 23875);
    assert.equal(result.backlinks, 23875);
    assert.ok(result.converge.converged);
    const l1 = l1Distance(new Map(result.scores), reference);
    assert.ok(l1 <= 1e-6, `L1 ${l1} to the reference under chaos`);
  } finally {
    running = false;
    await poll.catch(() => undefined); // its error, if any, is secondary to the job's
    await endpoint.close();
    await broker.close();
    cleanup();
  }
});

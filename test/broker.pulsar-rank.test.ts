import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { test } from 'node:test';
import { uniformWeights } from '../src/actors/metrics/weights.js';
import { l1Distance, rankGraph } from '../src/jobs/rankGraph.js';
import { readGraph, readScores } from '../src/replay/graphFile.js';
import { PulsarBroker } from '../src/runtime/brokers/pulsar/broker.js';
import { pulsarUnavailable } from './kit/brokers.js';
import { graphs, memoryLogger, tempDir } from './kit/datasets.js';

/**
 * The whole rank pipeline over Pulsar (failover subscriptions per partition topic, push
 * consumption, producers with explicit sequences, 4 namespaces x 4 partitions): polblogs
 * must load completely and converge to the reference PageRank. Skips when Pulsar is not
 * reachable, unless SHARDFLOW_REQUIRE_BROKERS=1 (then it fails).
 */
const webUrl = process.env.SHARDFLOW_PULSAR_URL ?? 'http://127.0.0.1:8080';

test('rankGraph over Pulsar on polblogs with 4 partitions matches the reference within L1 1e-6', { timeout: 300_000 }, async (t) => {
  const reason = await pulsarUnavailable(webUrl);
  if (reason) {
    if (process.env.SHARDFLOW_REQUIRE_BROKERS === '1') assert.fail(`pulsar is required (SHARDFLOW_REQUIRE_BROKERS=1) but unavailable: ${reason}`);
    t.skip(`pulsar unavailable: ${reason}`);
    return;
  }
  const { dir, cleanup } = tempDir();
  // A fresh tenant, as `--broker pulsar://` does: never consume what an earlier run left.
  const broker = await PulsarBroker.connect({ webUrl, tenant: `shardflow-test-rank-${randomUUID().slice(0, 8)}`, connectTimeoutMs: 15_000 });
  try {
    const graph = await readGraph(join(graphs.polblogs, 'pages.txt'), join(graphs.polblogs, 'links.tsv'));
    const result = await rankGraph({
      graph,
      partitions: 4,
      dataDir: join(dir, 'data'),
      broker,
      weigh: uniformWeights,
      tolerance: 1e-9,
      log: memoryLogger().log,
    });
    assert.equal(result.pages, 1489);
    assert.equal(result.outlinks, 18938);
    assert.equal(result.backlinks, 18938);
    assert.ok(result.converge.converged, 'converged');
    const reference = await readScores(join(graphs.polblogs, 'pagerank.tsv'));
    const got = new Map(result.scores);
    assert.equal(got.size, reference.size, 'every page ranked');
    const l1 = l1Distance(got, reference);
    assert.ok(l1 <= 1e-6, `L1 ${l1}`);
    t.diagnostic(`load ${result.loadSeconds.toFixed(2)} s, converge ${result.convergeSeconds.toFixed(2)} s, L1 ${l1}`);
  } finally {
    await broker.close();
    cleanup();
  }
});

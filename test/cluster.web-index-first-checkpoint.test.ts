import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { FencedError, MemoryBroker, stageCheckpointKey, waitStreamsQuiet, type PartitionFence, type StageRestore, type StreamFlowReport } from '../src/index.js';
import { openCheckpointStore } from '../src/storage/index.js';
import { sumCounts, type PartitionCounts } from '../src/actors/metrics/metricActor.js';
import { uniformWeights } from '../src/actors/metrics/weights.js';
import { graphPages, publishFetches } from '../src/jobs/graphLoader.js';
import { readGraph } from '../src/replay/graphFile.js';
import { WEB_INDEX_STAGE, webIndexStreamReceiver } from '../src/topology/clusterProtocol.js';
import { webIndexApplication, type WebIndexHost } from '../src/topology/webIndexApplication.js';
import { graphs, memoryLogger, tempDir } from './kit/datasets.js';

/**
 * Issue 16: a web-index partition's first start puts a checkpoint before it consumes
 * anything. An owner that dies before its first periodic checkpoint used to leave a partition
 * "started by an earlier owner" with no checkpoint, which a next owner with its own data dir
 * must refuse (a cluster job then waits for ever); now the next owner restores that first
 * checkpoint and the broker delivers again everything, since nothing was released.
 */

class TestFence implements PartitionFence {
  constructor(readonly epoch: number, readonly startedBefore = false) {}
  check(): void {
    if (this.epoch < 0) throw new FencedError('never', this.epoch);
  }
}

const PARTITIONS = 4;
const ps = Array.from({ length: PARTITIONS }, (_, p) => p);
const flows = (host: WebIndexHost) => () => Promise.all(ps.map((p) => host.ask(WEB_INDEX_STAGE, p, { kind: 'flow' }) as Promise<StreamFlowReport>));
const counts = (host: WebIndexHost) => Promise.all(ps.map((p) => host.ask(WEB_INDEX_STAGE, p, { kind: 'metrics', message: { type: 'counts' } }) as Promise<PartitionCounts>));

test('a partition whose first owner stops before any periodic checkpoint (with its input unread) is restored by the next owner on another data dir, which then indexes all of it', { timeout: 180_000 }, async () => {
  const graph = await readGraph(join(graphs.polblogs, 'pages.txt'), join(graphs.polblogs, 'links.tsv'));
  const dir = tempDir('sf-wi-first-ckpt-');
  const checkpoints = openCheckpointStore(pathToFileURL(join(dir.dir, 'checkpoints')).href);
  const broker = new MemoryBroker();
  const app = webIndexApplication({ partitions: PARTITIONS, weigh: uniformWeights, log: memoryLogger().log });
  const restores: StageRestore[] = [];
  // An interval far longer than the test: no periodic checkpoint comes.
  const checkpointing = { store: checkpoints, keyPrefix: 'wi-first', intervalMs: 600_000, onRestored: (r: StageRestore) => restores.push(r) };
  const first = await app.startHost({ broker, dataDir: join(dir.dir, 'a'), checkpoints: checkpointing });
  let second: WebIndexHost | undefined;
  try {
    for (const p of ps) await first.startPartition(WEB_INDEX_STAGE, p, new TestFence(1));
    for (const p of ps) {
      const latest = await checkpoints.latest(stageCheckpointKey('wi-first', WEB_INDEX_STAGE, p));
      assert.ok(latest !== undefined, `partition ${p} has its first checkpoint as soon as its start returns`);
    }
    // The first owner goes away without a hand-back checkpoint (as a crash leaves it).
    for (const p of ps) await first.stopPartition(WEB_INDEX_STAGE, p);
    await first.stop();

    const sent = await publishFetches(broker, first.partitioner, first.counters, graphPages(graph));
    second = await app.startHost({ broker, dataDir: join(dir.dir, 'b'), checkpoints: checkpointing });
    for (const p of ps) await second.startPartition(WEB_INDEX_STAGE, p, new TestFence(2, true));
    assert.deepEqual(restores.map((r) => [r.partition, r.reason, r.ownerEpoch]).sort(), ps.map((p) => [p, 'missing', 1]));
    await waitStreamsQuiet(flows(second), { receiver: webIndexStreamReceiver, external: sent, timeoutMs: 120_000, pollMs: 20 });
    const total = sumCounts(await counts(second));
    // Each page's distinct outlinks (the index keeps one per target: anchors and counts merge).
    let links = 0;
    for (const targets of graph.links.values()) links += new Set(targets).size;
    assert.deepEqual(total, { pages: graph.pages.length, outlinks: links, backlinks: links }, 'every page, outlink and backlink indexed');
  } finally {
    await first.stop();
    await second?.stop();
    await broker.close();
    await checkpoints.close();
    dir.cleanup();
  }
});

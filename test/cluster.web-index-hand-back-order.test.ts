// A web-index partition's planned hand-back while its store is being written (issue 16): its
// checkpointer is closed before its actors stop. Before, the actors stopped first while the
// checkpointer still ran: a checkpoint requested by the last held acks then published outbox
// rows through outboxes (and a store) the stopping actors had closed, and logged a
// StoreClosedError.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ActorStoppedError, FencedError, MemoryBroker, type PartitionFence } from '../src/index.js';
import { canonicalUrl } from '../src/actors/crawler/canonicalUrl.js';
import type { StoredPage } from '../src/query/partitionView.js';
import { openCheckpointStore, type CheckpointStore } from '../src/storage/index.js';
import { uniformWeights } from '../src/actors/metrics/weights.js';
import { graphPages, publishFetches } from '../src/jobs/graphLoader.js';
import { readGraph, type WebGraph } from '../src/replay/graphFile.js';
import { WEB_INDEX_STAGE } from '../src/topology/clusterProtocol.js';
import { webIndexApplication, type WebIndexHost } from '../src/topology/webIndexApplication.js';
import { graphs, memoryLogger, tempDir } from './kit/datasets.js';
import { withPut } from './kit/checkpointStoreWrap.js';

class TestFence implements PartitionFence {
  constructor(readonly epoch: number) {}
  check(): void {
    if (this.epoch < 0) throw new FencedError('never', this.epoch);
  }
}

/** The real directory store with puts that take `ms` longer (an upload under load), so that checkpoints overlap the hand-back. */
function slowPuts(real: CheckpointStore, ms: number): CheckpointStore {
  return withPut(real, async (...args) => {
    const report = await real.put(...args);
    await new Promise((r) => setTimeout(r, ms));
    return report;
  });
}

const PARTITIONS = 4;

/**
 * A host of PARTITIONS web-index partitions checkpointing every 50 ms into a directory store
 * whose puts take 150 ms longer, all started under epoch 1 with polblogs' pages published to
 * them; runs `body` while they index, then stops the host and removes everything.
 */
async function withLoadingHost(keyPrefix: string, log: ReturnType<typeof memoryLogger>['log'], body: (host: WebIndexHost, real: CheckpointStore, graph: WebGraph) => Promise<void>): Promise<void> {
  const graph = await readGraph(join(graphs.polblogs, 'pages.txt'), join(graphs.polblogs, 'links.tsv'));
  const dir = tempDir('sf-wi-handback-');
  const real = openCheckpointStore(pathToFileURL(join(dir.dir, 'checkpoints')).href);
  const broker = new MemoryBroker();
  const app = webIndexApplication({ partitions: PARTITIONS, weigh: uniformWeights, log });
  const host = await app.startHost({ broker, dataDir: join(dir.dir, 'a'), checkpoints: { store: slowPuts(real, 150), keyPrefix, intervalMs: 50 }, logger: log });
  try {
    for (let p = 0; p < PARTITIONS; p++) await host.startPartition(WEB_INDEX_STAGE, p, new TestFence(1));
    await publishFetches(host.broker, host.partitioner, host.counters, graphPages(graph));
    await body(host, real, graph);
  } finally {
    await host.stop();
    await broker.close();
    await real.close();
    dir.cleanup();
  }
}

test('a planned hand-back during a load closes the partition\'s checkpoints before its actors stop: no checkpoint runs into a closed store or outbox', { timeout: 120_000 }, async () => {
  const { log, lines } = memoryLogger();
  await withLoadingHost('hb-test', log, async (host, real) => {
    // Hand every partition back while the pages are indexed and the links flow between partitions.
    await new Promise((r) => setTimeout(r, 300));
    for (let p = 0; p < PARTITIONS; p++) await host.stopPartition(WEB_INDEX_STAGE, p, { checkpoint: true });
    const closed = lines.filter((l) => /StoreClosed|SF_ERR_STORE_CLOSED|store is closed|closed store/i.test(JSON.stringify(l)));
    assert.deepEqual(closed.map((l) => String(l.msg)), [], `no checkpoint ran into a closed store: ${JSON.stringify(closed.slice(0, 2)).slice(0, 2000)}`);
    for (let p = 0; p < PARTITIONS; p++) assert.ok(await real.latest(`hb-test/${WEB_INDEX_STAGE}/p${p}`), `partition ${p} was checkpointed at its hand-back`);
  });
});

// The query API's reads during a hand-back (docs/cluster.md, "Queries during a move"): the
// partition answers them until `beforeStop` (where a worker closes its ask consumer), after
// its last checkpoint; a request that could change state or count folds (here a metric
// request) asked once the stop began waits for the stop and is handed on (ActorStoppedError:
// the worker drops it and the broker delivers it to the next owner).
test('during a hand-back a partition answers reads until beforeStop; a metric request asked meanwhile waits for the stop and is handed on', { timeout: 120_000 }, async () => {
  await withLoadingHost('hb-reads', memoryLogger().log, async (host, _real, graph) => {
    const url = canonicalUrl(graph.pages[0]!);
    const p = host.partitioner.forUrl(url);
    const readPage = () => host.ask(WEB_INDEX_STAGE, p, { kind: 'read', method: 'page', args: [url] }) as Promise<StoredPage>;
    for (const deadline = Date.now() + 60_000; (await readPage()).record === undefined;) {
      assert.ok(Date.now() < deadline, `page ${url} stored on partition ${p} within 60 s`);
      await new Promise((r) => setTimeout(r, 50));
    }
    let duringHandBack: { read: StoredPage; metricSettled: boolean } | undefined;
    let metric: Promise<unknown> | undefined;
    let metricSettled = false;
    await host.stopPartition(WEB_INDEX_STAGE, p, {
      checkpoint: true,
      beforeStop: async () => {
        metric = host.ask(WEB_INDEX_STAGE, p, { kind: 'metrics', message: { type: 'counts' } });
        metric.then(() => (metricSettled = true), () => (metricSettled = true));
        const read = await readPage();
        await new Promise((r) => setTimeout(r, 100)); // the metric request had time to run, were it answered
        duringHandBack = { read, metricSettled };
      },
    });
    assert.ok(duringHandBack, 'beforeStop was called');
    assert.equal(duringHandBack.read.record?.status, 200, 'the read asked at beforeStop was answered with the stored page');
    assert.equal(duringHandBack.metricSettled, false, 'the metric request waited for the stop');
    await assert.rejects(metric!, (err: unknown) => err instanceof ActorStoppedError && /stopped \(a hand-back\) before this metrics request ran/.test(err.message));
    await assert.rejects(readPage(), ActorStoppedError, 'after the stop, reads go to the next owner');
  });
});

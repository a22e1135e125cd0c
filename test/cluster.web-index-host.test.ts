import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import {
  DataDirError, FencedError, InvalidArgumentError, MemoryBroker, StoreBusyError, readOwnerEpoch, readStreamFlow, systemClock, waitStreamsQuiet,
  type PartitionFence, type SentStream, type StreamFlowReport,
} from '../src/index.js';
import { Store } from '../src/storage/index.js';
import { collectScores, converge, type MetricEndpoint } from '../src/actors/metrics/coordinator.js';
import type { PartitionCounts } from '../src/actors/metrics/metricActor.js';
import { uniformWeights } from '../src/actors/metrics/weights.js';
import { partitionColumnFamilies } from '../src/actors/partition/schema.js';
import { PARTITION_STREAM_FAMILIES } from '../src/actors/partition/streams.js';
import { graphPages, publishFetches } from '../src/jobs/graphLoader.js';
import { readGraph, readScores, type WebGraph } from '../src/replay/graphFile.js';
import { WEB_INDEX_STAGE, webIndexStreamReceiver } from '../src/topology/clusterProtocol.js';
import { WEB_INDEX_STORES, webIndexApplication, type WebIndexHost } from '../src/topology/webIndexApplication.js';
import { hostAllowList } from '../src/actors/crawlPolicy/crawlScope.js';
import { assertMatchesReference, graphs, memoryLogger, tempDir } from './kit/datasets.js';

/**
 * Issue 15, the web index on a cluster: a worker's host of web-index partitions, tested
 * directly in one process (real RocksDB stores, the in-memory broker): partitions started one
 * by one under fences, quiet detected from the partitions' flow reports alone, the metric
 * converged through `host.ask` endpoints, a fence lost mid-run, and a store that refuses an
 * older owner.
 */

/** A lease as the tests drive it: an epoch and a check that throws once `lost` is set. */
class TestFence implements PartitionFence {
  lost = false;
  checks = 0;
  constructor(readonly epoch: number) {}
  check(): void {
    this.checks++;
    if (this.lost) throw new FencedError(`test lease of epoch ${this.epoch} lost`, this.epoch);
  }
}

const PARTITIONS = 4;
const ps = Array.from({ length: PARTITIONS }, (_, p) => p);

async function withHost(body: (host: WebIndexHost, ctx: { dataDir: string; broker: MemoryBroker; stopped: Array<{ partition: number; reason: unknown }> }) => Promise<void>): Promise<void> {
  const { dir, cleanup } = tempDir();
  const broker = new MemoryBroker();
  const stopped: Array<{ partition: number; reason: unknown }> = [];
  const app = webIndexApplication({ partitions: PARTITIONS, weigh: uniformWeights, log: memoryLogger().log });
  assert.equal(app.name, 'web-index');
  assert.deepEqual(app.stages, [{ name: WEB_INDEX_STAGE, namespace: 'fetches', subscription: 'indexer', partitions: PARTITIONS, config: 'weights=unnamed;damping=0.85;maxOutlinksPerPage=10000' }]);
  const host = await app.startHost({ broker, dataDir: dir, onPartitionStopped: (stage, partition, reason) => { assert.equal(stage, WEB_INDEX_STAGE); stopped.push({ partition, reason }); } });
  try {
    await body(host, { dataDir: dir, broker, stopped });
  } finally {
    await host.stop();
    await broker.close();
    cleanup();
  }
}

const flows = (host: WebIndexHost) => () => Promise.all(ps.map((p) => host.ask(WEB_INDEX_STAGE, p, { kind: 'flow' }) as Promise<StreamFlowReport>));
const endpoints = (host: WebIndexHost): MetricEndpoint[] => ps.map((p) => (message) => host.ask(WEB_INDEX_STAGE, p, { kind: 'metrics', message }));

/** Waits quiet by flow reports, converges through the hosts' metric endpoints, and returns the scores. */
async function rank(host: WebIndexHost, sent: readonly SentStream[]) {
  const quiet = await waitStreamsQuiet(flows(host), { receiver: webIndexStreamReceiver, external: sent, timeoutMs: 120_000, pollMs: 20 });
  assert.ok(quiet.collections >= 2, 'quiet takes two identical collections');
  const metrics = endpoints(host);
  const counts = (await Promise.all(metrics.map((m) => m({ type: 'counts' })))) as PartitionCounts[];
  const last = (await Promise.all(metrics.map((m) => m({ type: 'last-round' })))) as number[];
  const result = await converge(metrics, { pages: counts.reduce((a, c) => a + c.pages, 0), clock: systemClock, damping: 0.85, firstRound: Math.max(0, ...last) + 1 });
  return { converge: result, scores: await collectScores(metrics) };
}

async function loadPolblogs(): Promise<{ graph: WebGraph; reference: ReadonlyMap<string, number> }> {
  const graph = await readGraph(join(graphs.polblogs, 'pages.txt'), join(graphs.polblogs, 'links.tsv'));
  return { graph, reference: await readScores(join(graphs.polblogs, 'pagerank.tsv')) };
}

test('a web-index host runs fenced partitions: quiet by flow reports, converged through host.ask, scores match the reference', { timeout: 180_000 }, async () => {
  const { graph, reference } = await loadPolblogs();
  await withHost(async (host, { dataDir, stopped }) => {
    const fences = ps.map(() => new TestFence(1));
    for (const p of ps) await host.startPartition(WEB_INDEX_STAGE, p, fences[p]!);
    assert.deepEqual(host.partitions().map((h) => [h.partition, h.epoch]), ps.map((p) => [p, 1]));
    await assert.rejects(host.startPartition(WEB_INDEX_STAGE, 0, new TestFence(1)), /runs here already/);
    await assert.rejects(host.startPartition('crawl', 0, new TestFence(1)), RangeError);

    const sent = await publishFetches(host.broker, host.partitioner, host.counters, graphPages(graph));
    const result = await rank(host, sent);
    assertMatchesReference(result, reference);
    assert.ok(fences.every((f) => f.checks > 10), `every partition checked its fence: ${fences.map((f) => f.checks).join(', ')}`);

    // The flow reports name every outbox's producer and carry the fence's epoch in its sequences.
    const reports = await flows(host)();
    const indexer0 = reports[0]!.outboxes.find((o) => o.owner === 'indexer');
    assert.equal(indexer0?.producer, 'indexer@0');
    assert.ok(Object.values(indexer0!.next).every((n) => n > 2 ** 32), 'epoch 1 in the outbox sequences');
    assert.deepEqual(stopped, []);
    await assert.rejects(host.ask(WEB_INDEX_STAGE, 0, { kind: 'nonsense' }), /not a web index request/);
    assert.ok(typeof (await host.ask(WEB_INDEX_STAGE, 1, { kind: 'republish-links' })) !== 'undefined');

    await host.stopPartition(WEB_INDEX_STAGE, 2);
    await assert.rejects(host.ask(WEB_INDEX_STAGE, 2, { kind: 'flow' }), (err: Error & { code?: string }) => err.code === 'SF_ERR_ACTOR_STOPPED');
    // Stopped on request: not reported; its store is closed and records the owner epoch.
    assert.deepEqual(stopped, []);
    const store = await Store.open({ path: join(dataDir, WEB_INDEX_STORES, 'p2'), columnFamilies: partitionColumnFamilies() });
    try {
      assert.equal(await readOwnerEpoch(store, PARTITION_STREAM_FAMILIES.meta), 1);
    } finally {
      await store.close();
    }
  });
});

test('a fence lost mid-run stops the whole partition, which commits nothing more; its next owner under a newer epoch finishes exactly', { timeout: 240_000 }, async () => {
  const { graph, reference } = await loadPolblogs();
  await withHost(async (host, { dataDir, stopped }) => {
    const fences = ps.map(() => new TestFence(1));
    for (const p of ps) await host.startPartition(WEB_INDEX_STAGE, p, fences[p]!);
    const loading = publishFetches(host.broker, host.partitioner, host.counters, graphPages(graph));
    // Lose partition 1's lease once it has applied something.
    for (;;) {
      const flow = (await host.ask(WEB_INDEX_STAGE, 1, { kind: 'flow' })) as StreamFlowReport;
      if (flow.consumers.some((c) => c.consumer === 'indexer')) break;
      await new Promise((r) => setTimeout(r, 5));
    }
    fences[1]!.lost = true;
    // One more fetch for a page of partition 1 once the load is sent (the same content again:
    // no change to the graph), so that it writes at least once with its fence lost, however
    // much of the load it applied before: on a loaded machine it could apply all of it before
    // the fence was lost, and then nothing would ever check the fence here.
    const again = [...graphPages(graph)].find((page) => Number(host.partitioner.forUrl(page.url)) === 1)!;
    const sent = [...(await loading), ...(await publishFetches(host.broker, host.partitioner, host.counters, [again]))];
    for (let i = 0; i < 1000 && stopped.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    assert.equal(stopped.length, 1, 'the fenced partition reported its stop');
    assert.equal(stopped[0]!.partition, 1);
    assert.ok(stopped[0]!.reason instanceof FencedError, `stopped by ${String(stopped[0]!.reason)}`);
    assert.deepEqual(host.partitions().map((h) => h.partition), [0, 2, 3]);
    assert.equal(host.system.lookup('/partitions/p1/indexer'), undefined, 'every actor of the partition stopped');

    // Nothing more is committed to its store while the others go on sending to it.
    const path = join(dataDir, WEB_INDEX_STORES, 'p1');
    const read = async () => {
      const store = await Store.open({ path, columnFamilies: partitionColumnFamilies() });
      try {
        return await readStreamFlow(store, PARTITION_STREAM_FAMILIES);
      } finally {
        await store.close();
      }
    };
    const before = await read();
    await new Promise((r) => setTimeout(r, 500));
    assert.deepEqual(await read(), before);

    // Its next owner: epoch 2, then everything left on the broker is applied exactly once.
    await host.startPartition(WEB_INDEX_STAGE, 1, new TestFence(2));
    const result = await rank(host, sent);
    assertMatchesReference(result, reference);
    const after = await read().catch((err) => err);
    assert.ok(after instanceof StoreBusyError, 'the running partition holds its store: another open is refused');
    const flow = (await host.ask(WEB_INDEX_STAGE, 1, { kind: 'flow' })) as StreamFlowReport;
    const metrics1 = flow.outboxes.find((o) => o.owner === 'metrics')!;
    assert.ok(Object.values(metrics1.next).some((n) => n > 2 * 2 ** 32), 'the new owner sends under epoch 2');
  });
});

test('a store that recorded a newer owner epoch refuses an older owner; a store held by another handle is busy', { timeout: 60_000 }, async () => {
  await withHost(async (host, { dataDir, stopped }) => {
    // A partition an earlier owner started whose store is not in this data dir (another
    // machine's, or wiped) is refused: it would start from nothing.
    const moved = Object.assign(new TestFence(2), { startedBefore: true });
    await assert.rejects(host.startPartition(WEB_INDEX_STAGE, 2, moved), (err: unknown) => err instanceof DataDirError && /started by an earlier owner .*epoch 2.* is not in this worker's data dir/.test(err.message));
    await host.startPartition(WEB_INDEX_STAGE, 0, new TestFence(1));
    await host.stopPartition(WEB_INDEX_STAGE, 0);
    await host.startPartition(WEB_INDEX_STAGE, 0, new TestFence(3));
    await host.stopPartition(WEB_INDEX_STAGE, 0);
    await assert.rejects(host.startPartition(WEB_INDEX_STAGE, 0, new TestFence(2)), (err: unknown) => err instanceof FencedError && /newer than this owner's 2/.test(err.message));
    assert.deepEqual(host.partitions(), []);
    // A lost fence refuses the start before the store opens.
    const lost = new TestFence(4);
    lost.lost = true;
    await assert.rejects(host.startPartition(WEB_INDEX_STAGE, 0, lost), FencedError);
    // Another handle (another process, on one machine) holds the store: busy, try again later.
    const held = await Store.open({ path: join(dataDir, WEB_INDEX_STORES, 'p1'), columnFamilies: partitionColumnFamilies() });
    try {
      await assert.rejects(host.startPartition(WEB_INDEX_STAGE, 1, new TestFence(1)), StoreBusyError);
    } finally {
      await held.close();
    }
    await host.startPartition(WEB_INDEX_STAGE, 1, new TestFence(1));
    await host.startPartition(WEB_INDEX_STAGE, 0, new TestFence(4));
    assert.deepEqual(host.partitions().map((h) => [h.partition, h.epoch]).sort(), [[0, 4], [1, 1]]);
    assert.deepEqual(stopped, []);
  });
});

test('a crawling host: its stage config carries the crawl\'s, seeds go to the partition\'s crawl policy (idempotent, checked), drained answers; a host that does not crawl refuses both', { timeout: 60_000 }, async () => {
  const { dir, cleanup } = tempDir();
  const broker = new MemoryBroker();
  const app = webIndexApplication({
    partitions: PARTITIONS, weigh: uniformWeights, log: memoryLogger().log,
    crawl: { crawlers: 1, policy: { minDelayMs: 0, scope: hostAllowList(['allowed.test']) } },
  });
  assert.match(app.stages[0]!.config ?? '', /;crawl=\{.*"delayMs":0.*"scope":"hosts allowed.test"/);
  const host = await app.startHost({ broker, dataDir: dir });
  try {
    const url = 'http://elsewhere.test/';
    const p = host.partitioner.forUrl(url);
    await host.startPartition(WEB_INDEX_STAGE, p, new TestFence(1));
    await host.ask(WEB_INDEX_STAGE, p, { kind: 'seed', urls: [url] });
    await host.ask(WEB_INDEX_STAGE, p, { kind: 'seed', urls: [url] }); // again: known, left as it is
    assert.deepEqual(await host.ask(WEB_INDEX_STAGE, p, { kind: 'drained' }), { drained: true, requested: 0, robots: 0, readyHosts: 0 }, 'an out-of-scope seed is recorded, never requested');
    const view = (await host.ask(WEB_INDEX_STAGE, p, { kind: 'read', method: 'frontierStates', args: [] })) as Record<string, number>;
    assert.deepEqual(view, { 'out-of-scope': 1 });
    const other = (p + 1) % PARTITIONS;
    const foreign = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'].map((h) => `http://${h}.test/`).find((u) => host.partitioner.forUrl(u) === other)!;
    await assert.rejects(host.ask(WEB_INDEX_STAGE, p, { kind: 'seed', urls: [foreign] }), (err: unknown) => err instanceof InvalidArgumentError && /belongs to partition/.test(err.message));
    await assert.rejects(host.ask(WEB_INDEX_STAGE, p, { kind: 'seed', urls: [42] }), /expected URL strings/);
  } finally {
    await host.stop();
    await broker.close();
    cleanup();
  }
  await withHost(async (rankHost) => {
    await rankHost.startPartition(WEB_INDEX_STAGE, 0, new TestFence(1));
    await assert.rejects(rankHost.ask(WEB_INDEX_STAGE, 0, { kind: 'drained' }), /does not crawl/);
  });
});

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import {
  DataDirError, FencedError, MemoryBroker, stageCheckpointKey, systemClock, waitStreamsQuiet,
  type PartitionFence, type SentStream, type StageRestore, type StreamFlowReport,
} from '../src/index.js';
import { openCheckpointStore } from '../src/storage/index.js';
import { collectScores, converge, type MetricEndpoint } from '../src/actors/metrics/coordinator.js';
import type { PartitionCounts } from '../src/actors/metrics/metricActor.js';
import { uniformWeights } from '../src/actors/metrics/weights.js';
import { graphPages, publishFetches } from '../src/jobs/graphLoader.js';
import { readGraph, readScores } from '../src/replay/graphFile.js';
import { WEB_INDEX_STAGE, webIndexStreamReceiver } from '../src/topology/clusterProtocol.js';
import { WEB_INDEX_STORES, webIndexApplication, type WebIndexHost } from '../src/topology/webIndexApplication.js';
import { assertMatchesReference, graphs, memoryLogger, tempDir } from './kit/datasets.js';
import { assertClusterRank, rankCase, restoresOf, withCheckpointedWebIndexCluster, type WebIndexCluster } from './kit/webIndexCluster.js';
import type { WorkerProcess } from './kit/clusterRun.js';

/**
 * Issue 16 for the web index: a web-index partition checkpoints its store (commit at
 * checkpoint: publishes, acks and state-changing replies wait for a checkpoint holding them)
 * and its next owner, on a host with its own data dir, restores it.
 */

/** A lease as the tests drive it: an epoch and a check that throws once `lost` is set. */
class TestFence implements PartitionFence {
  lost = false;
  constructor(readonly epoch: number, readonly startedBefore = false) {}
  check(): void {
    if (this.lost) throw new FencedError(`test lease of epoch ${this.epoch} lost`, this.epoch);
  }
}

const PARTITIONS = 4;
const ps = Array.from({ length: PARTITIONS }, (_, p) => p);
const flows = (host: WebIndexHost) => () => Promise.all(ps.map((p) => host.ask(WEB_INDEX_STAGE, p, { kind: 'flow' }) as Promise<StreamFlowReport>));
const endpoints = (host: WebIndexHost): MetricEndpoint[] => ps.map((p) => (message) => host.ask(WEB_INDEX_STAGE, p, { kind: 'metrics', message }));

test('in one process: a host with checkpoints ranks polblogs exactly, hands its partitions back with a last checkpoint, and a host with another data dir restores them (or refuses one it has no checkpoint of)', { timeout: 240_000 }, async (t) => {
  const graph = await readGraph(join(graphs.polblogs, 'pages.txt'), join(graphs.polblogs, 'links.tsv'));
  const reference = await readScores(join(graphs.polblogs, 'pagerank.tsv'));
  const dir = tempDir('sf-wi-ckpt-');
  const checkpoints = openCheckpointStore(pathToFileURL(join(dir.dir, 'checkpoints')).href);
  const empty = openCheckpointStore(pathToFileURL(join(dir.dir, 'no-checkpoints')).href);
  const broker = new MemoryBroker();
  const app = webIndexApplication({ partitions: PARTITIONS, weigh: uniformWeights, log: memoryLogger().log });
  assert.equal(app.supportsCheckpoints, true);
  const restores: StageRestore[] = [];
  const checkpointing = { store: checkpoints, keyPrefix: 'wi-test', intervalMs: 1000, onRestored: (r: StageRestore) => restores.push(r) };
  const first = await app.startHost({ broker, dataDir: join(dir.dir, 'a'), checkpoints: checkpointing });
  let second: WebIndexHost | undefined;
  let third: WebIndexHost | undefined;
  try {
    for (const p of ps) await first.startPartition(WEB_INDEX_STAGE, p, new TestFence(1));
    const sent: SentStream[] = await publishFetches(first.broker, first.partitioner, first.counters, graphPages(graph));
    await waitStreamsQuiet(flows(first), { receiver: webIndexStreamReceiver, external: sent, timeoutMs: 120_000, pollMs: 20 });
    const metrics = endpoints(first);
    const counts = (await Promise.all(metrics.map((m) => m({ type: 'counts' })))) as PartitionCounts[];
    const started = Date.now();
    const result = await converge(metrics, { pages: counts.reduce((a, c) => a + c.pages, 0), clock: systemClock, damping: 0.85, firstRound: 1, tolerance: 1e-7 });
    const seconds = (Date.now() - started) / 1000;
    assertMatchesReference({ converge: result, scores: await collectScores(metrics) }, reference);
    t.diagnostic(`${result.rounds} rounds in ${seconds.toFixed(1)} s (each waits for one checkpoint: the pushes' replies and contributions; the barriers are not held)`);
    for (const p of ps) assert.ok((await checkpoints.latest(stageCheckpointKey('wi-test', WEB_INDEX_STAGE, p))) !== undefined, `partition ${p} has a checkpoint`);

    // A planned hand-back of every partition; the next host has its own (empty) data dir.
    for (const p of ps) await first.stopPartition(WEB_INDEX_STAGE, p, { checkpoint: true });
    await first.stop();
    second = await app.startHost({ broker, dataDir: join(dir.dir, 'b'), checkpoints: checkpointing });
    for (const p of ps) await second.startPartition(WEB_INDEX_STAGE, p, new TestFence(2, true));
    assert.deepEqual(restores.map((r) => [r.partition, r.reason, r.ownerEpoch]).sort(), ps.map((p) => [p, 'missing', 1]));
    assert.ok(existsSync(join(dir.dir, 'b', WEB_INDEX_STORES, 'p0', 'CURRENT')));
    const after = endpoints(second);
    assert.deepEqual(await Promise.all(after.map((m) => m({ type: 'counts' }))), counts, 'the restored partitions hold every page, outlink and backlink');
    assertMatchesReference({ converge: result, scores: await collectScores(after) }, reference);

    // A partition an earlier owner started, with neither a local store nor a checkpoint: refused with the reason.
    third = await app.startHost({ broker, dataDir: join(dir.dir, 'c'), checkpoints: { store: empty, keyPrefix: 'wi-test', intervalMs: 200 } });
    await assert.rejects(third.startPartition(WEB_INDEX_STAGE, 1, new TestFence(3, true)), (err: unknown) => err instanceof DataDirError && /the checkpoint store has no checkpoint of it \(wi-test\/index\/p1\)/.test(err.message));
  } finally {
    await first.stop();
    await second?.stop();
    await third?.stop();
    await broker.close();
    await checkpoints.close();
    await empty.close();
    dir.cleanup();
  }
});

const CLUSTER_PARTITIONS = 3;
const LEASE_MS = 3000;

/** Three workers, their own data dirs, S3 checkpoints (`withCheckpointedWebIndexCluster`). */
function withCheckpointedCluster(t: import('node:test').TestContext, body: (c: WebIndexCluster, ws: WorkerProcess[]) => Promise<void>): Promise<void> {
  return withCheckpointedWebIndexCluster(t, { partitions: CLUSTER_PARTITIONS, leaseMs: LEASE_MS }, ({ c, ws }) => body(c, ws));
}

const restores = restoresOf;

/**
 * Ranks `expected` to 1e-7 (L1 <= 1e-6 to the reference needs no more) and SIGKILLs `ws[0]`
 * when round 3 ends; `afterKill` gets the workers' event counts at the kill.
 */
async function rankKillingAtRound3(c: WebIndexCluster, ws: readonly WorkerProcess[], expected: Awaited<ReturnType<typeof rankCase>>, afterKill?: (eventsBefore: number[]) => void) {
  let killedAt: number | undefined;
  const result = await c.rank(expected, {
    hangMs: 360_000,
    tolerance: 1e-7,
    onRound: (r) => {
      if (r.round !== 3 || killedAt !== undefined) return;
      killedAt = Date.now();
      const before = ws.map((w) => w.events.length);
      ws[0]!.child.kill('SIGKILL');
      afterKill?.(before);
    },
  });
  return { result, killedAt };
}

test('three workers with their own data dirs and S3 checkpoints rank epa; one SIGKILLed mid-rounds: its partitions are restored elsewhere, the result is exact', { timeout: 420_000 }, async (t) => {
  await withCheckpointedCluster(t, async (c, ws) => {
    const expected = await rankCase(graphs.epa, CLUSTER_PARTITIONS);
    const started = Date.now();
    const { result, killedAt } = await rankKillingAtRound3(c, ws, expected);
    assert.ok(killedAt !== undefined, 'the kill happened during the rounds');
    assertClusterRank(result, expected);
    const moved = restores(ws.slice(1));
    // A store is restored when missing here, or older than the latest checkpoint (the unit came back after a later owner ran it).
    assert.ok(moved.length >= 1 && moved.every((r) => / missing$/.test(r) || /owner epoch \d+ \(checkpoint -?\d+\) is older than checkpoint \d+'s \d+$/.test(r)), `the killed worker's partitions were restored from their checkpoints by the others: ${moved.join('; ')}`);
    const puts = ws.flatMap((w) => w.events.flatMap(({ event: e }) => (e.type === 'checkpointed' ? [e] : [])));
    const grouped = puts.filter((p) => p.groupedManifests > 1).length;
    t.diagnostic(`rank of epa in ${((Date.now() - started) / 1000).toFixed(1)} s, ${result.converge.rounds} rounds; restores: ${moved.join('; ')}; ${puts.length} puts, ${grouped} in group objects`);
    // After the kill one worker holds two of the three partitions: their tail puts at the end of
    // each round share group objects (docs/checkpoints.md, "Group commits"), which restores read.
    assert.ok(grouped > 0, 'the tail puts of a worker holding two partitions shared group objects');
    await c.stopAll();
  });
});

test('the same with a directory checkpoint store on the workers\' filesystem: the rounds\' WAL tails are linked, not copied; one worker SIGKILLed mid-rounds, the result is exact', { timeout: 420_000 }, async (t) => {
  await withCheckpointedWebIndexCluster(t, { partitions: CLUSTER_PARTITIONS, leaseMs: LEASE_MS, store: 'directory' }, async ({ c, ws, prefix }) => {
    const expected = await rankCase(graphs.epa, CLUSTER_PARTITIONS);
    const { result, killedAt } = await rankKillingAtRound3(c, ws, expected);
    assert.ok(killedAt !== undefined, 'the kill happened during the rounds');
    assertClusterRank(result, expected);
    const moved = restores(ws.slice(1));
    assert.ok(moved.length >= 1 && moved.some((r) => /\(\+\d+ WAL tails\)/.test(r)), `the killed worker's partitions were restored with WAL tails: ${moved.join('; ')}`);
    const links = (await readdir(prefix, { recursive: true })).filter((f) => /(^|\/)files\/log-[0-9a-f]{12}-\d+\.log$/.test(f));
    assert.ok(links.length > 0, 'the checkpoint store holds linked logs');
    t.diagnostic(`restores: ${moved.join('; ')}; ${links.length} linked logs`);
    await c.stopAll();
  });
});

test('the next owner SIGKILLed as it restores the partitions of a worker SIGKILLed mid-rounds: the last worker restores them all, the result is exact', { timeout: 420_000 }, async (t) => {
  await withCheckpointedCluster(t, async (c, ws) => {
    const expected = await rankCase(graphs.epa, CLUSTER_PARTITIONS);
    let secondKill: Promise<string> | undefined;
    const { result, killedAt } = await rankKillingAtRound3(c, ws, expected, (before) => {
      // The first survivor to report a restore (its store replaced from the checkpoint, not yet running) is killed at once.
      secondKill = new Promise<string>((done) => {
        const poll = setInterval(() => {
          for (const [i, w] of ws.entries()) {
            if (i === 0 || !w.events.slice(before[i]).some((e) => e.event.type === 'restored')) continue;
            clearInterval(poll);
            w.child.kill('SIGKILL');
            done(w.name);
            return;
          }
        }, 2);
      });
    });
    const second = await secondKill!;
    assertClusterRank(result, expected);
    const last = ws.find((w) => w.name !== 'w1' && w.name !== second)!;
    assert.ok(killedAt !== undefined, 'the kill happened during the rounds');
    const after = last.events.filter((e) => e.event.type === 'restored' && e.at >= killedAt);
    assert.ok(after.length >= 1, `${last.name} restored partitions after the kills: ${restores([last]).join('; ')}`);
    t.diagnostic(`${second} killed during its restore; ${last.name} restored ${restores([last]).join('; ')}; ${result.converge.rounds} rounds`);
  });
});

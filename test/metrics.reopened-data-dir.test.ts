import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { readGraph, readScores } from '../src/replay/graphFile.js';
import { uniformWeights } from '../src/actors/metrics/weights.js';
import { MemoryBroker } from '../src/runtime/brokers/memory.js';
import { startWebIndex } from '../src/topology/webIndex.js';
import { graphPages, publishFetches } from '../src/jobs/graphLoader.js';
import { Store } from '../src/storage/index.js';
import { ColumnFamilies, partitionColumnFamilies } from '../src/actors/partition/schema.js';
import { converge, localMetricEndpoint, type MetricRef } from '../src/actors/metrics/coordinator.js';
import type { MetricMessage, PushReport } from '../src/actors/metrics/metricActor.js';
import type { ActorRef } from '../src/runtime/actor/index.js';
import { systemClock } from '../src/runtime/clock.js';
import { graphs, memoryLogger, tempDir, assertMatchesReference } from './kit/datasets.js';
import { withLoadedWebIndex } from './kit/loadedIndex.js';

const partitions = 4;

/** Meta keys of round bookkeeping (`expected/<round>`) left in each partition's store. */
async function expectedKeys(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (let p = 0; p < partitions; p++) {
    const store = await Store.open({ path: join(dir, `p${p}`), columnFamilies: partitionColumnFamilies() });
    try {
      for await (const [key] of store.iterate(ColumnFamilies.meta, { prefix: 'expected\u0000' })) out.push(`p${p}:${key.toString('utf8').replace('\u0000', '/')}`);
    } finally {
      await store.close();
    }
  }
  return out;
}

// The first process stops in the middle of the metric rounds (converge fails at round 5)
// with folded contributions not yet committed, then the same data dir is opened again with
// a new in-memory broker, which cannot deliver the old one's messages again.
for (const how of ['stop', 'crash'] as const) {
  test(`a data dir left by a process that ${how === 'stop' ? 'stopped cleanly' : 'died'} mid-round converges again, never waiting for lost messages`, { timeout: 120_000 }, async () => {
    const graph = await readGraph(join(graphs.polblogs, 'pages.txt'), join(graphs.polblogs, 'links.tsv'));
    const reference = await readScores(join(graphs.polblogs, 'pagerank.tsv'));
    const { dir, cleanup } = tempDir();
    try {
      {
        const broker = new MemoryBroker();
        const index = await startWebIndex({ partitions, dataDir: dir, broker, weigh: uniformWeights, log: memoryLogger().log });
        await publishFetches(index.broker, index.partitioner, index.counters, graphPages(graph));
        await index.quiescence({ pollMs: 10 });
        await assert.rejects(index.converge({ onRound: (r) => { if (r.round === 5) throw new Error('the process stops'); } }));
        // A clean stop commits what the metric actors folded; a death (the actor system
        // torn down without that) leaves rounds with uncommitted messages.
        if (how === 'stop') await index.stop();
        else await index.system.terminate();
        await broker.close();
      }
      const left = await expectedKeys(dir);
      if (how === 'stop') assert.deepEqual(left, [], 'a clean stop leaves no round uncommitted');
      else assert.ok(left.length > 0, 'the death left rounds with uncommitted messages');

      const broker = new MemoryBroker();
      const { log, lines } = memoryLogger();
      const index = await startWebIndex({ partitions, dataDir: dir, broker, weigh: uniformWeights, log });
      try {
        const result = await index.converge({});
        assert.ok(result.converged);
        const warned = lines.filter((l) => String(l.msg).startsWith('metric rounds left uncommitted by an earlier process'));
        if (how === 'stop') {
          // Nothing was lost: the scores are those of an uninterrupted run.
          assertMatchesReference({ converge: result, scores: await index.scores() }, new Map(reference));
          assert.equal(warned.length, 0);
        } else {
          assert.ok(warned.length > 0, 'the lost rounds are reported');
        }
      } finally {
        await index.stop();
        await broker.close();
      }
      assert.deepEqual(await expectedKeys(dir), []);
    } finally {
      cleanup();
    }
  });
}

// A converge call ends (fails) between the pushes of a round and that round's barrier; the
// next call must run that barrier first, with the counts the stored reports give, so that a
// partition restarted meanwhile defers its next push until those messages are folded again.
test('a converge call after one cut short between pushes and barrier first waits for that round\'s messages', { timeout: 120_000 }, async () => {
  const reference = await readScores(join(graphs.polblogs, 'pagerank.tsv'));
  await withLoadedWebIndex(graphs.polblogs, partitions, async (index) => {
    const pages = (await index.counts()).reduce((a, c) => a + c.pages, 0);
    // Refs that record what the coordinator asks; the first call's barrier of round 5
    // never answers (as if that call failed there).
    const asked: Array<{ q: number; message: MetricMessage }> = [];
    let cut = true;
    const refs: MetricRef[] = Array.from({ length: partitions }, (_, q) => () => {
      const real = index.system.lookup<MetricMessage, unknown>(`/partitions/p${q}/metrics`)!;
      return {
        ask: (message: MetricMessage, o?: { timeoutMs?: number }) => {
          asked.push({ q, message });
          if (cut && message.type === 'await-applied' && message.round === 5) return new Promise(() => undefined);
          return real.ask(message, o);
        },
      } as unknown as ActorRef<MetricMessage, unknown>;
    });
    const endpoints = refs.map((r) => localMetricEndpoint(r, systemClock));
    void converge(endpoints, { pages, clock: systemClock });
    while (asked.filter((a) => a.message.type === 'await-applied' && a.message.round === 5).length < partitions) await new Promise((r) => setTimeout(r, 10));
    cut = false;
    const reports = (await Promise.all(refs.map((r) => r().ask({ type: 'last-report' })))) as PushReport[];
    assert.ok(reports.every((r) => r.round === 5), 'every partition pushed round 5');
    const sent = refs.map((_, q) => reports.reduce((t, r) => t + r.sent[q]!, 0));

    asked.length = 0;
    const result = await converge(endpoints, { pages, clock: systemClock, firstRound: 6 });
    const first = asked.filter((a) => a.message.type === 'await-applied' && a.message.round === 5);
    assert.deepEqual(first.map((a) => [a.q, (a.message as { expected: number }).expected]).sort(), sent.map((c, q) => [q, c]), 'round 5 barrier with the reports\' counts');
    const firstPush = asked.findIndex((a) => a.message.type === 'push');
    assert.ok(asked.findLastIndex((a) => a.message.type === 'await-applied' && a.message.round === 5) < firstPush, 'before the first push');
    assert.ok(result.converged);
    assertMatchesReference({ converge: result, scores: await index.scores() }, new Map(reference));
  });
});

// stop() asks the metric actors to commit first; a second stop() (nothing is running any
// more) must still succeed, as it did before that commit step.
test('WebIndex.stop() commits the metric actors\' folds and can be called twice', async () => {
  const { dir, cleanup } = tempDir();
  const broker = new MemoryBroker();
  try {
    const index = await startWebIndex({ partitions: 2, dataDir: dir, broker, weigh: uniformWeights, log: memoryLogger().log });
    await index.stop();
    await index.stop();
  } finally {
    await broker.close();
    cleanup();
  }
});

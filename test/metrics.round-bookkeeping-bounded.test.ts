import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { rankGraph } from '../src/jobs/rankGraph.js';
import { readGraph, readScores } from '../src/replay/graphFile.js';
import { uniformWeights } from '../src/actors/metrics/weights.js';
import { MemoryBroker } from '../src/runtime/brokers/memory.js';
import { ChaosPolicy } from '../src/runtime/actor/chaosPolicy.js';
import { Packr } from 'msgpackr';
import { Store } from '../src/storage/index.js';
import { encodeInt64 } from '../src/operators/mergeOperators.js';
import { ColumnFamilies, partitionColumnFamilies } from '../src/actors/partition/schema.js';
import { graphs, memoryLogger, tempDir, assertMatchesReference } from './kit/datasets.js';

// Continuous mode runs metric rounds without end, so what a partition keeps per round must
// not grow with them: one report (the last push's), the counts of the recent rounds only
// (those before the oldest not all committed are pruned every 64 rounds), and an expected count only while its round's messages are not
// all committed. Metric actors are killed at random meanwhile, so expected counts are left
// behind by dead incarnations and must still go, and so must the per-round reports of
// stores from before.
test('a partition keeps bounded per-round state however many metric rounds ran, restarts included', { timeout: 120_000 }, async () => {
  const graph = await readGraph(join(graphs.polblogs, 'pages.txt'), join(graphs.polblogs, 'links.tsv'));
  const reference = await readScores(join(graphs.polblogs, 'pagerank.tsv'));
  const broker = new MemoryBroker();
  const { dir, cleanup } = tempDir();
  try {
    const partitions = 4;
    // Stores written before the single last-report key kept a report per round: one found
    // at start goes. One written before reports carried their broker client is still read.
    for (let p = 0; p < partitions; p++) {
      const store = await Store.open({ path: join(dir, `p${p}`), columnFamilies: partitionColumnFamilies() });
      await store.write(store.batch().put(ColumnFamilies.meta, 'pushed\u00001', Buffer.of(0x90)).put(ColumnFamilies.meta, 'pushed\u000012', Buffer.of(0x90))
        // and a last report without its broker client, the form written before tokens
        .put(ColumnFamilies.meta, 'last-report', new Packr({ useRecords: false }).pack({ round: 1, sent: [0, 0, 0, 0], pushed: 0, remaining: 0, sumX: 0, contributions: 0, combined: 0 }))
        .put(ColumnFamilies.meta, 'last-round', encodeInt64(1)));
      await store.close();
    }
    const result = await rankGraph({
      graph, partitions, dataDir: dir, broker, weigh: uniformWeights, log: memoryLogger().log,
      chaos: ChaosPolicy.create({ rate: 0.03, seed: 5, kinds: ['metrics'] }),
    });
    assertMatchesReference(result, reference);
    const rounds = result.converge.lastRound;
    assert.ok(rounds > 80, `enough rounds to prune: ${rounds}`);
    for (let p = 0; p < partitions; p++) {
      const store = await Store.open({ path: join(dir, `p${p}`), columnFamilies: partitionColumnFamilies() });
      try {
        const kept: number[] = [];
        for await (const [key] of store.iterate(ColumnFamilies.rounds)) kept.push(key.readUInt32BE(0));
        const meta: string[] = [];
        for await (const [key] of store.iterate(ColumnFamilies.meta)) meta.push(key.toString('utf8').replace('\u0000', '/'));
        // Round 0 (graph changes), then the rounds from the first one not all committed at
        // the pruning of round 64 (folds commit every 128 messages or 2 s: here ~30 rounds).
        const numbered = kept.filter((r) => r > 0); // round 0 has an entry only if the graph changed
        assert.ok(numbered[0]! >= 16, `p${p}: rounds before ${numbered[0]} pruned`);
        // At most one entry per round from there to the last (a round in which this partition
        // applied nothing, such as the coordinator's probe round, leaves none).
        assert.ok(numbered.every((r, i) => r <= rounds && (i === 0 || r > numbered[i - 1]!)), `p${p}: rounds ${numbered.join(',')} are distinct and at most ${rounds}`);
        // Not a lower bound of half the rounds any more: under the residual budget a partition
        // may apply nothing in most late rounds (CI: 12 entries for rounds 99 to 132 on p0).
        assert.ok(numbered.length >= 1 && numbered.length <= rounds - numbered[0]! + 1, `p${p}: ${numbered.length} entries for rounds ${numbered[0]} to ${rounds}`);
        assert.deepEqual(meta.filter((k) => k.startsWith('expected/')), [], `p${p}: every round committed, no expected count left`);
        // Besides the exactly-once marks, sequences and producer names (one per producer, topic and outbox): fixed keys only.
        const perRound = meta.filter((k) => !k.startsWith('applied/') && !k.startsWith('seq/') && !k.startsWith('producer/'));
        assert.deepEqual(perRound.sort(), ['hosts-total', 'last-report', 'last-round'], `p${p}: meta holds ${meta.join(', ')}`);
      } finally {
        await store.close();
      }
    }
  } finally {
    await broker.close();
    cleanup();
  }
});

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { readGraph } from '../src/replay/graphFile.js';
import { uniformWeights } from '../src/actors/metrics/weights.js';
import { MemoryBroker } from '../src/runtime/brokers/memory.js';
import { startWebIndex } from '../src/topology/webIndex.js';
import { graphPages, publishFetches } from '../src/jobs/graphLoader.js';
import { QueryService } from '../src/query/queryService.js';
import { COPY_RELATIVE_BOUND, decodeBacklink, encodeBacklinkCopy, encodeBacklinkLink } from '../src/actors/backlinks/backlinkValue.js';
import { encodeLinkValue, linkFeatures, linkWeight } from '../src/actors/indexer/linkValue.js';
import { Store } from '../src/storage/index.js';
import { decodeRecord } from '../src/index.js';
import { ColumnFamilies, linkKey, partitionColumnFamilies } from '../src/actors/partition/schema.js';
import { graphs, memoryLogger, tempDir } from './kit/datasets.js';
import { checkBacklinkCopies } from './kit/backlinkCopies.js';

// Backlinks carry their source's metric (docs/ARCHITECTURE.md, "Backlinks carry their
// source's metric"): after a full computation every backlink holds a copy of its source's x
// within COPY_RELATIVE_BOUND, a backlinks query reads the target's partition alone, and its
// scores are those of the fan-out path within the bound.

const partitions = 4;

test('the record merge of a backlink keeps the crawler\'s fields and the copy of the source\'s metric, in any order, without a read', async () => {
  const { dir, cleanup } = tempDir();
  const store = await Store.open({ path: dir, columnFamilies: partitionColumnFamilies() });
  try {
    const features = { anchor: 'home', position: 0.25, rel: ['nofollow'], region: 'nav' as const, sameHost: false };
    const first = encodeLinkValue(2, features);
    const second = encodeLinkValue(0.5, { ...features, anchor: 'a'.repeat(300) }); // a bin 16 operand
    const key = linkKey('http://t.example/', 'http://s.example/');
    await store.write(store.batch().merge(ColumnFamilies.backlinks, key, encodeBacklinkLink(first)).merge(ColumnFamilies.backlinks, key, encodeBacklinkCopy(0.125)));
    let read = decodeBacklink((await store.get(ColumnFamilies.backlinks, key))!);
    assert.deepEqual([linkWeight(read.link!), linkFeatures(read.link!), read.metric], [2, features, 0.125]);
    // an update of the link keeps the copy; a new copy keeps the link
    await store.merge(ColumnFamilies.backlinks, key, encodeBacklinkLink(second));
    await store.merge(ColumnFamilies.backlinks, key, encodeBacklinkCopy(0.375));
    const stored = (await store.get(ColumnFamilies.backlinks, key))!;
    read = decodeBacklink(stored);
    assert.deepEqual([linkWeight(read.link!), linkFeatures(read.link!).anchor.length, read.metric], [0.5, 300, 0.375]);
    const generic = decodeRecord<{ v: Uint8Array; m: number }>(stored);
    assert.deepEqual([Buffer.from(generic.v).equals(read.link!), generic.m], [true, 0.375], 'the fast reader agrees with msgpack');
    // a copy that came first (its link's add not applied yet), and one whose link was removed
    const early = linkKey('http://t.example/', 'http://early.example/');
    await store.merge(ColumnFamilies.backlinks, early, encodeBacklinkCopy(1.5));
    assert.deepEqual(decodeBacklink((await store.get(ColumnFamilies.backlinks, early))!), { link: undefined, metric: 1.5 });
    await store.merge(ColumnFamilies.backlinks, early, encodeBacklinkLink(first));
    read = decodeBacklink((await store.get(ColumnFamilies.backlinks, early))!);
    assert.deepEqual([linkWeight(read.link!), read.metric], [2, 1.5]);
    await store.compactRange(ColumnFamilies.backlinks);
    assert.equal(store.stats().mergeFaults, 0);
  } finally {
    await store.close();
    cleanup();
  }
});

test('after a full computation every backlink holds its source\'s x within the bound, and a backlinks query reads one partition', { timeout: 180_000 }, async (t) => {
  const graph = await readGraph(join(graphs.polblogs, 'pages.txt'), join(graphs.polblogs, 'links.tsv'));
  const { dir, cleanup } = tempDir();
  try {
    const broker = new MemoryBroker();
    const index = await startWebIndex({ partitions, dataDir: dir, broker, weigh: uniformWeights, log: memoryLogger().log });
    let result;
    try {
      await publishFetches(index.broker, index.partitioner, index.counters, graphPages(graph));
      await index.quiescence({ pollMs: 10 });
      result = await index.converge({ tolerance: 1e-9 });
      assert.ok(result.converged);
      let crossing = 0;
      for (const [source, targets] of graph.links) {
        for (const t of new Set(targets)) if (index.partitioner.forUrl(t) !== index.partitioner.forUrl(source)) crossing++;
      }
      assert.ok(result.copies >= crossing, `every link between partitions got at least one copy (${result.copies} for ${crossing})`);
      assert.ok(result.copyBytes > 0 && result.copyBytes < result.bytes);
      t.diagnostic(`links between partitions ${crossing} of 18938; rounds ${result.rounds}, pushes ${result.pushes}, messages ${result.messages}, bytes ${result.bytes}; copies ${result.copies} (${(result.copies / 18938).toFixed(2)} per link), copy bytes ${result.copyBytes}`);

      // The hub: the page with the most backlinks.
      const indegree = new Map<string, number>();
      for (const targets of graph.links.values()) for (const t of new Set(targets)) indegree.set(t, (indegree.get(t) ?? 0) + 1);
      const hub = [...indegree].sort((a, b) => b[1] - a[1])[0]![0];
      const hubPartition = index.partitioner.forUrl(hub);
      const read: number[] = [];
      const service = (backlinkScores: 'copies' | 'sources') =>
        new QueryService({ partitioner: index.partitioner, clock: index.system.clock, backlinkScores, summaryTtlMs: 3_600_000, view: async (p) => recorded(await index.view(p), p) });
      // Each read a query makes of a partition's view, recorded by partition.
      const recorded = <V extends object>(view: V, p: number): V =>
        new Proxy(view, {
          get(target, key) {
            const value = Reflect.get(target, key, target) as unknown;
            return typeof value === 'function' ? (...args: unknown[]) => (read.push(p), (value as (...a: unknown[]) => unknown).apply(target, args)) : value;
          },
        });
      const copies = service('copies');
      const sources = service('sources');
      await copies.topPages(); // the summary (the normaliser), cached for the hour
      await sources.topPages();
      read.length = 0;
      const a = await copies.backlinks(hub, { limit: 1000 });
      assert.deepEqual([...new Set(read)], [hubPartition], 'the copies path reads the hub\'s partition only');
      read.length = 0;
      const b = await sources.backlinks(hub, { limit: 1000 });
      assert.ok(new Set(read).size > 1, `the fan-out path reads the sources' partitions (${[...new Set(read)]})`);
      assert.ok(a.found && b.found);
      assert.equal(a.body.total, indegree.get(hub));
      assert.equal(a.body.total, b.body.total);
      const exact = new Map(b.body.links.map((l) => [l.url, l.score]));
      for (const l of a.body.links) {
        const s = exact.get(l.url)!;
        // copy within the bound of x, and x within the tolerance of x + r
        assert.ok(Math.abs(l.score - s) <= COPY_RELATIVE_BOUND * s + 1e-9, `${l.url}: copy score ${l.score}, score ${s}`);
      }
      for (let i = 1; i < a.body.links.length; i++) assert.ok(a.body.links[i - 1]!.score >= a.body.links[i]!.score, 'sorted by the copies');
    } finally {
      await index.stop();
      await broker.close();
    }
    const found = await checkBacklinkCopies(dir, partitions);
    assert.equal(found.backlinks, 18938);
    assert.ok(found.local > 0 && found.local < 18938, `local backlinks ${found.local}`);
    assert.equal(found.missing, 0, found.example);
    assert.equal(found.outside, 0, found.example);
    assert.ok(found.largest <= COPY_RELATIVE_BOUND);
    t.diagnostic(`largest relative gap between a copy and its source's x: ${found.largest}; copies without a link: ${found.copiesWithoutLink}`);
  } finally {
    cleanup();
  }
});

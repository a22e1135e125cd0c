import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { DirectedGraph } from 'graphology';
import pagerank from 'graphology-metrics/centrality/pagerank.js';
import { rankGraph, l1Distance } from '../src/jobs/rankGraph.js';
import { readGraph } from '../src/replay/graphFile.js';
import { uniformWeights } from '../src/actors/metrics/weights.js';
import { MemoryBroker } from '../src/runtime/brokers/memory.js';
import { PayloadTooLargeError } from '../src/errors.js';
import { memoryLogger, tempDir } from './kit/datasets.js';

// Found by a new user: messages were bounded by their entries only (4,096 contributions, 512
// link operations, 64 pages), so a graph of 1.4 KB URLs made 6.7 MB metric messages that the
// broker refused; the committed outbox row stayed first in its queue and the metric actor
// restarted for ever (a rank ran until killed). Now every message is bounded by its bytes
// too, and an outbox row that no broker send takes stops the job with its reason.

/** 3,000 pages of 2.5 KB URLs on 60 hosts, two outlinks each (a seeded LCG). */
function longUrlGraph(dir: string): { pages: string; links: string } {
  const pad = 'x'.repeat(2500);
  const url = (i: number) => `http://h${i % 60}.example/${pad}/${i}`;
  let seed = 12345;
  const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  const pages: string[] = [];
  const links: string[] = [];
  for (let i = 0; i < 3000; i++) {
    pages.push(url(i));
    for (let k = 0; k < 2; k++) links.push(`${url(i)}\t${url(Math.floor(next() * 3000))}`);
  }
  const files = { pages: join(dir, 'pages.txt'), links: join(dir, 'links.tsv') };
  writeFileSync(files.pages, pages.join('\n') + '\n');
  writeFileSync(files.links, links.join('\n') + '\n');
  return files;
}

test('a graph of long URLs ranks exactly: its messages stay under the broker limit', { timeout: 300_000 }, async () => {
  const { dir, cleanup } = tempDir('shardflow-long-urls-');
  try {
    const files = longUrlGraph(dir);
    const graph = await readGraph(files.pages, files.links);
    const broker = new MemoryBroker();
    const result = await rankGraph({ graph, partitions: 2, dataDir: join(dir, 'data'), broker, weigh: uniformWeights, tolerance: 1e-9, log: memoryLogger().log });
    await broker.close();
    assert.ok(result.converge.converged);
    const g = new DirectedGraph({ allowSelfLoops: true });
    for (const p of graph.pages) g.addNode(p);
    for (const [s, ts] of graph.links) for (const t of ts) g.mergeEdge(s, t);
    const exact = (pagerank as unknown as (g: DirectedGraph, o: object) => Record<string, number>)(g, { alpha: 0.85, tolerance: 1e-14, maxIterations: 10_000, getEdgeWeight: null });
    const l1 = l1Distance(new Map(result.scores), new Map(Object.entries(exact)));
    assert.ok(l1 <= 1e-8, `L1 ${l1}`);
  } finally {
    cleanup();
  }
});

test('a message that no send takes stops the rank with its reason (it restarted for ever)', { timeout: 300_000 }, async () => {
  const { dir, cleanup } = tempDir('shardflow-long-urls-');
  try {
    const files = longUrlGraph(dir);
    const graph = await readGraph(files.pages, files.links);
    // The loader's messages (cut at two thirds of the broker's limit) pass; the metric
    // actors' (256 KiB of keys a section, contributions and copies: over 512 KiB) do not.
    const broker = new MemoryBroker({ maxPayloadBytes: 450 << 10 });
    const started = Date.now();
    await assert.rejects(
      rankGraph({ graph, partitions: 2, dataDir: join(dir, 'data'), broker, weigh: uniformWeights, tolerance: 1e-9, log: memoryLogger().log }),
      (err: Error) => {
        const chain = [err, err.cause].filter((e): e is Error => e instanceof Error);
        assert.ok(chain.some((e) => e instanceof PayloadTooLargeError || /maxPayloadBytes/.test(e.message)), `${err.name}: ${err.message}`);
        return true;
      },
    );
    assert.ok(Date.now() - started < 120_000, 'it stopped, not after a watchdog');
    await broker.close();
  } finally {
    cleanup();
  }
});

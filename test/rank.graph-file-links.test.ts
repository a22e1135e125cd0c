import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { rankGraph, l1Distance } from '../src/jobs/rankGraph.js';
import { readGraph } from '../src/replay/graphFile.js';
import { uniformWeights, weightTable, type WeightFunction } from '../src/actors/metrics/weights.js';
import { MemoryBroker } from '../src/runtime/brokers/memory.js';
import { memoryLogger, tempDir } from './kit/datasets.js';

// Found by a new user ranking graph files of their own: a link from a page to itself was not
// a self link (`"selfLink": 0` in a weight table changed nothing), and `rank --update` gave
// every URL named only as a link target no outlinks, so adding one link wiped its target's.

/**
 * PageRank by power iteration (damping 0.85, dangling mass spread uniformly), each edge
 * weighted by `weight(source, target)` and normalised per source; a source whose weights sum
 * to 0 is dangling. Iterated until the L1 change is under 1e-15.
 */
function pageRank(pages: readonly string[], links: ReadonlyMap<string, readonly string[]>, weight: (s: string, t: string) => number): Map<string, number> {
  const n = pages.length;
  const index = new Map(pages.map((p, i) => [p, i]));
  let x = new Array<number>(n).fill(1 / n);
  for (let iter = 0; iter < 10_000; iter++) {
    const next = new Array<number>(n).fill(0);
    let dangling = 0;
    pages.forEach((p, i) => {
      const out = [...new Set(links.get(p) ?? [])];
      const total = out.reduce((t, q) => t + weight(p, q), 0);
      if (total === 0) dangling += x[i]!;
      else for (const q of out) next[index.get(q)!]! += (0.85 * x[i]! * weight(p, q)) / total;
    });
    for (let i = 0; i < n; i++) next[i]! += (0.15 + 0.85 * dangling) / n;
    const change = next.reduce((t, v, i) => t + Math.abs(v - x[i]!), 0);
    x = next;
    if (change < 1e-15) break;
  }
  return new Map(pages.map((p, i) => [p, x[i]!]));
}

async function rank(dir: string, name: string, lines: { pages: string[]; links: Array<[string, string]> }, dataDir: string, weigh: WeightFunction) {
  const pages = join(dir, `${name}-pages.txt`);
  const links = join(dir, `${name}-links.tsv`);
  writeFileSync(pages, lines.pages.map((p) => `${p}\n`).join(''));
  writeFileSync(links, lines.links.map(([s, t]) => `${s}\t${t}\n`).join(''));
  const graph = await readGraph(pages, links);
  const result = await rankGraph({ graph, partitions: 3, dataDir, broker: new MemoryBroker(), weigh, tolerance: 1e-10, log: memoryLogger().log });
  assert.ok(result.converge.converged);
  return new Map(result.scores);
}

describe('graph files: self links and link targets of an update', () => {
  it('a link from a page to itself is a self link: "selfLink": 0 drops it, and a page left without links is dangling', async () => {
    const { dir, cleanup } = tempDir('shardflow-selflink-');
    try {
      const a1 = 'http://a.test/1';
      const a2 = 'http://a.test/2';
      const b = 'http://b.test/';
      const graph = { pages: [a1, a2, b], links: [[a1, a1], [a2, a1], [b, a2]] as Array<[string, string]> };
      const scores = await rank(dir, 'g', graph, join(dir, 'data'), weightTable({ selfLink: 0 }));
      const expected = pageRank(graph.pages, new Map([[a1, [a1]], [a2, [a1]], [b, [a2]]]), (s, t) => (s === t ? 0 : 1));
      // a1 is dangling now (0.4744, 0.3412, 0.1844), not a sink of rank (0.8575 with its self link kept)
      assert.ok(l1Distance(scores, expected) <= 1e-8, `L1 ${l1Distance(scores, expected)}: ${JSON.stringify([...scores])}`);
      assert.ok(scores.get(a1)! < 0.5, `a1 ${scores.get(a1)}`);
    } finally {
      cleanup();
    }
  });

  it('rank --update: a URL named only as a link target keeps its outlinks; a listed page or a link source gets exactly the given ones', async () => {
    const { dir, cleanup } = tempDir('shardflow-update-targets-');
    try {
      const u = (h: string, i: number) => `http://${h}.test/${i}`;
      const [a, b, c, d, e, f] = [u('a', 1), u('b', 1), u('c', 1), u('a', 2), u('d', 1), u('e', 1)];
      const dataDir = join(dir, 'data');
      // The graph: a -> b -> c -> a, b -> d, d -> a, c -> e.
      await rank(dir, 'base', { pages: [a, b, c, d, e], links: [[a, b], [b, c], [c, a], [b, d], [d, a], [c, e]] }, dataDir, uniformWeights);
      // The change: a gains a link to f (new) and to c (stored: its outlinks stay); e is listed
      // with no links (it had none); d is listed with a link to e instead of a.
      const scores = await rank(dir, 'change', { pages: [a, e], links: [[a, b], [a, f], [a, c], [d, e]] }, dataDir, uniformWeights);
      const after = new Map<string, string[]>([[a, [b, f, c]], [b, [c, d]], [c, [a, e]], [d, [e]]]);
      const expected = pageRank([a, b, c, d, e, f], after, () => 1);
      assert.equal(scores.size, 6);
      assert.ok(l1Distance(scores, expected) <= 1e-8, `L1 ${l1Distance(scores, expected)} to the changed graph`);
    } finally {
      cleanup();
    }
  });
});

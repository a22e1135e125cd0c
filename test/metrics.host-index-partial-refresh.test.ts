import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readGraph } from '../src/replay/graphFile.js';
import { graphPage, publishFetches } from '../src/jobs/graphLoader.js';
import { hostOf } from '../src/index.js';
import { seededRandom } from '../src/runtime/supervision/seededRandom.js';
import type { WebIndex } from '../src/topology/webIndex.js';
import { graphs } from './kit/datasets.js';
import { withLoadedWebIndex } from './kit/loadedIndex.js';

/**
 * Checks every partition's hosts index against its live pages' raw scores (x + r, read from
 * `ranks`): per host the pages, the sum, the highest score and its page, and the totals.
 */
async function assertHostIndexMatchesScores(index: WebIndex, pages: readonly string[], live: ReadonlySet<string>, label: string): Promise<void> {
  for (let p = 0; p < index.partitioner.partitions; p++) {
    const mine = pages.filter((u) => live.has(u) && Number(index.partitioner.forHost(hostOf(u))) === p);
    const view = await index.view(p);
    const scores = await view.rawScores(mine);
    const expected = new Map<string, { pages: number; sum: number; max: number; best: string }>();
    let total = 0;
    mine.forEach((url, i) => {
      const s = scores[i]!;
      total += s;
      const h = expected.get(hostOf(url));
      if (!h) expected.set(hostOf(url), { pages: 1, sum: s, max: s, best: url });
      else {
        h.pages++;
        h.sum += s;
        if (s > h.max || (s === h.max && url < h.best)) Object.assign(h, { max: s, best: url });
      }
    });
    const { totals, hosts } = await view.hostIndex();
    assert.ok(totals, `${label}: partition ${p} has totals`);
    assert.equal(totals.pages, mine.length, `${label}: partition ${p} pages`);
    assert.equal(totals.hosts, expected.size, `${label}: partition ${p} hosts`);
    assert.ok(Math.abs(totals.total - total) <= 1e-12 * total, `${label}: partition ${p} total ${totals.total} against ${total}`);
    assert.equal(hosts.length, expected.size, `${label}: partition ${p} host records`);
    for (const [host, record] of hosts) {
      const e = expected.get(host);
      assert.ok(e, `${label}: ${host} has live pages`);
      assert.equal(record.pages, e.pages, `${label}: ${host} pages`);
      assert.ok(Math.abs(record.sum - e.sum) <= 1e-12 * e.sum, `${label}: ${host} sum ${record.sum} against ${e.sum}`);
      assert.ok(Math.abs(record.max - e.max) <= 1e-12 * e.max, `${label}: ${host} max ${record.max} against ${e.max}`);
      assert.equal(record.best, e.best, `${label}: ${host} best page`);
    }
  }
}

test('after a recrawl, converge rewrites only the hosts whose scores moved, and the hosts index still equals a walk of the live pages; a deletion refreshes it in full', { timeout: 300_000 }, async () => {
  const dir = graphs.polblogs;
  const graph = await readGraph(`${dir}/pages.txt`, `${dir}/links.tsv`);
  const live = new Set(graph.pages);
  await withLoadedWebIndex(dir, 4, async (index) => {
    assert.ok((await index.converge({ tolerance: 1e-9 })).converged);
    await assertHostIndexMatchesScores(index, graph.pages, live, 'fresh');
    const again = await index.indexHosts();
    assert.ok(again.every((t) => t.rewritten === 0), `nothing moved since converge's refresh: ${again.map((t) => t.rewritten).join(', ')} rewritten`);

    // A recrawl: 5 pages with outlinks keep their first link only (live pages stay live:
    // no page enters or leaves, so the refresh is partial).
    const random = seededRandom(11);
    const withLinks = graph.pages.filter((u) => (graph.links.get(u)?.length ?? 0) > 2);
    const recrawled = Array.from({ length: 5 }, () => withLinks[Math.floor(random() * withLinks.length)]!);
    await publishFetches(index.broker, index.partitioner, index.counters, recrawled.map((u) => graphPage(u, graph.links.get(u)!.slice(0, 1), 1)));
    await index.quiescence({ pollMs: 5 });
    assert.ok((await index.converge({ tolerance: 1e-9 })).converged);
    await assertHostIndexMatchesScores(index, graph.pages, live, 'after the recrawl');
    const hostsNow = await index.indexHosts();
    assert.ok(hostsNow.every((t) => t.rewritten === 0), 'converge left nothing to rewrite');

    // Scores moved on some hosts only: a partial refresh wrote them, not every host. Seen by
    // converging a second small change and counting what converge's refresh rewrote.
    const second = withLinks.filter((u) => !recrawled.includes(u))[0]!;
    await publishFetches(index.broker, index.partitioner, index.counters, [graphPage(second, graph.links.get(second)!.slice(1), 2)]);
    await index.quiescence({ pollMs: 5 });
    const totalHosts = hostsNow.reduce((t, x) => t + x.hosts, 0);
    assert.ok((await index.converge({ tolerance: 1e-9 })).converged);
    await assertHostIndexMatchesScores(index, graph.pages, live, 'after the second change');
    const rewrittenBy: number[] = [];
    for (let p = 0; p < index.partitioner.partitions; p++) {
      const { totals } = await (await index.view(p)).hostIndex();
      rewrittenBy.push(totals!.rewritten!);
    }
    const rewritten = rewrittenBy.reduce((a, b) => a + b, 0);
    assert.ok(rewritten > 0 && rewritten < totalHosts, `the second change's refresh rewrote ${rewritten} of ${totalHosts} hosts`);

    // A deletion (410 twice) takes a page out of the live pages: a full refresh.
    const gone = withLinks.filter((u) => !recrawled.includes(u) && u !== second)[0]!;
    for (const at of [3, 4]) await publishFetches(index.broker, index.partitioner, index.counters, [{ url: gone, status: 410, fetchedAt: at, error: 'HTTP 410' }]);
    await index.quiescence({ pollMs: 5 });
    assert.ok((await index.converge({ tolerance: 1e-9 })).converged);
    live.delete(gone);
    const p = Number(index.partitioner.forHost(hostOf(gone)));
    const { totals } = await (await index.view(p)).hostIndex();
    assert.equal(totals!.rewritten, totals!.hosts, 'a page left the partition: every host rewritten');
    await assertHostIndexMatchesScores(index, graph.pages, live, 'after the deletion');
  });
});

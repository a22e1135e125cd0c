import { graphPage, publishFetches } from '../src/jobs/graphLoader.js';
import { seededRandom } from '../src/runtime/supervision/seededRandom.js';
import { hostOf } from '../src/index.js';
import { rankBenchOptions } from './lib/rankOptions.js';
import { allAlive, errors, linkCount, loadGraph, rankedIndex, replaceOutlinks, secs, type Graph } from './lib/changingGraph.js';

/** Top-level fields of the result line besides bench/run.mjs's (checked by test/bench.smoke.test.ts). */
export const resultFields = ['smoke', 'graph', 'partitions', 'tolerance', 'pages', 'links', 'fresh', 'changes'] as const;

/**
 * The cost of an update (issue 18, item 1): ranks a graph (default cnr-2000 from bench/data,
 * 325,557 pages, 3,216,152 links) through the full pipeline on `--partitions` (default 16),
 * then applies four changes one after the other through the pipeline as a recrawl does (new
 * fetch results on `fetches/<p>`, the indexers' outlink diffs and metric corrections; a
 * deleted page answers 410 twice) and converges again to the same `--tolerance` (default
 * 1e-6) after each:
 * - (a) `host`: one host recrawled, up to 256 of its pages (all fetched again: `pagesRecrawled`),
 *   10% of their outlinks replaced by
 *   other pages of the same host (a recrawl is local);
 * - (b) `spread`: 0.1% of the pages, spread over hosts, each with 10% of its outlinks (at least
 *   one) replaced by pages of its host;
 * - (c) `links`: 1% of all links replaced by links to pages chosen uniformly;
 * - (d) `deleted`: 0.05% of the pages deleted (and the pages linking to them recrawled without
 *   those links).
 * For each: pages and links changed, the seconds the pipeline took to apply it, then the
 * metric's rounds, pushes, messages and converge seconds, the L1 distance and the largest
 * per-page error of the scores to the exact PageRank of the changed graph (power iteration
 * in memory to 1e-13, `exactPageRank` of bench/lib/changingGraph.ts), and the ratios of pushes and seconds to the first,
 * fresh computation of the same run (on the unchanged graph, which differs from each changed
 * one by at most 1% of its links). Beside the wall seconds, each converge call's CPU seconds
 * (`process.cpuUsage`, the whole process: every partition runs in it) and `cpuRatio`, steadier
 * than the seconds on a shared machine, and what its rounds cost (`roundCosts`: the rounds'
 * seconds, the seconds after the last round, the median seconds of a round that pushed
 * little). `--changes host,spread,...` runs only the changes named, in their order (each
 * drawn on the graph the earlier ones left; default all four); `--graph DIR` another graph
 * (pages.txt, links.tsv). `--smoke`: polblogs on 4 partitions.
 * Logs (warnings) go to stderr: stdout holds the result line only.
 */
export async function run(args: string[]): Promise<Record<string, unknown>> {
  const { partitions, tolerance, thresholdFactor, file, fields, options } = rankBenchOptions(args);
  const only = options.string('--changes', 'host,spread,links,deleted').split(',');
  const unknown = only.filter((c) => !['host', 'spread', 'links', 'deleted'].includes(c));
  if (unknown.length > 0) throw new RangeError(`--changes: unknown change ${unknown.join(', ')} (host, spread, links, deleted)`);
  const g = await loadGraph(file('pages.txt'), file('links.tsv'));
  const random = seededRandom(18);
  const ranked = await rankedIndex(g, { partitions, tolerance, thresholdFactor });
  const { index, convergeOptions, full } = ranked;
  let fetchedAt = 0;
  try {
    const freshErr = await errors(index, g);
    const fresh = { loadSeconds: secs(ranked.loadMs), convergeSeconds: secs(ranked.convergeMs), cpuSeconds: secs(ranked.convergeCpuMs), rounds: full.rounds, pushes: full.pushes, messages: full.messages, converged: full.converged, ...freshErr };

    const changes: Array<Record<string, unknown>> = [];
    const plans: Array<[string, () => Change]> = [
      ['host', () => recrawlHost(g, random)],
      ['spread', () => recrawlSpread(g, random, 0.001)],
      ['links', () => replaceLinks(g, random, 0.01)],
      ['deleted', () => deletePages(g, random, 0.0005)],
    ];
    for (const [name, plan] of plans) {
      if (!only.includes(name)) continue;
      const change = plan();
      const a0 = performance.now();
      fetchedAt++;
      await publishFetches(index.broker, index.partitioner, index.counters, [...change.recrawled, ...(change.unchanged ?? [])].map((p) => graphPage(g.pages[p]!, g.out[p]!.map((t) => g.pages[t]!), fetchedAt)));
      for (let twice = 0; twice < 2 && change.deleted.length > 0; twice++) {
        fetchedAt++;
        await publishFetches(index.broker, index.partitioner, index.counters, change.deleted.map((p) => ({ url: g.pages[p]!, status: 410, fetchedAt, error: 'HTTP 410' })));
      }
      await index.quiescence({ pollMs: 5 });
      const a1 = performance.now();
      const cpu1 = process.cpuUsage();
      // Each round's wall time (from the call, or the previous round's end, to its summary)
      // and pushes: what a round costs beside what it pushes.
      const roundLog: Array<{ ms: number; pushed: number }> = [];
      let roundStart = a1;
      const inc = await index.converge({
        ...convergeOptions,
        onRound: (r) => {
          const now = performance.now();
          roundLog.push({ ms: now - roundStart, pushed: r.pushed });
          roundStart = now;
        },
      });
      const a2 = performance.now();
      const cpu = process.cpuUsage(cpu1);
      const err = await errors(index, g);
      changes.push({
        change: name,
        pagesRecrawled: change.recrawled.size + (change.unchanged?.length ?? 0),
        pagesChanged: change.recrawled.size + change.deleted.length,
        pagesDeleted: change.deleted.length,
        linksChanged: change.links,
        applySeconds: secs(a1 - a0),
        rounds: inc.rounds,
        pushes: inc.pushes,
        messages: inc.messages,
        seconds: secs(a2 - a1),
        cpuSeconds: secs((cpu.user + cpu.system) / 1000),
        ...roundCosts(roundLog, a2 - roundStart),
        converged: inc.converged,
        ...err,
        pushRatio: ratio(inc.pushes / Math.max(1, full.pushes)),
        secondsRatio: ratio((a2 - a1) / ranked.convergeMs),
        cpuRatio: ratio((cpu.user + cpu.system) / 1000 / ranked.convergeCpuMs),
      });
    }
    return { ...fields, pages: g.pages.length, links: linkCount(g), fresh, changes };
  } finally {
    await ranked.close();
  }
}

/**
 * What one change did: pages to recrawl with new outlinks (in `Graph.out`), pages recrawled
 * as they were (`unchanged`: fetched again, the indexer's diff finds nothing), pages deleted,
 * links replaced.
 */
interface Change {
  readonly recrawled: Set<number>;
  readonly unchanged?: number[];
  readonly deleted: number[];
  links: number;
}

/** (a): a host with the most pages (ties drawn), up to 256 pages, 10% of their outlinks replaced within the host. */
function recrawlHost(g: Graph, random: () => number): Change {
  let most = 0;
  for (const list of g.hosts.values()) most = Math.max(most, Math.min(256, list.length));
  const candidates = [...g.hosts.values()].filter((l) => Math.min(256, l.length) === most && l.some((p) => g.out[p]!.length > 0));
  const host = candidates[Math.floor(random() * candidates.length)]!.slice(0, 256);
  const pool = host.length > 1 ? host : allAlive(g);
  const change: Change = { recrawled: new Set(), deleted: [], links: 0 };
  // 10% of all the host's outlinks, drawn over its pages in proportion to their outlinks.
  const links: Array<[number, number]> = [];
  for (const p of host) for (let i = 0; i < g.out[p]!.length; i++) links.push([p, i]);
  const wanted = Math.max(1, Math.round(links.length * 0.1));
  for (let k = 0; k < wanted; k++) {
    const [p] = links[Math.floor(random() * links.length)]!;
    if (replaceOutlinks(g, p, 0, 1, pool, random) > 0) {
      change.links++;
      change.recrawled.add(p);
    }
  }
  // The host's other pages are fetched again too, as a recrawl of the host does.
  return { ...change, unchanged: host.filter((p) => !change.recrawled.has(p)) };
}

/** (b): `share` of the pages (with outlinks), drawn over the whole graph, 10% of each one's outlinks replaced within its host. */
function recrawlSpread(g: Graph, random: () => number, share: number): Change {
  const change: Change = { recrawled: new Set(), deleted: [], links: 0 };
  const wanted = Math.max(1, Math.round(g.pages.length * share));
  while (change.recrawled.size < wanted) {
    const p = Math.floor(random() * g.pages.length);
    if (!g.alive[p] || g.out[p]!.length === 0 || change.recrawled.has(p)) continue;
    const host = g.hosts.get(hostOf(g.pages[p]!))!;
    change.links += replaceOutlinks(g, p, 0.1, 1, host.length > 1 ? host : allAlive(g), random);
    change.recrawled.add(p);
  }
  return change;
}

/** (c): `share` of all links replaced by links to pages drawn uniformly. */
function replaceLinks(g: Graph, random: () => number, share: number): Change {
  const change: Change = { recrawled: new Set(), deleted: [], links: 0 };
  const sources: number[] = [];
  for (let p = 0; p < g.out.length; p++) for (let i = 0; i < g.out[p]!.length; i++) if (g.alive[p]) sources.push(p);
  const alive = allAlive(g);
  const wanted = Math.max(1, Math.round(sources.length * share));
  while (change.links < wanted) {
    const p = sources[Math.floor(random() * sources.length)]!;
    if (replaceOutlinks(g, p, 0, 1, alive, random) === 0) continue;
    change.links++;
    change.recrawled.add(p);
  }
  return change;
}

/**
 * (d): `share` of the pages deleted (410 twice): they lose their outlinks, and the pages that
 * linked to them are recrawled without those links (as in the changed graph's file, where a
 * link would make its target a page again).
 */
function deletePages(g: Graph, random: () => number, share: number): Change {
  const deleted = new Set<number>();
  const wanted = Math.max(1, Math.round(g.pages.length * share));
  while (deleted.size < wanted) {
    const p = Math.floor(random() * g.pages.length);
    if (g.alive[p]) deleted.add(p);
  }
  let links = 0;
  const recrawled = new Set<number>();
  for (const p of deleted) {
    g.alive[p] = 0;
    links += g.out[p]!.length;
    g.out[p] = [];
  }
  for (let p = 0; p < g.out.length; p++) {
    const before = g.out[p]!.length;
    if (before === 0) continue;
    const kept = g.out[p]!.filter((t) => !deleted.has(t));
    if (kept.length === before) continue;
    links += before - kept.length;
    g.out[p] = kept;
    recrawled.add(p);
  }
  return { recrawled, deleted: [...deleted], links };
}

/**
 * What the rounds of one converge call cost: `roundSeconds` the sum of the rounds' wall
 * times, `afterRoundsSeconds` the rest of the call after the last round (the host index),
 * and `quietRoundMs` the median wall time of the rounds that pushed at most 1,000 pages
 * (a round's fixed cost; null when none did).
 */
function roundCosts(log: ReadonlyArray<{ ms: number; pushed: number }>, afterMs: number): { roundSeconds: number; afterRoundsSeconds: number; quietRoundMs: number | null } {
  const quiet = log.filter((r) => r.pushed <= 1000).map((r) => r.ms).sort((a, b) => a - b);
  return {
    roundSeconds: secs(log.reduce((t, r) => t + r.ms, 0)),
    afterRoundsSeconds: secs(afterMs),
    quietRoundMs: quiet.length > 0 ? Math.round(quiet[Math.floor(quiet.length / 2)]! * 10) / 10 : null,
  };
}

function ratio(x: number): number {
  return Math.round(x * 10_000) / 10_000;
}

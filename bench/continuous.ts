import { writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { graphPage, publishFetches } from '../src/jobs/graphLoader.js';
import type { WebIndex } from '../src/topology/webIndex.js';
import { seededRandom } from '../src/runtime/supervision/seededRandom.js';
import type { ConvergeOptions, ConvergeResult, RoundSummary } from '../src/actors/metrics/coordinator.js';
import { hostOf } from '../src/index.js';
import { topic, topicName } from '../src/runtime/topics.js';
import { Namespaces } from '../src/actors/namespaces.js';
import { rankBenchOptions } from './lib/rankOptions.js';
import { allAlive, errors, linkCount, loadGraph, rankedIndex, replaceOutlinks, secs, type Graph } from './lib/changingGraph.js';
import { ownCpuSeconds, peakRss } from './lib/processCost.js';

/** Top-level fields of the result line besides bench/run.mjs's (checked by test/bench.smoke.test.ts). */
export const resultFields = ['smoke', 'graph', 'partitions', 'tolerance', 'rate', 'seconds', 'pages', 'links', 'load', 'changes', 'staleness', 'rounds', 'pushes', 'messages', 'cpu', 'rss', 'l1', 'maxError', 'loadAverage'] as const;

/** Milliseconds between two batches of recrawled pages (`--tick-ms`): 50 pages/s go as 5 pages every 100 ms. */
const TICK_MS = 100;
/** Milliseconds between two looks at the indexers' acks (`commitPoll`): the most a commit time is read late. */
const COMMIT_POLL_MS = 5;

/**
 * A steady stream of recrawls (issue 18, item 3): ranks a graph (default cnr-2000 from
 * bench/data, 325,557 pages) through the full pipeline on `--partitions` (default 16) to
 * `--tolerance` (default 1e-6), then, for `--seconds` (default 300), recrawls `--rate` pages
 * per second (default 50; in batches every `--tick-ms`, default 100) while the metric runs in
 * continuous mode (one `converge` call whose rounds go on while the graph changes). Each
 * recrawled page is drawn uniformly among the pages with outlinks, 10% of its outlinks (at
 * least one) replaced by other pages of its host (of the whole graph for a host of one page),
 * and sent as a new fetch result on `fetches/<p>` as a crawler does; the indexer stores it,
 * diffs its outlinks and sends the metric corrections. Once the stream stops, the rounds go on
 * until the graph is quiet and the bound holds; then the scores are compared with the exact
 * PageRank of the final graph.
 *
 * Staleness of a change (seconds; p50, p99, max over the recrawled pages): from its commit to
 * the end of the first round that started after the commit and ended with the stopping
 * bound (RoundSummary.bound) at or under the tolerance.
 * - Commit: the indexer's ack of the fetch message, which follows its write batch (page,
 *   outlinks, applied marks, the corrections' outbox rows) and the hand-over of the
 *   corrections to the broker (`applyExactlyOnce`: write, outbox publish, ack). Read from the
 *   per-topic counts of `fetches/<p>` (`WebIndex.topicFlow`; one indexer per topic acks in
 *   order), every COMMIT_POLL_MS: a commit is seen at most that late, which shortens its
 *   staleness by as much and only delays the first round that may count it.
 * - A round's start is taken as the moment the previous round's `onRound` returned (the
 *   coordinator starts the next one after it, and after a 10 ms pause in continuous mode), so
 *   the start used is never later than the real one and a round counted as started after a
 *   commit did. Its corrections were on the broker before the round began; a partition folds
 *   them before the round's barrier replies (its mailbox had them first), so the bound of that
 *   round counts them.
 *
 * Also: CPU (process CPU seconds, all threads, per wall second of the stream), RSS (peak
 * during the stream, from `VmHWM` after resetting it through /proc/self/clear_refs, and at
 * the end), the changes applied, rounds, pushes and messages of the continuous call, the
 * seconds from the end of the stream to convergence, and the load average beside them.
 * `--smoke`: polblogs on 4 partitions, 20 pages/s for 4 s.
 * Logs (warnings) go to stderr: stdout holds the result line only.
 */
export async function run(args: string[]): Promise<Record<string, unknown>> {
  const { options: o, partitions, tolerance, thresholdFactor, file, fields } = rankBenchOptions(args);
  const rate = o.number('--rate', 50, 20);
  const seconds = o.number('--seconds', 300, 4);
  const tickMs = o.number('--tick-ms', TICK_MS);
  const g = await loadGraph(file('pages.txt'), file('links.tsv'));
  const random = seededRandom(183);
  const ranked = await rankedIndex(g, { partitions, tolerance, thresholdFactor });
  const { index, convergeOptions, full } = ranked;
  try {
    const load = { loadSeconds: secs(ranked.loadMs), convergeSeconds: secs(ranked.convergeMs), rounds: full.rounds, pushes: full.pushes, converged: full.converged, peakRssMiB: peakRss(process.pid) };

    const stream = await recrawlStream(index, g, random, { rate, seconds, tickMs, tolerance, convergeOptions });
    const err = await errors(index, g);
    const staleness = stream.staleness.sort((a, b) => a - b);
    return {
      ...fields,
      rate,
      seconds,
      tickMs,
      pages: g.pages.length,
      links: linkCount(g),
      load,
      changes: { pages: stream.pages, links: stream.links, batches: stream.batches, ratePerSecond: round3(stream.pages / (stream.streamMs / 1000)), unresolved: stream.unresolved },
      staleness: { changes: staleness.length, p50: quantile(staleness, 0.5), p99: quantile(staleness, 0.99), max: staleness.at(-1) ?? null, mean: round3(staleness.reduce((a, b) => a + b, 0) / Math.max(1, staleness.length)) },
      rounds: { ...stream.rounds, count: stream.result.rounds, converged: stream.result.converged },
      pushes: stream.result.pushes,
      messages: stream.result.messages,
      drainSeconds: secs(stream.drainMs),
      cpu: { streamSeconds: secs(stream.streamMs), cpuSeconds: round3(stream.cpuSeconds), perWallSecond: round3(stream.cpuSeconds / (stream.streamMs / 1000)) },
      rss: { peakMiB: stream.peakRssMiB, endMiB: Math.round(process.memoryUsage().rss / 2 ** 20), peakResetAtStream: stream.peakReset },
      ...err,
      loadAverage: loadavg().map(round3),
    };
  } finally {
    await ranked.close();
  }
}

/** One batch of recrawled pages: the per-topic counts of `fetches/<p>` that mean it is acked, its commit time once seen, the round end that made it fresh. */
interface Batch {
  readonly pages: number;
  /** `fetches/<p>` topic name -> sent count of that topic once the batch was sent. */
  readonly acked: ReadonlyMap<string, number>;
  committedAt: number | undefined;
  freshAt: number | undefined;
}

/** What `recrawlStream` measured. */
interface StreamReport {
  readonly pages: number;
  readonly links: number;
  readonly batches: number;
  /** Wall milliseconds of the stream (first batch to the last one sent). */
  readonly streamMs: number;
  /** Wall milliseconds from the last batch to the continuous call's return. */
  readonly drainMs: number;
  readonly cpuSeconds: number;
  readonly peakRssMiB: number;
  readonly peakReset: boolean;
  /** Seconds from commit to freshness, one entry per recrawled page. */
  readonly staleness: number[];
  /** Batches not seen fresh: always 0 (more are refused with an Error). */
  readonly unresolved: number;
  readonly result: ConvergeResult;
  readonly rounds: { readonly duringStream: number; readonly boundHeld: number; readonly boundOverTolerance: { readonly min: number | null; readonly p50: number | null; readonly p99: number | null; readonly max: number | null }; readonly meanSeconds: number; readonly p99Seconds: number | null; readonly maxSeconds: number | null; readonly meanPushed: number };
}

/**
 * Recrawls `rate` pages per second for `seconds` while one `converge` call runs in continuous
 * mode, and waits for it to converge once the stream stopped (see `run` for the definitions).
 * @throws what the index and the broker throw; Error when the continuous call ends before the
 *   stream does (it cannot: it is not quiet meanwhile)
 */
async function recrawlStream(index: WebIndex, g: Graph, random: () => number, o: { rate: number; seconds: number; tickMs: number; tolerance: number; convergeOptions: Omit<ConvergeOptions, 'clock' | 'damping' | 'pages' | 'firstRound'> }): Promise<StreamReport> {
  const withOutlinks: number[] = [];
  for (let p = 0; p < g.pages.length; p++) if (g.alive[p] && g.out[p]!.length > 0) withOutlinks.push(p);
  if (withOutlinks.length === 0) throw new Error('the graph has no page with outlinks to recrawl');
  const everyPage = allAlive(g); // no page is deleted here: drawn once
  const sentOf = (): Map<string, number> => {
    const m = new Map<string, number>();
    for (const t of index.topicFlow.topics()) if (t.namespace === Namespaces.fetches) m.set(`${t.namespace}/${t.partition}`, t.sent);
    return m;
  };
  const settledOf = (): Map<string, number> => {
    const m = new Map<string, number>();
    for (const t of index.topicFlow.topics()) if (t.namespace === Namespaces.fetches) m.set(`${t.namespace}/${t.partition}`, t.settled);
    return m;
  };
  const batches: Batch[] = [];
  let uncommitted = 0; // batches[uncommitted..] have no commit time yet (acked in send order per topic: checked in order)
  const seeCommits = () => {
    if (uncommitted >= batches.length) return;
    const settled = settledOf();
    const now = performance.now();
    for (; uncommitted < batches.length; uncommitted++) {
      const b = batches[uncommitted]!;
      let acked = true;
      for (const [t, n] of b.acked) if ((settled.get(t) ?? 0) < n) acked = false;
      if (!acked) break;
      b.committedAt = now;
    }
  };
  const commitPoll = setInterval(seeCommits, COMMIT_POLL_MS);
  commitPoll.unref(); // an error below must not leave the process waiting on it

  // Round bookkeeping: the start of a round is when the previous onRound returned (never later than the real start).
  const rounds: Array<{ start: number; end: number; bound: number; pushed: number }> = [];
  let roundStart = performance.now();
  let fresh = 0; // batches[..fresh] are fresh
  const onRound = (r: RoundSummary) => {
    seeCommits();
    const end = performance.now();
    rounds.push({ start: roundStart, end, bound: r.bound, pushed: r.pushed });
    if (r.bound <= o.tolerance) {
      for (let i = fresh; i < batches.length; i++) {
        const b = batches[i]!;
        if (b.freshAt !== undefined) continue;
        if (b.committedAt !== undefined && b.committedAt < roundStart) b.freshAt = end;
      }
      while (fresh < batches.length && batches[fresh]!.freshAt !== undefined) fresh++;
    }
    roundStart = performance.now();
  };
  let streaming = true;
  const converging = (first: boolean) => {
    roundStart = performance.now();
    return index.converge({ ...o.convergeOptions, ...(first ? { quiet: () => !streaming && index.counters.balanced() } : {}), onRound });
  };

  // Resets VmHWM to the current RSS (proc(5), /proc/[pid]/clear_refs, value 5), so that the peak read after the stream is the stream's.
  const peakReset = (() => {
    try {
      writeFileSync('/proc/self/clear_refs', '5');
      return true;
    } catch {
      return false; // not Linux, or not allowed: the peak then covers the load too (peakResetAtStream false)
    }
  })();
  const cpu0 = ownCpuSeconds();
  const w0 = performance.now();
  const metric = converging(true);
  // Marks the call's end (an error is thrown where `metric` is awaited below).
  const ended = { value: false };
  void metric.then(
    () => (ended.value = true),
    () => (ended.value = true),
  );
  let pages = 0;
  let links = 0;
  let fetchedAt = 1;
  const due = Math.round(o.rate * o.seconds);
  try {
    for (let tick = 1; pages < due; tick++) {
      const wanted = Math.min(due, Math.floor((o.rate * o.tickMs * tick) / 1000));
      const recrawled = new Set<number>();
      while (pages + recrawled.size < wanted) {
        const p = withOutlinks[Math.floor(random() * withOutlinks.length)]!;
        if (recrawled.has(p)) continue;
        const host = g.hosts.get(hostOf(g.pages[p]!))!;
        links += replaceOutlinks(g, p, 0.1, 1, host.length > 1 ? host : everyPage, random);
        recrawled.add(p);
      }
      if (recrawled.size > 0) {
        fetchedAt++;
        await publishFetches(index.broker, index.partitioner, index.counters, [...recrawled].map((p) => graphPage(g.pages[p]!, g.out[p]!.map((t) => g.pages[t]!), fetchedAt)));
        const sent = sentOf();
        const touched = new Map<string, number>();
        for (const p of recrawled) {
          const t = topicName(topic(Namespaces.fetches, index.partitioner.forUrl(g.pages[p]!)));
          touched.set(t, sent.get(t)!);
        }
        batches.push({ pages: recrawled.size, acked: touched, committedAt: undefined, freshAt: undefined });
        pages += recrawled.size;
      }
      if (ended.value) break; // failed (awaited below), or returned early: refused below
      const wait = w0 + tick * o.tickMs - performance.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    }
  } finally {
    streaming = false;
  }
  const wStop = performance.now();
  const cpuSeconds = ownCpuSeconds() - cpu0;
  const streamMs = wStop - w0;
  const peakRssMiB = peakRss(process.pid);
  let result = await metric;
  if (pages < due) throw new Error(`the continuous converge call returned after ${pages} of ${due} recrawled pages: it must run until the stream stops`);
  const drainMs = performance.now() - wStop;
  // A batch acked during the last round (after it started) was counted by its barrier but is
  // not fresh by the definition: a further call (quiet at once) runs a round that started after it.
  for (let again = 0; again < 3 && (seeCommits(), batches.some((b) => b.freshAt === undefined)); again++) {
    const more = await converging(false);
    result = { ...result, rounds: result.rounds + more.rounds, pushes: result.pushes + more.pushes, messages: result.messages + more.messages, lastRound: more.lastRound, converged: more.converged };
  }
  clearInterval(commitPoll);
  const unresolved = batches.filter((b) => b.freshAt === undefined).length;
  // Percentiles without them would understate the staleness: refused instead.
  if (unresolved > 0) throw new Error(`${unresolved} of ${batches.length} batches of recrawls never seen fresh (no round that started after their commit ended with the bound under the tolerance, in 3 more converge calls)`);

  const staleness: number[] = [];
  for (const b of batches) if (b.freshAt !== undefined && b.committedAt !== undefined) for (let i = 0; i < b.pages; i++) staleness.push(round3((b.freshAt - b.committedAt) / 1000));
  const during = rounds.filter((r) => r.start < wStop);
  const durations = during.map((r) => (r.end - r.start) / 1000).sort((a, b) => a - b);
  return {
    pages,
    links,
    batches: batches.length,
    streamMs,
    drainMs,
    cpuSeconds,
    peakRssMiB,
    peakReset,
    staleness,
    unresolved,
    result,
    rounds: {
      duringStream: during.length,
      boundHeld: during.filter((r) => r.bound <= o.tolerance).length,
      boundOverTolerance: (() => {
        const ratios = during.map((r) => r.bound / o.tolerance).sort((a, b) => a - b);
        return { min: ratios.length > 0 ? round3(ratios[0]!) : null, p50: quantile(ratios, 0.5), p99: quantile(ratios, 0.99), max: ratios.length > 0 ? round3(ratios.at(-1)!) : null };
      })(),
      meanSeconds: round3(durations.reduce((a, b) => a + b, 0) / Math.max(1, durations.length)),
      p99Seconds: quantile(durations, 0.99),
      maxSeconds: durations.length > 0 ? round3(durations.at(-1)!) : null,
      meanPushed: Math.round(during.reduce((a, r) => a + r.pushed, 0) / Math.max(1, during.length)),
    },
  };
}

/** The q-quantile of ascending `sorted` (nearest rank: the smallest value with at least q of them at or under it), or null when empty. */
function quantile(sorted: readonly number[], q: number): number | null {
  if (sorted.length === 0) return null;
  return round3(sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!);
}

function round3(x: number): number {
  return Math.round(x * 1000) / 1000;
}

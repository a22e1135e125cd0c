import { isTerminalError, type ActorRef, type Clock } from '../../index.js';
import type { Barrier, MetricMessage, PartitionScores, PushDeferred, PushReport, RedirectLinks, RoundApplied } from './metricActor.js';
import { budgetThreshold } from './residualHistogram.js';

/**
 * Share of the residual allowance (the total R at which the stopping bound holds) that the
 * budget rule lets stay unpushed below the threshold; the rest is room for the mass that the
 * pushes pass on before it is pushed in turn. A converged computation leaves most of the
 * allowance spread thinly over every page (cnr-2000 at 1e-6: 0.89 of it), so a smaller share
 * pushes that leftover again after any change: one host recrawled on cnr-2000 took 228,637
 * pushes at 0.5 and 118,292 at 0.9 (471,535 with the floor alone).
 */
const BUDGET_SHARE = 0.9;

/**
 * One partition's metric actor as the coordinator asks it, with plain answers (no promise
 * inside), so that it may run in this process (`localMetricEndpoint`) or in a cluster worker
 * (asked through the broker). Answers by message type:
 * - `push` and `repair`: the `PushReport` (a `PushDeferred` is waited out and asked again);
 * - `await-applied`: the `RoundApplied` of the barrier, once reached (asked again when the
 *   actor restarted meanwhile);
 * - every other message: the actor's reply as it is.
 * A message may be delivered twice (a retry after a restart or a lost answer): every metric
 * message is idempotent (a push asked again replies its stored report).
 */
export type MetricEndpoint = (message: MetricMessage) => Promise<unknown>;

/**
 * The endpoint of a metric actor of this process: `askWithRetry` on its current ref, with the
 * waits of {@link MetricEndpoint} done here.
 * @throws what `askWithRetry` throws; ActorStoppedError after 60 deferrals or barriers cut
 *   short by restarts
 */
export function localMetricEndpoint(ref: MetricRef, clock: Clock): MetricEndpoint {
  return async (message) => {
    if (message.type === 'push' || message.type === 'repair') return pushRound(ref, message, clock);
    if (message.type === 'await-applied') {
      for (let attempt = 0; ; attempt++) {
        const b = (await askWithRetry(ref, message, clock)) as Barrier;
        try {
          return await b.ready;
        } catch (err) {
          if (attempt >= 60) throw err; // the partition restarted meanwhile: ask again
        }
      }
    }
    return askWithRetry(ref, message, clock);
  };
}

/** Options of `converge`. */
export interface ConvergeOptions {
  /** Damping factor d, in (0, 1). Default 0.85 (Page et al. 1999; networkx's default). */
  readonly damping?: number;
  /**
   * Target L1 distance between the normalised scores and the exact solution. Default 1e-9.
   * Rounds stop when the bound below guarantees it.
   */
  readonly tolerance?: number;
  /** Number of pages N (the sum of the partitions' page counters). */
  readonly pages: number;
  /**
   * Counts the pages again; called when the graph is quiet before deciding to stop, since in
   * continuous mode N grows while rounds run (a smaller N only makes the bound stricter).
   */
  readonly countPages?: () => Promise<number>;
  /**
   * Most rounds, counted while the graph is quiet, before giving up (the result is then
   * returned with `converged: false`). Default 1000.
   */
  readonly maxRounds?: number;
  readonly clock: Clock;
  /**
   * Called after each round; a returned promise is awaited before the next round (so an
   * observer may read the scores the round left, e.g. to check the bound).
   */
  readonly onRound?: (r: RoundSummary) => void | Promise<void>;
  /** First round number (rounds are numbered across calls so reports stay unique). Default 1. */
  readonly firstRound?: number;
  /**
   * True when no message of any namespace is in flight (the graph is not changing). Rounds
   * stop only when it holds at the end of a round: in continuous mode, rounds go on while
   * the crawl changes the graph. Default: always true.
   */
  readonly quiet?: () => boolean;
  /**
   * Pages whose |r| is below `thresholdFactor` times the average residual of the previous
   * round wait for a later round (Gauss-Southwell-like prioritisation: mass accumulates and is
   * pushed once, instead of a trickle every round). 0 gives plain synchronous rounds.
   * Default 1 (measured on hollins: 2.5x fewer pushes than plain rounds, 5% more rounds).
   */
  readonly thresholdFactor?: number;
}

/** One round, as seen by the coordinator. */
export interface RoundSummary {
  readonly round: number;
  readonly pushed: number;
  readonly messages: number;
  /** Payload bytes of those messages (what crossed the broker in the round). */
  readonly bytes: number;
  readonly contributions: number;
  /** Backlinks sent a copy of their source's x in the round, and the messages and payload bytes that carried copies (part of `messages` and `bytes`; contributions in the same messages included). */
  readonly copies: number;
  readonly copyMessages: number;
  readonly copyBytes: number;
  /** Upper bound of the total |residual| after the round. */
  readonly residual: number;
  /**
   * Upper bound of the L1 distance of the normalised scores to the exact ones after the
   * round (see `converge`: 2 (1 + H) R / ((1 - d) S)).
   */
  readonly bound: number;
  /** H: undamped hops of the longest redirect chain in the graph (0 without redirects), as the bound used it. */
  readonly redirectHops: number;
}

/** What `converge` did. */
export interface ConvergeResult {
  readonly converged: boolean;
  readonly rounds: number;
  readonly lastRound: number;
  readonly pushes: number;
  readonly messages: number;
  readonly contributions: number;
  readonly residual: number;
  /** Payload bytes of the rounds' messages. */
  readonly bytes: number;
  /** Backlinks sent a copy of their source's x, and the messages and payload bytes that carried copies (part of `messages` and `bytes`; contributions in the same messages included). */
  readonly copies: number;
  readonly copyMessages: number;
  readonly copyBytes: number;
}

/**
 * Drives the metric actors in synchronous rounds until the scores are within `tolerance`.
 *
 * Round k: every partition pushes (in parallel); the coordinator sums the messages each
 * sent to each partition, then waits until each partition has applied exactly that many
 * messages of round k (a barrier that counts messages, so it needs no broker support; each
 * partition resolves it as soon as its count is reached, without polling).
 * The total |r| is then at most R = sum of the residuals a push left in its partition (its
 * own pages' contributions are applied in place: see metricActor's push) + sum of the mass applied
 * from messages + the corrections of graph changes folded after the pushes began (the push
 * reports and the barrier replies carry the corrections folded by then, so a round costs two
 * asks per partition; the page count and a last count of corrections are asked only when the
 * bound is about to hold).
 *
 * Stopping rule: the rows of the metric are M = diag(d_p) W, with d_p = 1 for a redirect
 * (one undamped link: partition/redirects.ts) and d otherwise, W row-substochastic (a
 * dangling page keeps its mass). With y = x + (I - M^T)^-1 r the exact unnormalised solution
 * (the residual identity of forward push: Andersen, Chung and Lang, FOCS 2006, section 3),
 * ||y - x||_1 <= sum_p |r_p| c_p, where c = (I - M)^-1 1 (c_p is the L1 norm of column p of
 * (I - M^T)^-1: the total mass a unit of residual on p ever puts anywhere). Any v >= 0 with
 * v >= 1 + M v bounds c from above (the Neumann series of M, spectral radius < 1 when no
 * redirect chain loops). Let H be the number of undamped hops of the longest redirect chain
 * (0 without redirects) and h_p those of the chain p starts (0 for a page that is no
 * redirect). Then v_p = (1 + d H) / (1 - d) + h_p satisfies it: for a redirect to q,
 * 1 + v_q = v_p since h_p = 1 + h_q; for any other page, 1 + d sum_q W_pq v_q <=
 * 1 + d (1 + H) / (1 - d) = v_p, as every v_q <= (1 + d H) / (1 - d) + H = (1 + H) / (1 - d).
 * So ||y - x||_1 <= E = (1 + H) R / (1 - d), which is R / (1 - d) without redirects (the
 * damped bound; with H > 0 it may be up to 1 + H times what that one says: a residual on a
 * redirect, or on a page whose push lands on one, reaches the chain's pages undamped, and
 * the (1 + H) for every page instead of (1 + d H) costs at most one round, as a round takes
 * the residual down by about d). And sum(y) >= S = max(N (1 - d), sum(x) - E), since
 * y >= (1 - d) on each of the N scored pages and by the previous bound (sum(x) leaves out
 * the redirects' x: an alias has no score, and a redirect's x is also its target's). So
 * the L1 distance of the normalised x to the normalised y is at most 2 E / S (for positive
 * a, b: ||a / |a| - b / |b| ||_1 <= 2 ||a - b||_1 / |b|); rounds stop when that is <=
 * tolerance. H is asked of the partitions (`redirects`) in every round where one reports
 * redirects (`PushReport.undamped`), so a graph without any costs no more than before;
 * a redirect chain that loops (in a stored graph, through pages fetched at different
 * times) has no such bound: the rounds refuse to stop on it (Error, when quiet).
 * (With N (1 - d) alone the bound is loose by sum(y) / (N (1 - d)): 2 to 5 on real graphs,
 * whose dangling pages keep mass.) This is the residual L1 bound of forward push
 * (Andersen, Chung and Lang, FOCS 2006: x + (I - d W^T)^-1 r is invariant under pushes, and
 * ||(I - d W^T)^-1||_1 <= 1 / (1 - d) for a substochastic W); it holds whichever pages a
 * round pushes, so the threshold only decides the cost. A push of p moves r_p into x_p and
 * passes at most d |r_p| on, so R falls by at least (1 - d) |r_p|; the rounds end.
 *
 * Which pages a round pushes: the first round of a call is a probe that pushes nothing and
 * returns each partition's residual histogram (after a converged computation the residual
 * sits thinly on every page, and a graph change adds its corrections to a few: pushing every
 * page above the floor there cost 282 k of the 472 k pushes of a local change on cnr-2000).
 * From then on a page is pushed when |r| is above the highest of: the floor (a quarter of the
 * allowed per-page share, so residuals left unpushed can never hold the bound up alone), the
 * previous round's average residual (`thresholdFactor`), and the budget threshold: the
 * largest magnitude under which the residual left unpushed stays within BUDGET_SHARE of the
 * allowance A (the R at which the bound holds), so that the largest residuals go first
 * (Gauss-Southwell order; Berkhin's bookmark-colouring, Internet Mathematics 2006, likewise
 * leaves residuals under a threshold set by the error allowance).
 *
 * A partition that fails during a round is restarted by its supervisor; the coordinator
 * asks again, and the push (stored with its report) is not repeated. What the failed
 * metric actor had folded and not committed comes back from the broker: its new
 * incarnation defers its next push until it has folded every message of the earlier rounds
 * again (`PushDeferred`), so each push passes on all of its earlier rounds' mass and R stays
 * a bound. A restart after a push leaves a pushed page's stored r at minus its lost pending
 * delta, which the copies fold back to 0 before the next push; the round cannot end
 * meanwhile, since the actor's stop() counted them in flight again (not quiet).
 */
export async function converge(metrics: readonly MetricEndpoint[], options: ConvergeOptions): Promise<ConvergeResult> {
  const d = options.damping ?? 0.85;
  const tolerance = options.tolerance ?? 1e-9;
  const maxRounds = options.maxRounds ?? 1000;
  let n = Math.max(1, options.pages);
  // H of the last round (the longest redirect chain): the bound weighs the residual by 1 + H,
  // so the floor and the allowance below shrink by that factor (else residuals left under
  // them could hold the bound above the tolerance for good).
  let lastHops = 0;
  // Per-page threshold floor: a quarter of the per-page share of the residual that the
  // N (1 - d) form of the bound allows (independent of N), over 1 + H.
  const floorOf = () => (tolerance * (1 - d) * (1 - d)) / (8 * (1 + lastHops));
  const factor = options.thresholdFactor ?? 1;
  let pushes = 0;
  let messages = 0;
  let contributions = 0;
  let totalBytes = 0;
  let totalCopies = 0;
  let totalCopyBytes = 0;
  let totalCopyMessages = 0;
  let residual = Infinity;
  const first = options.firstRound ?? 1;
  let round = first;
  const correctionMass = async () => {
    const a = (await Promise.all(metrics.map((m) => m({ type: 'applied', round: 0 })))) as RoundApplied[];
    return a.reduce((t, x) => t + x.mass, 0);
  };
  let quietRounds = 0;
  let lastPushed = 1;
  /** The last round's threshold (Infinity before the first). */
  let lastThreshold = Infinity;
  /** The residual histograms of the last round's reports (undefined before the first, or when a report lacks one). */
  let histograms: Array<readonly number[]> | undefined;
  let lastSumX = 0;
  /**
   * The next round's threshold. With `thresholdFactor` > 0: the first round of a call is a
   * probe (threshold Infinity: every partition reports its residual histogram and pushes
   * nothing; a change's corrections sit anywhere), and from then on the threshold is the
   * highest of the floor, the average rule (after a round that pushed) and the budget rule (budgetThreshold: the pages
   * left below it hold at most BUDGET_SHARE of the residual the bound allows), so that a
   * change far smaller than the allowance pushes only the residuals it must. With 0, or
   * without histograms (reports of an older version), the earlier rule: the average
   * residual, or the floor after a round that pushed nothing.
   */
  const nextThreshold = (): number => {
    // A round at the floor that pushed nothing while the bound stays above the tolerance: the
    // residual sits in pieces under the floor on more keys than the N pages the floor assumes
    // (link targets that are not pages: a crawl's out-of-scope targets). Push every nonzero
    // residual once (found by a new user: a crawl of 57 pages and 10,003 out-of-scope targets,
    // with a redirect chain, ran 1,000 rounds of no push and did not converge).
    if (lastPushed === 0 && lastThreshold <= floorOf()) return 0;
    if (factor > 0 && histograms) {
      // The average rule only after a round that pushed: residual spread over link targets
      // without a page (not counted in n) can sit wholly under the average.
      return Math.max(floorOf(), lastPushed > 0 ? (factor * residual) / n : 0, budgetThreshold(histograms, BUDGET_SHARE * allowance(n, lastSumX)));
    }
    if (factor > 0 && !Number.isFinite(residual)) return Infinity;
    return Number.isFinite(residual) && lastPushed > 0 ? Math.max(floorOf(), (factor * residual) / n) : floorOf();
  };
  /** The largest total residual R for which the stopping bound (boundOf, with the last H) is <= tolerance. */
  const allowance = (pages: number, sumX: number) => Math.max((tolerance * (1 - d) * (1 - d) * pages) / 2, (tolerance * (1 - d) * sumX) / (2 + tolerance)) / (1 + lastHops);
  const barrier = (r: number, expected: readonly number[]) => roundBarrier(metrics, r, expected);
  /** The bound 2 E / S of the stopping rule, E = (1 + hops) r / (1 - d). */
  const boundOf = (r: number, pages: number, sumX: number, hops: number) => {
    const e = ((1 + hops) * r) / (1 - d);
    return (2 * e) / Math.max(pages * (1 - d), sumX - e);
  };
  // An earlier call may have ended between the pushes of its last round and that round's
  // barrier (it failed): run that barrier first, so that the next push waits for those
  // messages after a restart, like those of any round.
  /**
   * The last barrier run (round, expected count per partition): each partition's next push
   * carries its own count, so that one restored from a checkpoint taken before it folded them
   * (its barrier reply was not held for a checkpoint: docs/checkpoints.md, "The web index")
   * folds them again before it pushes.
   */
  let last: { readonly round: number; readonly expected: readonly number[] } | undefined;
  if (first > 1) {
    const reports = (await Promise.all(metrics.map((m) => m({ type: 'last-report' })))) as Array<PushReport | undefined>;
    const expected = metrics.map(() => 0);
    for (const r of reports) if (r?.round === first - 1) r.sent.forEach((c, q) => (expected[q]! += c));
    if (expected.some((c) => c > 0)) {
      await barrier(first - 1, expected);
      last = { round: first - 1, expected };
    }
  }
  /** The round's barrier again, its replies held until a checkpoint covers what it counted: what the caller does after `converge` (host index, scores) meets no partition that must fold them again. */
  const durableBarrier = async () => {
    if (last) await roundBarrier(metrics, last.round, last.expected, { durable: true });
  };
  for (; quietRounds < maxRounds; round++) {
    // After a round that pushed nothing, the residual sits in many small pieces (often on
    // link targets that are not pages, so not counted in N): drop to the floor.
    const threshold = nextThreshold();
    lastThreshold = threshold;
    const previous = last;
    const reports = (await Promise.all(metrics.map((m, q) => {
      const barrierAt = previous && previous.expected[q]! > 0 ? { barrier: { round: previous.round, expected: previous.expected[q]! } } : {};
      return m({ type: 'push', round, threshold, damping: d, ...barrierAt });
    }))) as PushReport[];
    const expected = metrics.map(() => 0);
    let remaining = 0;
    let pushed = 0;
    let sent = 0;
    let bytes = 0;
    let contrib = 0;
    let copies = 0;
    let copyBytes = 0;
    let copyMessages = 0;
    let sumX = 0;
    // Corrections the pushes saw (folded before each partition's push began).
    let corrected = 0;
    const reported: Array<readonly number[]> | undefined = reports.every((r) => r.residuals !== undefined) ? reports.map((r) => r.residuals!) : undefined;
    for (const r of reports) {
      corrected += r.corrections ?? 0; // a report stored before this field: none known
      r.sent.forEach((c, q) => (expected[q]! += c));
      remaining += r.remaining;
      sumX += r.sumX;
      pushed += r.pushed;
      contrib += r.contributions;
      sent += r.sent.reduce((a, b) => a + b, 0);
      bytes += r.bytes?.reduce((a, b) => a + b, 0) ?? 0;
      copies += r.copies ?? 0;
      copyBytes += r.copyBytes ?? 0;
      copyMessages += r.copyMessages ?? 0;
    }
    const { mass, corrections } = await barrier(round, expected);
    last = { round, expected };
    lastPushed = pushed;
    histograms = reported;
    lastSumX = sumX;
    pushes += pushed;
    messages += sent;
    contributions += contrib;
    totalBytes += bytes;
    totalCopies += copies;
    totalCopyBytes += copyBytes;
    totalCopyMessages += copyMessages;
    // Corrections of graph changes applied since this round's scan began are residual too
    // (as the barrier replies saw them: enough to set the next threshold).
    residual = remaining + mass + Math.max(0, corrections - corrected);
    const quiet = options.quiet?.() ?? true;
    // Redirects pass their rank on undamped: the longest chain they form enters the bound.
    const hops = reports.some((r) => (r.undamped ?? 1) > 0) ? await redirectHops(metrics, quiet) : 0;
    lastHops = hops;
    let bound = boundOf(residual, n, sumX, hops);
    if (bound <= tolerance && quiet) {
      // About to stop: the bound again with the corrections folded until now and the page
      // count now (deleted pages make N smaller), asked only here, not every round.
      residual = remaining + mass + Math.max(0, (await correctionMass()) - corrected);
      if (options.countPages) n = Math.max(1, await options.countPages());
      bound = boundOf(residual, n, sumX, hops);
    }
    await options.onRound?.({ round, pushed, messages: sent, bytes, contributions: contrib, copies, copyMessages, copyBytes, residual, bound, redirectHops: hops });
    if (bound <= tolerance && quiet && (options.quiet?.() ?? true)) {
      await durableBarrier();
      return { converged: true, rounds: round - first + 1, lastRound: round, pushes, messages, contributions, residual, bytes: totalBytes, copies: totalCopies, copyMessages: totalCopyMessages, copyBytes: totalCopyBytes };
    }
    if (quiet) quietRounds++;
    else await sleep(options.clock, 10); // continuous mode: let the graph change between rounds
  }
  await durableBarrier();
  return { converged: false, rounds: round - first, lastRound: round - 1, pushes, messages, contributions, residual, bytes: totalBytes, copies: totalCopies, copyMessages: totalCopyMessages, copyBytes: totalCopyBytes };
}

/**
 * H of the stopping rule (see `converge`): the undamped hops of the longest chain of
 * redirects of every partition (`redirects`), a redirect to a page that is no redirect
 * being one hop. A chain that loops gives Infinity (no bound), or, when `quiet` (the graph
 * will not change by itself), an Error naming the loop: its pages must be recrawled.
 * Linear in the number of redirects (each chain walked once, memoised).
 * @throws Error on a loop when quiet; what the endpoints throw
 */
async function redirectHops(metrics: readonly MetricEndpoint[], quiet: boolean): Promise<number> {
  const next = new Map<string, string>();
  for (const part of (await Promise.all(metrics.map((m) => m({ type: 'redirects' })))) as RedirectLinks[]) {
    part.sources.forEach((s, i) => next.set(s, part.targets[i]!));
  }
  const hops = new Map<string, number>();
  let longest = 0;
  for (const start of next.keys()) {
    const path: string[] = [];
    const onPath = new Set<string>();
    let page: string | undefined = start;
    let tail = 0;
    while (page !== undefined && next.has(page)) {
      const known = hops.get(page);
      if (known !== undefined) {
        tail = known;
        break;
      }
      if (onPath.has(page)) {
        if (quiet) throw new Error(`redirect chain loops in the stored graph: ${[...path.slice(path.indexOf(page)), page].join(' -> ')} (pages fetched at different times; recrawl them): the metric has no error bound on it`);
        return Infinity;
      }
      onPath.add(page);
      path.push(page);
      page = next.get(page);
    }
    for (let i = path.length - 1; i >= 0; i--) hops.set(path[i]!, ++tail);
    longest = Math.max(longest, hops.get(start)!);
  }
  return longest;
}

/**
 * Waits until each partition q has applied `expected[q]` messages of round `r`.
 * @param options.durable ask the replies held until a checkpoint covers what they counted
 *   (a cluster host with checkpoints; the same answer elsewhere)
 * @returns the mass (sum of |delta|) they carried, and the mass of the corrections (round 0)
 *   the partitions had folded when each reached its count
 * @throws what the endpoints throw (`localMetricEndpoint`: ActorStoppedError when a partition keeps stopping)
 */
export async function roundBarrier(metrics: readonly MetricEndpoint[], r: number, expected: readonly number[], options: { readonly durable?: boolean } = {}): Promise<{ mass: number; corrections: number }> {
  const durable = options.durable ? { durable: true } : {};
  const applied = (await Promise.all(metrics.map((m, q) => m({ type: 'await-applied', round: r, expected: expected[q]!, ...durable })))) as RoundApplied[];
  let mass = 0;
  let corrections = 0;
  for (const a of applied) {
    mass += a.mass;
    corrections += a.corrections ?? 0;
  }
  return { mass, corrections };
}

/** What `repairResiduals` did. */
export interface ResidualRepair {
  readonly round: number;
  /** Pages that sent the contributions of their x. */
  readonly pages: number;
  readonly messages: number;
  readonly contributions: number;
}

/**
 * The exchange of a repair (docs/ARCHITECTURE.md, "Crash and restart"): every partition sends
 * d x_p w_pq / sum w_pq along every outlink as contributions of `round` (`repair`), and the
 * round's barrier waits until each partition has folded all of them. With every residual
 * set to t - x before (`resetInFlightState`), the residuals are then r = t - x + d W^T x
 * exactly, whatever contributions the previous run lost. Number rounds on from the last
 * one stored, as `converge` does.
 * @throws what `askWithRetry` and `roundBarrier` throw
 */
export async function repairResiduals(metrics: readonly MetricEndpoint[], options: { readonly round: number; readonly damping: number }): Promise<ResidualRepair> {
  const reports = (await Promise.all(metrics.map((m) => m({ type: 'repair', round: options.round, damping: options.damping })))) as PushReport[];
  const expected = metrics.map(() => 0);
  let pages = 0;
  let messages = 0;
  let contributions = 0;
  for (const r of reports) {
    r.sent.forEach((c, q) => (expected[q]! += c));
    pages += r.pushed;
    contributions += r.contributions;
    messages += r.sent.reduce((a, b) => a + b, 0);
  }
  await roundBarrier(metrics, options.round, expected);
  return { round: options.round, pages, messages, contributions };
}

/**
 * Scores of every page, normalised to sum 1 (the maintained total is the sum of x + r
 * over all partitions), highest first.
 */
export async function collectScores(metrics: readonly MetricEndpoint[]): Promise<Array<[string, number]>> {
  const parts = (await Promise.all(metrics.map((m) => m({ type: 'scores' })))) as PartitionScores[];
  let total = 0;
  for (const p of parts) for (const s of p.scores) total += s;
  const out: Array<[string, number]> = [];
  for (const p of parts) p.urls.forEach((u, i) => out.push([u, total > 0 ? p.scores[i]! / total : 0]));
  out.sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
  return out;
}

/**
 * The current ref of a partition's metric actor. A function, because restarting a
 * partition spawns its children again with new refs.
 */
export type MetricRef = () => ActorRef<MetricMessage, unknown>;

/**
 * Asks a partition to push, waiting and asking again while it defers (a new incarnation
 * folding again what a restart lost). @throws what `askWithRetry` throws, or
 * ActorStoppedError after 60 deferrals cut short by stops
 */
async function pushRound(ref: MetricRef, message: MetricMessage, clock: Clock): Promise<PushReport> {
  for (let stopped = 0; ; ) {
    const reply = (await askWithRetry(ref, message, clock)) as PushReport | PushDeferred;
    if (!('deferred' in reply)) return reply;
    try {
      await reply.deferred;
    } catch (err) {
      if (++stopped >= 60) throw err; // the partition restarted meanwhile: ask again
    }
  }
}

/**
 * `ask`, retried while the actor restarts (up to ~30 s): rounds survive partition faults.
 * An error marked terminal (`terminalError`: the actor system has stopped) is thrown at once.
 */
export async function askWithRetry<M, R>(ref: () => ActorRef<M, R>, message: M, clock: Clock, attempts = 60): Promise<R> {
  for (let i = 0; ; i++) {
    try {
      return await ref().ask(message, { timeoutMs: 120_000 });
    } catch (err) {
      if (i >= attempts || isTerminalError(err)) throw err;
      await sleep(clock, Math.min(500, 10 * 2 ** i));
    }
  }
}

function sleep(clock: Clock, ms: number): Promise<void> {
  return new Promise((resolve) => clock.setTimeout(resolve, ms));
}

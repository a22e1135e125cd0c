import type { Logger } from 'pino';
import type { ActorRef, Clock, FlowCounters } from '../index.js';
import { Namespaces, type Namespace } from '../actors/namespaces.js';
import type { IndexerMessage } from '../actors/indexer/indexer.js';
import { askWithRetry, repairResiduals, type MetricEndpoint } from '../actors/metrics/coordinator.js';

/** What a repair did, summed over the partitions. */
export interface RepairReport {
  /** Link operations sent again to rebuild `backlinks` (one per stored outlink). */
  readonly linkOps: number;
  /** The round of the residual repair's exchange. */
  readonly round: number;
  /** Contribution messages of that exchange, and pages that sent their x. */
  readonly messages: number;
  readonly pages: number;
  readonly seconds: number;
}

/** What `repairWebIndex` needs of a started web index. */
export interface RepairTargets {
  readonly indexers: ReadonlyArray<() => ActorRef<IndexerMessage, unknown>>;
  readonly metrics: readonly MetricEndpoint[];
  readonly counters: FlowCounters;
  readonly clock: Clock;
  readonly damping: number;
  readonly log: Logger;
}

/**
 * The second step of a repair (the first, `resetInFlightState`, ran on every store before
 * the actors started): derives again, from the stores, what the messages in flight of the
 * previous run carried, through the broker:
 * 1. every indexer sends its outlinks again as `add` link operations, and the backlinks
 *    actors rebuild `backlinks` (emptied by the reset) from them;
 * 2. every metric actor sends the contributions of its pages' x along their outlinks as
 *    one round (`repairResiduals`), so that r = t - x + d W^T x holds again exactly.
 * Returns once both are applied everywhere (no `links` or `metrics` message in flight).
 * Nothing may change the graph meanwhile: call it before crawlers run and before a job
 * loads anything.
 * @throws what the asks throw (a partition that cannot start)
 */
export async function repairWebIndex(targets: RepairTargets): Promise<RepairReport> {
  const t0 = performance.now();
  const { clock, counters } = targets;
  const linkOps = (await Promise.all(targets.indexers.map((r) => askWithRetry(r, { type: 'republish-links' }, clock)))) as number[];
  const last = (await Promise.all(targets.metrics.map((m) => m({ type: 'last-round' })))) as number[];
  const round = Math.max(0, ...last) + 1;
  const residuals = await repairResiduals(targets.metrics, { round, damping: targets.damping });
  await settled(counters, [Namespaces.links, Namespaces.metrics], clock, targets.log);
  const report: RepairReport = {
    linkOps: linkOps.reduce((a, b) => a + b, 0),
    round,
    messages: residuals.messages,
    pages: residuals.pages,
    seconds: (performance.now() - t0) / 1000,
  };
  targets.log.info(report, 'repair: backlinks rebuilt, residuals recomputed');
  return report;
}

/**
 * Resolves when every message of `namespaces` sent by this process is settled; says what it
 * waits for every 30 s without progress (the job's watchdog starts after the repair).
 */
async function settled(counters: FlowCounters, namespaces: readonly Namespace[], clock: Clock, log: Logger): Promise<void> {
  const open = () => namespaces.map((ns) => [ns, (counters.sent.get(ns) ?? 0) - (counters.settled.get(ns) ?? 0)] as const).filter(([, n]) => n !== 0);
  let epoch = counters.epoch();
  let since = clock.now();
  while (open().length > 0) {
    await new Promise<void>((resolve) => clock.setTimeout(resolve, 10));
    if (counters.epoch() !== epoch) {
      epoch = counters.epoch();
      since = clock.now();
    } else if (clock.now() - since >= 30_000) {
      log.warn({ inFlight: Object.fromEntries(open()) }, 'repair: no progress for 30 s, waiting for these messages to be applied');
      since = clock.now();
    }
  }
}

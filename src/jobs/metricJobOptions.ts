import type { Logger } from 'pino';
import type { RoundSummary } from '../actors/metrics/coordinator.js';

/**
 * What every job that converges the link metric takes: `rankGraph` (one process),
 * `rankOnCluster` and the cluster clients of the CLI (`rank --cluster`, `crawl --cluster`).
 */
export interface MetricJobOptions {
  /** Target L1 distance of the normalised scores to the exact PageRank (`ConvergeOptions.tolerance`, default there). */
  readonly tolerance?: number;
  /** The coordinator's adaptive threshold factor (`ConvergeOptions.thresholdFactor`, default there; 0: plain rounds). */
  readonly thresholdFactor?: number;
  readonly log: Logger;
  /** Called after each metric round. */
  readonly onRound?: (r: RoundSummary) => void;
}

/**
 * The convergence fields of `o` that were given, to spread into the coordinator's options
 * (an absent field keeps the coordinator's default).
 */
export function convergeFields(o: Pick<MetricJobOptions, 'tolerance' | 'thresholdFactor' | 'onRound'>): Pick<MetricJobOptions, 'tolerance' | 'thresholdFactor' | 'onRound'> {
  return {
    ...(o.tolerance !== undefined ? { tolerance: o.tolerance } : {}),
    ...(o.thresholdFactor !== undefined ? { thresholdFactor: o.thresholdFactor } : {}),
    ...(o.onRound ? { onRound: o.onRound } : {}),
  };
}

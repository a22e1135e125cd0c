import type { MetricMessage } from '../actors/metrics/metricActor.js';

/**
 * The one stage of the web index as a cluster application: a unit of ownership is a whole
 * web-index partition (its store and every actor of `/partitions/p<i>`).
 */
export const WEB_INDEX_STAGE = 'index';

/**
 * What a cluster client asks a web-index partition through the broker
 * (`ApplicationHost.ask(WEB_INDEX_STAGE, p, request)` on the partition's owner). Plain data;
 * every request is idempotent (it may run twice: a redelivery after its owner died, or a
 * retry).
 * - `metrics`: a metric message, answered as `MetricEndpoint` says (`push`/`repair`: the
 *   `PushReport`; `await-applied`: the `RoundApplied`; others: the reply as it is);
 * - `flow`: the partition's `StreamFlowReport` (quiet detection across processes);
 * - `republish-links`: the indexer's (a repair), answered with the count of link operations.
 */
export type WebIndexRequest =
  | { readonly kind: 'metrics'; readonly message: MetricMessage }
  | { readonly kind: 'flow' }
  | { readonly kind: 'republish-links' };

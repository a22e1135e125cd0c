import { applyExactlyOnce, encodeInt64, type ActorRef, type Behavior, type Deliveries } from '../../index.js';
import { Namespaces } from '../namespaces.js';
import { linkOpCodec } from '../messages.js';
import type { PartitionEnv } from '../partition/env.js';
import { closeSubscribed, openSubscribed, type SubscribedState } from '../partition/subscribedState.js';
import { ColumnFamilies, Counters, linkKey } from '../partition/schema.js';
import type { CrawlPolicyMessage } from '../crawlPolicy/crawlPolicy.js';
import { encodeLinkValue } from '../indexer/linkValue.js';
import { encodeBacklinkLink } from './backlinkValue.js';
import { edgeWeight } from '../indexer/edgeWeight.js';
import type { WeightFunction } from '../metrics/weights.js';

/** Options of the backlinks actor beyond its partition. */
export interface BacklinksOptions {
  readonly weigh: WeightFunction;
  /**
   * The crawl policy of the same partition, poked after new targets were written to
   * `pending`; absent when nothing is crawled (`shardflow rank`), and then no target is
   * registered for crawling.
   */
  readonly crawlPolicy?: ActorRef<CrawlPolicyMessage, unknown>;
}

type BacklinksState = SubscribedState;

/**
 * The backlink store of one partition: consumes `links/<q>` and folds each link operation
 * into `backlinks` (key target 0x00 source): add and update merge the link's value into the
 * backlink's record (backlinkValue.ts: the copy of the source's metric that the metric
 * actors merge into the same record is kept), remove deletes it. The target of an added link is registered with the partition's crawl policy
 * by a row in `pending`, written in the same batch, so that unseen targets get crawled.
 */
export function backlinks(env: PartitionEnv, options: BacklinksOptions): Behavior<Deliveries, BacklinksState> {
  const owner = 'backlinks';
  return {
    kind: 'backlinks',
    start: (ctx) => openSubscribed(env, ctx, { owner, namespace: Namespaces.links, receiverQueueSize: 256, batching: { maxCount: 64, maxDelayMs: 2 }, withOutbox: false }),
    async receive(state, d) {
      if (d.consumer !== state.consumer) return;
      let discovered = 0;
      await applyExactlyOnce({ ...state, counters: env.counters, namespace: Namespaces.links }, d, linkOpCodec, (batch, value) => {
        let delta = 0;
        // Merges go in runs (one native call per run); a remove ends the run first, so that
        // operations on one key keep their order.
        let targets: string[] = [];
        let sources: string[] = [];
        let values: Uint8Array[] = [];
        const putRun = () => {
          if (targets.length === 0) return;
          // Keys `target 0x00 source` built natively, in key order (sorted natively) for the
          // memtable insert hint of `backlinks`. Merges, not puts: the copy of the source's
          // metric in the same record stays.
          batch.mergePairs(ColumnFamilies.backlinks, targets, sources, values, { keyOrder: true });
          targets = [];
          sources = [];
          values = [];
        };
        for (const op of value.ops) {
          if (op.op === 'remove') {
            putRun();
            batch.delete(ColumnFamilies.backlinks, linkKey(op.target, op.source));
            delta--;
          } else {
            targets.push(op.target);
            sources.push(op.source);
            values.push(backlinkOperand(encodeLinkValue(edgeWeight(options.weigh, op.features), op.features)));
            if (op.op === 'add') {
              delta++;
              if (options.crawlPolicy) {
                batch.put(ColumnFamilies.pending, op.target, new Uint8Array(0));
                discovered++;
              }
            }
          }
        }
        putRun();
        if (delta !== 0) batch.merge(ColumnFamilies.counters, Counters.backlinks, encodeInt64(delta));
      });
      if (discovered > 0) await options.crawlPolicy?.tell({ type: 'poke' });
    },
    stop: (state) => closeSubscribed(env, state),
  };
}

/**
 * `encodeBacklinkLink(linkValue)`, one Buffer per link value: `encodeLinkValue` returns one
 * Buffer per distinct (weight, features), so the operands of a batch are a few shared
 * Buffers (which `mergePairs` sends once each) instead of one per link.
 */
function backlinkOperand(linkValue: Buffer): Buffer {
  let operand = operands.get(linkValue);
  if (operand === undefined) operands.set(linkValue, (operand = encodeBacklinkLink(linkValue)));
  return operand;
}

/** The operands of the link values in use (weak: dropped with the link value). */
const operands = new WeakMap<Buffer, Buffer>();

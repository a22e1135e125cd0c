import { concatMap, type Subscription } from 'rxjs';
import { batchMessages } from '../../operators/batchMessages.js';
import type { BrokerMessage, Consumer } from '../brokers/broker.js';

/** A batch of broker messages handed to a stage partition through its mailbox. */
export interface Deliveries {
  readonly type: 'deliveries';
  /** The consumer they came from: a batch of a consumer closed since is dropped (the broker delivers its messages again). */
  readonly consumer: Consumer;
  /** 0, 1, 2, ... per consumer: a gap means a batch was lost to a failure before it was applied. */
  readonly batchNo: number;
  readonly messages: readonly BrokerMessage[];
}

/**
 * Feeds a consumer's messages into a mailbox as numbered `Deliveries` batches (RxJS
 * `batchMessages`, then `concatMap` over `tell`). `tell` waits while the mailbox is full,
 * and the consumer's unacked bound (`receiverQueueSize`) stops the broker meanwhile: that is
 * the backpressure path from RocksDB back to the broker. Pipeline errors go to `onError`.
 */
export function feedDeliveries(
  consumer: Consumer,
  tell: (d: Deliveries) => Promise<void>,
  onError: (err: unknown) => void,
  batching: { readonly maxCount?: number; readonly maxDelayMs?: number } = {},
): Subscription {
  let batchNo = 0;
  return consumer.messages$
    .pipe(
      batchMessages({ ...(batching.maxCount !== undefined ? { maxCount: batching.maxCount } : {}), ...(batching.maxDelayMs !== undefined ? { maxDelayMs: batching.maxDelayMs } : {}) }),
      concatMap((messages) => tell({ type: 'deliveries', consumer, batchNo: batchNo++, messages })),
    )
    .subscribe({ error: onError });
}

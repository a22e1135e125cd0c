import { concatMap, type Subscription } from 'rxjs';
import type { BrokerMessage, Consumer } from '../../runtime/brokers/broker.js';
import type { Codec } from '../../runtime/codec.js';
import type { Namespace } from '../../runtime/topics.js';
import { batchMessages } from '../../operators/batchMessages.js';
import { isShardflowError } from '../../errors.js';
import type { Store, WriteBatch } from '../../storage/index.js';
import { messageKey, type FlowCounters } from '../progress.js';
import type { AppliedMarks } from './appliedMarks.js';
import type { Outbox } from './outbox.js';

/** A batch of broker messages handed to an actor through its mailbox. */
export interface Deliveries {
  readonly type: 'deliveries';
  /** The consumer they came from: acks go back through it (a stale one ignores them). */
  readonly consumer: Consumer;
  readonly messages: readonly BrokerMessage[];
}

/**
 * Feeds a consumer's messages into an actor's mailbox as `Deliveries` batches. `tell` waits
 * while the mailbox is full, and the consumer's unacked bound stops the broker meanwhile:
 * that is the backpressure path from RocksDB back to the broker. Pipeline errors go to
 * `onError` (the actor's `ctx.fail`).
 */
export function feedMailbox(
  consumer: Consumer,
  tell: (d: Deliveries) => Promise<void>,
  onError: (err: unknown) => void,
  batching: { maxCount?: number; maxDelayMs?: number } = {},
): Subscription {
  return consumer.messages$
    .pipe(
      batchMessages(batching),
      concatMap((messages) => tell({ type: 'deliveries', consumer, messages })),
    )
    .subscribe({ error: onError });
}

/** What `applyExactlyOnce` needs. */
export interface ExactlyOnceContext {
  readonly store: Store;
  readonly marks: AppliedMarks;
  /** Absent for actors that send nothing. */
  readonly outbox?: Outbox;
  readonly counters: FlowCounters;
  readonly namespace: Namespace;
}

/**
 * Applies a batch of deliveries with exactly-once effects: skips messages at or below their
 * producer's applied mark, sends undecodable ones to the dead-letter topic with the codec's
 * reason, lets `apply` add each message's effects to one write batch, records the marks in
 * it, commits, publishes the outbox, then acks.
 *
 * @returns the decoded values that were applied (not the skipped ones)
 * @throws whatever `apply` or the store throws; nothing is acked then, so the broker
 *   redelivers after the actor restarts
 */
export async function applyExactlyOnce<T>(
  ctx: ExactlyOnceContext,
  deliveries: Deliveries,
  codec: Codec<T>,
  apply: (batch: WriteBatch, value: T, message: BrokerMessage) => Promise<void> | void,
): Promise<T[]> {
  const { store, marks, outbox, counters, namespace } = ctx;
  const batch = store.batch();
  const applied: T[] = [];
  const dead: Array<[BrokerMessage, string]> = [];
  for (const m of deliveries.messages) {
    if (await marks.applied(m.producer, m.sequence)) continue;
    let value: T;
    try {
      value = codec.decode(m.payload);
    } catch (err) {
      if (!isShardflowError(err)) throw err;
      dead.push([m, err.message]);
      marks.record(batch, m.producer, m.sequence);
      continue;
    }
    await apply(batch, value, m);
    marks.record(batch, m.producer, m.sequence);
    applied.push(value);
  }
  await store.write(batch);
  await outbox?.publish();
  // Count each message as settled once the broker took its ack: if an ack fails midway,
  // the acked ones are done and the rest come back (and are counted then). Counted by key,
  // so a copy redelivered after an ack the broker lost settles nothing twice.
  const reasons = new Map(dead);
  for (const m of deliveries.messages) {
    const reason = reasons.get(m);
    if (reason !== undefined) await deliveries.consumer.deadLetter(m, reason);
    else await deliveries.consumer.ack(m);
    counters.onSettled(namespace, messageKey(m));
  }
  return applied;
}

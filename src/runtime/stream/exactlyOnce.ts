import { isShardflowError } from '../../errors.js';
import type { BrokerMessage, Consumer } from '../brokers/broker.js';
import type { Codec } from '../codec.js';
import type { Store, WriteBatch } from '../../storage/index.js';
import type { StreamMarks } from './appliedMarks.js';
import { messageKey, type FlowCounters } from './flowCounters.js';
import type { StreamOutbox } from './outbox.js';

/** What `applyExactlyOnce` works with: one incarnation of an actor that owns a store. */
export interface ExactlyOnceContext {
  readonly store: Store;
  /** The actor's applied marks in `store` (drop them, and the outbox, when this throws). */
  readonly marks: StreamMarks;
  /** The actor's outbox in `store`; absent for actors that send nothing. */
  readonly outbox?: StreamOutbox;
  readonly counters: FlowCounters;
  /** Namespace of the consumed topic: the flow counters settle each message under it. */
  readonly namespace: string;
  /**
   * With checkpoints (partitionCheckpointer.ts): takes the batch's settle (acks, dead letters,
   * flow counts) after the commit, to run it once a checkpoint holds the commit. Absent: the
   * batch is settled at once.
   */
  readonly holdSettle?: (consumer: Consumer, messages: number, settle: () => Promise<void>) => void;
}

/**
 * Applies a batch of deliveries with exactly-once effects, for an actor written by hand (a
 * stage does the same through its handlers): classifies each message against its
 * producer's applied mark (`StreamMarks.classify`: a redelivery is skipped, a message of a
 * fenced-off older producer incarnation is dead-lettered with the reason), decodes it (an
 * undecodable one is dead-lettered with the codec's reason, and moves its producer's mark only
 * when it is that producer's next sequence (`StreamMarks.follows`: its name and sequence may
 * not be its own), recording that it took it, so that a later message with that sequence and
 * another payload is dead-lettered as a second entry under the name, not skipped as a copy
 * (`StreamMarks.takenReason`)),
 * lets `apply` add the message's effects to one write batch, records the marks in it,
 * commits, publishes the outbox, then acks or dead-letters every message of the batch and
 * counts it settled in `counters` (by key: a copy settles nothing twice); with `holdSettle`,
 * the settle is handed over to run after the checkpoint that holds the commit.
 *
 * @param deliveries the consumer the messages came from and the messages, in delivery order
 * @param apply adds one message's effects to `batch` (and may enqueue outbox messages in it)
 * @returns the decoded values that were applied (not the skipped or dead-lettered ones)
 * @throws whatever `apply`, the codec (other than a ShardflowError) or the store throws;
 *   nothing is committed or acked then: the actor must restart (dropping its marks and
 *   outbox, whose caches ran ahead) so that the broker delivers the batch again
 */
export async function applyExactlyOnce<T>(
  ctx: ExactlyOnceContext,
  deliveries: { readonly consumer: Consumer; readonly messages: readonly BrokerMessage[] },
  codec: Codec<T>,
  apply: (batch: WriteBatch, value: T, message: BrokerMessage) => Promise<void> | void,
): Promise<T[]> {
  const { store, marks, outbox, counters, namespace } = ctx;
  const batch = store.batch();
  const applied: T[] = [];
  const dead = new Map<BrokerMessage, string>();
  for (const m of deliveries.messages) {
    const verdict = await marks.classify(m.producer, m.sequence);
    if (verdict.kind === 'applied') {
      const taken = await marks.takenReason(m.producer, m.sequence, m.payload);
      if (taken !== undefined) dead.set(m, taken);
      continue;
    }
    if (verdict.kind === 'conflict') {
      dead.set(m, verdict.reason);
      continue;
    }
    let value: T;
    try {
      value = codec.decode(m.payload);
    } catch (err) {
      if (!isShardflowError(err)) throw err;
      dead.set(m, err.message);
      if (await marks.follows(m.producer, m.sequence)) {
        marks.takeUndecodable(batch, m.producer, m.sequence, m.payload);
        marks.record(batch, m.producer, m.sequence);
      } else {
        await marks.deadLetteredAbove(batch, m.producer, m.sequence);
      }
      continue;
    }
    await apply(batch, value, m);
    marks.record(batch, m.producer, m.sequence);
    applied.push(value);
  }
  await store.write(batch);
  await outbox?.publish();
  // Count each message as settled once the broker took its ack: if an ack fails midway,
  // the acked ones are done and the rest come back (and are counted then).
  const settle = async () => {
    for (const m of deliveries.messages) {
      const reason = dead.get(m);
      if (reason !== undefined) await deliveries.consumer.deadLetter(m, reason);
      else await deliveries.consumer.ack(m);
      counters.onSettled(namespace, messageKey(m));
    }
  };
  if (ctx.holdSettle) ctx.holdSettle(deliveries.consumer, deliveries.messages.length, settle);
  else await settle();
  return applied;
}

import { isShardflowError, InvalidArgumentError } from '../../errors.js';
import type { BrokerMessage, Consumer } from '../brokers/broker.js';
import type { PartitionId } from '../ids.js';
import type { Topic } from '../topics.js';
import type { Store } from '../../storage/index.js';
import type { StreamMarks } from './appliedMarks.js';
import { messageKey, type FlowCounters } from './flowCounters.js';
import type { StreamOutbox } from './outbox.js';
import type { PartitionFence } from './ownerEpoch.js';
import type { StageContext, StageDef, StageOutputs, StageReads } from './stage.js';

/** What `applyStageBatch` works with: one incarnation of one stage partition. */
export interface StageBatchContext {
  readonly partition: PartitionId;
  readonly namespace: string;
  readonly def: StageDef<any, StageOutputs, string, unknown, unknown>;
  readonly store: Store;
  readonly reads: StageReads<string>;
  readonly marks: StreamMarks;
  readonly outbox: StreamOutbox;
  readonly counters: FlowCounters;
  /** The cluster ownership this partition runs under: checked before the commit and before the publish (throws FencedError). */
  readonly fence?: PartitionFence;
}

/** What one batch did, for tests and metrics. */
export interface StageBatchReport {
  readonly applied: number;
  readonly skipped: number;
  readonly deadLettered: number;
  readonly emitted: number;
}

/**
 * Applies one batch of deliveries with exactly-once effects (see `StageDef`): classifies
 * each message against its producer's applied mark (skip a redelivery, dead-letter a
 * fenced-off older incarnation), decodes it (dead-letter it with the codec's reason when it
 * does not decode), runs `onMessage` per message and `onBatch` once, writes the effects, the
 * marks and the emitted messages' outbox rows in one write batch, commits, publishes the
 * outbox, then acks (or dead-letters) every message and counts it settled.
 *
 * With a `fence` (cluster ownership), the lease is checked right before the commit and again
 * before the publish: a fenced-off owner commits nothing, or leaves what it committed in the
 * outbox for the next owner to publish (same sequences), and acks nothing.
 *
 * @throws whatever the handlers, the codecs of emitted values or the store throw, and
 *   FencedError; nothing is then committed or acked: the caller must drop its marks and outbox (their caches ran
 *   ahead) and have the broker deliver the batch again
 */
export async function applyStageBatch(ctx: StageBatchContext, consumer: Consumer, messages: readonly BrokerMessage[]): Promise<StageBatchReport> {
  const { def, store, marks, outbox, counters } = ctx;
  const batch = store.batch();
  const emitted: Array<[Topic, Uint8Array]> = [];
  const outputs = def.outputs ?? {};
  const handlerContext: StageContext<StageOutputs, string> = {
    partition: ctx.partition,
    writes: batch,
    reads: ctx.reads,
    emit(output, value) {
      const ns = outputs[output];
      if (!ns) throw new InvalidArgumentError(`emit to ${JSON.stringify(output)}: not an output of this stage (outputs: ${Object.keys(outputs).join(', ') || 'none'})`);
      emitted.push([ns.topicOf(value), ns.codec.encode(value)]);
    },
  };
  const values: unknown[] = [];
  const dead = new Map<BrokerMessage, string>();
  // The last applied sequence per producer: one mark put per producer and batch (sequences
  // classified new only ever grow, so the last is the highest).
  const newMarks = new Map<BrokerMessage['producer'], BrokerMessage['sequence']>();
  let skipped = 0;
  for (const m of messages) {
    const verdict = await marks.classify(m.producer, m.sequence);
    if (verdict.kind === 'applied') {
      skipped++;
      continue;
    }
    if (verdict.kind === 'conflict') {
      dead.set(m, verdict.reason);
      continue;
    }
    let value: unknown;
    try {
      value = def.input.codec.decode(m.payload);
    } catch (err) {
      if (!isShardflowError(err)) throw err;
      dead.set(m, err.message);
      marks.advance(m.producer, m.sequence);
      newMarks.set(m.producer, m.sequence);
      continue;
    }
    await def.onMessage?.(handlerContext, value, m);
    marks.advance(m.producer, m.sequence);
    newMarks.set(m.producer, m.sequence);
    values.push(value);
  }
  if (values.length > 0) await def.onBatch?.(handlerContext, values);
  for (const [producer, seq] of newMarks) marks.record(batch, producer, seq);
  for (const [t, payload] of emitted) await outbox.enqueue(batch, t, payload);
  ctx.fence?.check();
  if (batch.length > 0) await store.write(batch);
  ctx.fence?.check();
  await outbox.publish();
  // Each message counts as settled once the broker took its ack or dead letter; counted by
  // key, so a copy redelivered after an ack the broker lost settles nothing twice.
  for (const m of messages) {
    const reason = dead.get(m);
    if (reason !== undefined) await consumer.deadLetter(m, reason);
    else await consumer.ack(m);
    counters.onSettled(ctx.namespace, messageKey(m));
  }
  return { applied: values.length, skipped, deadLettered: dead.size, emitted: emitted.length };
}

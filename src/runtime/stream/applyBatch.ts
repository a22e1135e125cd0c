import { isShardflowError, InvalidArgumentError } from '../../errors.js';
import type { BrokerMessage, Consumer } from '../brokers/broker.js';
import type { PartitionId } from '../ids.js';
import type { Topic } from '../topics.js';
import type { Store } from '../../storage/index.js';
import type { StreamMarks } from './appliedMarks.js';
import type { FlowCounters } from './flowCounters.js';
import type { StreamOutbox } from './outbox.js';
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
 * @throws whatever the handlers, the codecs of emitted values or the store throw; nothing is
 *   then committed or acked: the caller must drop its marks and outbox (their caches ran
 *   ahead) and have the broker deliver the batch again
 */
export async function applyStageBatch(ctx: StageBatchContext, consumer: Consumer, messages: readonly BrokerMessage[]): Promise<StageBatchReport> {
  const { def, store, marks, outbox } = ctx;
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
  // The producer of the last message that advanced its mark, and that mark (the cache of
  // `marks` holds the same): a next message of that producer above it is new without asking
  // `marks` (no promise per message); anything else is classified by `marks`.
  let runProducer: BrokerMessage['producer'] | undefined;
  let runMark = -1;
  let skipped = 0;
  for (const m of messages) {
    if (m.producer !== runProducer || m.sequence <= runMark) {
      const verdict = await marks.classify(m.producer, m.sequence);
      if (verdict.kind === 'applied') {
        skipped++;
        continue;
      }
      if (verdict.kind === 'conflict') {
        dead.set(m, verdict.reason);
        continue;
      }
    }
    marks.advance(m.producer, m.sequence);
    newMarks.set(m.producer, m.sequence);
    runProducer = m.producer;
    runMark = m.sequence;
    let value: unknown;
    try {
      value = def.input.codec.decode(m.payload);
    } catch (err) {
      if (!isShardflowError(err)) throw err;
      dead.set(m, err.message);
      continue;
    }
    // Awaited only when the handler returned a promise: no microtask per message otherwise.
    const pending = def.onMessage?.(handlerContext, value, m);
    if (pending) await pending;
    values.push(value);
  }
  if (values.length > 0) await def.onBatch?.(handlerContext, values);
  for (const [producer, seq] of newMarks) marks.record(batch, producer, seq);
  for (const [t, payload] of emitted) await outbox.enqueue(batch, t, payload);
  if (batch.length > 0) await store.write(batch);
  await outbox.publish();
  await settleAll(ctx, consumer, messages, dead);
  return { applied: values.length, skipped, deadLettered: dead.size, emitted: emitted.length };
}

/**
 * Acks (or dead-letters, with its reason) every message of a committed batch: all asked at
 * once, in order (one wait for the batch, not one per message; a wire broker pipelines them),
 * then counted settled in one go. Each message counts as settled once the broker took its ack
 * or dead letter, by key, so a copy redelivered after an ack the broker lost settles nothing
 * twice; counted after the batch's acks (never before its own: quiescence only waits longer).
 * @throws the first error of an ack or dead letter, once every other one finished and those
 *   that succeeded were counted (the broker delivers the rest again; their marks skip them)
 */
async function settleAll(ctx: StageBatchContext, consumer: Consumer, messages: readonly BrokerMessage[], dead: ReadonlyMap<BrokerMessage, string>): Promise<void> {
  const settling: Array<Promise<void>> = new Array(messages.length);
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i]!;
    const reason = dead.size > 0 ? dead.get(m) : undefined;
    try {
      settling[i] = reason !== undefined ? consumer.deadLetter(m, reason) : consumer.ack(m);
    } catch (err) {
      settling[i] = Promise.reject(err);
    }
  }
  try {
    await Promise.all(settling);
  } catch (err) {
    const outcomes = await Promise.allSettled(settling);
    ctx.counters.onSettledMessages(ctx.namespace, messages.filter((_, i) => outcomes[i]!.status === 'fulfilled'));
    throw err;
  }
  ctx.counters.onSettledMessages(ctx.namespace, messages);
}

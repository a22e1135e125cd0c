import { isShardflowError } from '../../errors.js';
import type { BrokerMessage, Consumer } from '../brokers/broker.js';
import type { PartitionId } from '../ids.js';
import type { Store } from '../../storage/index.js';
import type { StreamMarks } from './appliedMarks.js';
import { batchContext } from './batchContext.js';
import { ReadYourWritesBatch } from './readYourWritesBatch.js';
import { DeadLetterRows } from './deadLetterRows.js';
import type { FlowCounters } from './flowCounters.js';
import type { StreamOutbox } from './outbox.js';
import type { PartitionFence } from './ownerEpoch.js';
import type { HeldBatch } from './stageCheckpoints.js';
import type { StageDef, StageOutputs, StageReads } from './stage.js';

/** What `applyStageBatch` works with: one incarnation of one stage partition. */
export interface StageBatchContext {
  readonly partition: PartitionId;
  readonly namespace: string;
  readonly def: StageDef<any, StageOutputs, string, unknown, unknown>;
  readonly store: Store;
  /** Committed reads (the `query` hook's); a batch's handlers read through the batch instead. */
  readonly reads: StageReads<string>;
  readonly marks: StreamMarks;
  readonly outbox: StreamOutbox;
  readonly counters: FlowCounters;
  /** The cluster ownership this partition runs under: checked before the commit and before the publish (throws FencedError). */
  readonly fence?: PartitionFence;
  /**
   * Whether this partition's handlers read in an earlier batch (then batches start indexed,
   * see `ReadYourWritesBatch`); set when one does. Absent: every batch starts plain.
   */
  readonly readsSeen?: { value: boolean };
  /** A reason to dead-letter a new message without applying it (a message that failed too often: `PoisonMessages.giveUp`). */
  readonly giveUp?: (m: BrokerMessage) => string | undefined;
  /**
   * With checkpoints (stageCheckpoints.ts): the batch's effects outside the store wait for the
   * checkpoint that covers it. After the commit, nothing is published (the outbox keeps its
   * rows) and nothing acked: `settle` acks or dead-letters the batch's messages, to be called
   * once a checkpoint holding the commit is durable; `committed` says whether it wrote.
   * Absent: publish and settle at once.
   */
  readonly holdEffects?: (held: HeldBatch, committed: boolean) => void;
  /** The broker's `maxPayloadBytes`: an emit over it throws PayloadTooLargeError in its handler. Absent: not checked. */
  readonly maxPayloadBytes?: number;
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
 * each message against its producer's applied mark (skip a redelivery, dead-letter it again
 * if it was dead-lettered, dead-letter a fenced-off older incarnation), decodes it
 * (dead-letter it with the codec's reason when it does not decode), runs `onMessage` per
 * message in a save point of one read-your-writes batch (`batchContext`: a message
 * dead-lettered by its handler or `onError` leaves no effect) and `onBatch` once, writes the
 * effects, the marks, the dead letters' reasons (`DeadLetterRows`) and the emitted messages'
 * outbox rows in that batch, commits, publishes the outbox, then acks (or dead-letters) every
 * message and counts it settled.
 *
 * With `holdEffects` (checkpoints), the publish and the settles wait for the checkpoint that
 * covers the commit (see `StageBatchContext.holdEffects`).
 *
 * With a `fence` (cluster ownership), the lease is checked right before the commit and again
 * before the publish: a fenced-off owner commits nothing, or leaves what it committed in the
 * outbox for the next owner to publish (same sequences), and acks nothing.
 *
 * @throws whatever the handlers (an `onMessage` error decided `'fail'`), `onError`, the codecs
 *   of emitted values or the store throw, and FencedError; nothing is then committed or acked:
 *   the caller must drop its marks and outbox (their caches ran ahead) and have the broker
 *   deliver the batch again
 */
export async function applyStageBatch(ctx: StageBatchContext, consumer: Consumer, messages: readonly BrokerMessage[]): Promise<StageBatchReport> {
  const { def, store, marks, outbox } = ctx;
  const rw = new ReadYourWritesBatch(store, ctx.readsSeen?.value === true);
  const { context: handlerContext, emitted, applyMessage } = batchContext(ctx.partition, def, rw, ctx.reads, ctx.maxPayloadBytes);
  const deadRows = new DeadLetterRows(store, marks.consumer);
  const values: unknown[] = [];
  const dead = new Map<BrokerMessage, string>();
  /** A message of this batch, covered by its mark, goes to the dead-letter topic with `reason`. */
  const deadLetter = (m: BrokerMessage, reason: string) => {
    dead.set(m, reason);
    deadRows.record(rw, m, reason);
  };
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
        const taken = await marks.takenReason(m.producer, m.sequence, m.payload);
        if (taken !== undefined) {
          dead.set(m, taken);
          continue;
        }
        const reason = await deadRows.reasonOf(m);
        if (reason === undefined) skipped++;
        else dead.set(m, reason); // its dead letter did not reach the broker before a crash
        continue;
      }
      if (verdict.kind === 'conflict') {
        dead.set(m, verdict.reason);
        continue;
      }
    }
    let value: unknown;
    let undecodable: string | undefined;
    try {
      value = def.input.codec.decode(m.payload);
    } catch (err) {
      if (!isShardflowError(err)) throw err;
      // Its producer's mark moves only when it is that producer's next sequence (StreamMarks.follows).
      if (!(await marks.follows(m.producer, m.sequence))) {
        dead.set(m, err.message);
        await marks.deadLetteredAbove(rw, m.producer, m.sequence);
        continue;
      }
      undecodable = err.message;
      marks.takeUndecodable(rw, m.producer, m.sequence, m.payload);
    }
    marks.advance(m.producer, m.sequence);
    newMarks.set(m.producer, m.sequence);
    runProducer = m.producer;
    runMark = m.sequence;
    if (undecodable !== undefined) {
      deadLetter(m, undecodable);
      continue;
    }
    const givenUp = ctx.giveUp?.(m);
    if (givenUp !== undefined) {
      deadLetter(m, givenUp);
      continue;
    }
    // Awaited only when the handler returned a promise: no microtask per message otherwise.
    const applied = applyMessage(value, m);
    const reason = typeof applied === 'object' ? await applied : applied;
    if (reason === undefined) values.push(value);
    else deadLetter(m, reason);
  }
  if (values.length > 0) await def.onBatch?.(handlerContext, values);
  if (ctx.readsSeen && rw.indexed) ctx.readsSeen.value = true; // the next batches start indexed
  // No handler reads from here on: the framework's rows go to the batch as it is.
  const batch = rw.batch;
  for (const [producer, seq] of newMarks) marks.record(batch, producer, seq);
  for (const [t, payload] of emitted) await outbox.enqueue(batch, t, payload);
  ctx.fence?.check();
  const committed = batch.length > 0; // a write empties the batch
  if (committed) await store.write(batch);
  const settle = async (): Promise<void> => {
    await settleAll(ctx, consumer, messages, dead);
    if (dead.size > 0) await deadRows.settled(dead.keys());
  };
  if (ctx.holdEffects) {
    ctx.holdEffects({ messages: messages.length, settle }, committed);
  } else {
    ctx.fence?.check();
    await outbox.publish();
    await settle();
  }
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

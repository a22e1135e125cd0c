import { InvalidArgumentError, PayloadTooLargeError } from '../../errors.js';
import type { Chunk, Key } from '../../storage/index.js';
import type { BrokerMessage } from '../brokers/broker.js';
import type { PartitionId } from '../ids.js';
import { topicName, type Topic } from '../topics.js';
import { contextError, decideMessageError, errorReason } from './messageErrors.js';
import type { ReadYourWritesBatch } from './readYourWritesBatch.js';
import type { StageContext, StageDef, StageOutputs, StageReads, StageWrites } from './stage.js';

/**
 * What the handlers of one batch work with: the `StageContext` they are given, over one
 * read-your-writes batch (`ReadYourWritesBatch`: indexed from the first read), and the
 * messages they emitted.
 */
export interface BatchContext {
  readonly context: StageContext<StageOutputs, string>;
  readonly batch: ReadYourWritesBatch;
  /** Emitted messages, in order: the topic of each (routed by its namespace's key) and its encoded value. */
  readonly emitted: Array<[Topic, Uint8Array]>;
  /**
   * Runs `onMessage` for one message inside a save point of the batch. Returns undefined when
   * its effects stay, or the dead-letter reason when they were taken back (writes rolled back
   * to the save point, emits dropped): the handler called `ctx.deadLetter(reason)`, or threw
   * and `onError` (default `defaultMessageErrorDecision`) said `'dead-letter'`.
   * A promise only when the handler returned one (a synchronous handler costs no microtask).
   * @throws the handler's error when the decision is `'fail'`; what `onError` throws;
   *   StoreBusyError when a read the handler left in flight keeps the batch from rolling back
   */
  applyMessage(value: unknown, message: BrokerMessage): string | undefined | Promise<string | undefined>;
}

/**
 * Makes the context of one batch of a stage partition. `ctx.reads` reads the batch on top of
 * the store, so a handler sees the writes of the messages before it in the batch and its own
 * (read-your-writes); `ctx.reads.snapshot` is `committed.snapshot` (a snapshot of the store:
 * `iterate(cf, { snapshot })` reads the batch on top of it). Errors the context's own API
 * throws are marked `contextError` (a handler bug, not bad input). `ctx.emit` checks the value
 * where the handler can still be refused: the output codec's `check` (the guard the receiver's
 * decode applies; InvalidArgumentError), the namespace's key function, and the encoded size
 * against `maxPayloadBytes` (the broker's; PayloadTooLargeError). Those errors are the value's,
 * so the default `onError` dead-letters the input message with them and its effects are taken
 * back, instead of a committed row that the receiver refuses or that no send takes.
 */
export function batchContext(
  partition: PartitionId,
  def: StageDef<any, StageOutputs, string, unknown, unknown>,
  batch: ReadYourWritesBatch,
  committed: StageReads<string>,
  maxPayloadBytes?: number,
): BatchContext {
  const emitted: Array<[Topic, Uint8Array]> = [];
  const outputs = def.outputs ?? {};
  /** The message `onMessage` runs for: where `deadLetter` puts its reason. */
  let current: { reason: string | undefined } | undefined;

  const writes: StageWrites<string> = {
    put(cf, key, value) {
      try {
        batch.put(cf, key, value);
      } catch (err) {
        throw contextError(err);
      }
    },
    merge(cf, key, operand) {
      try {
        batch.merge(cf, key, operand);
      } catch (err) {
        throw contextError(err);
      }
    },
    delete(cf, key) {
      try {
        batch.delete(cf, key);
      } catch (err) {
        throw contextError(err);
      }
    },
  };
  const reads: StageReads<string> = {
    get: (cf: string, key: Key) => {
      try {
        return batch.readable().get(cf, key).catch((err: unknown) => Promise.reject(contextError(err)));
      } catch (err) {
        return Promise.reject(contextError(err));
      }
    },
    iterate: (cf, options) => entriesOf(batch.readable().chunks(cf, options)),
    snapshot: () => committed.snapshot(),
  };
  const context: StageContext<StageOutputs, string> = {
    partition,
    writes,
    reads,
    emit(output, value) {
      const ns = outputs[output];
      if (!ns) throw contextError(new InvalidArgumentError(`emit to ${JSON.stringify(output)}: not an output of this stage (outputs: ${Object.keys(outputs).join(', ') || 'none'})`));
      // The guard's, key function's, codec's and size's errors are the value's: not marked.
      ns.codec.check?.(value);
      const to = ns.topicOf(value);
      const bytes = ns.codec.encode(value);
      if (maxPayloadBytes !== undefined && bytes.byteLength > maxPayloadBytes) {
        throw new PayloadTooLargeError(`emit to ${JSON.stringify(output)} (${topicName(to)}): the value encodes to ${bytes.byteLength} bytes, over the broker's maxPayloadBytes (${maxPayloadBytes})`, bytes.byteLength, maxPayloadBytes);
      }
      emitted.push([to, bytes]);
    },
    deadLetter(reason) {
      if (current === undefined) {
        throw contextError(new InvalidArgumentError('ctx.deadLetter is for onMessage (one message); onBatch fails its batch by throwing'));
      }
      if (typeof reason !== 'string' || reason.length === 0) throw contextError(new InvalidArgumentError('ctx.deadLetter needs a non-empty reason'));
      current.reason ??= reason;
    },
  };

  /** Closes the save point of the message `scope` belongs to (see `applyMessage`). */
  const settle = (scope: { reason: string | undefined }, emits: number, value: unknown, message: BrokerMessage, threw: boolean, err: unknown): string | undefined => {
    current = undefined;
    // An explicit ctx.deadLetter stands even when the handler threw after it.
    if (threw && scope.reason === undefined) {
      if (decideMessageError(def.onError, err, value, message) === 'fail') throw err;
      scope.reason = errorReason(err);
    }
    if (scope.reason === undefined) {
      batch.popSavePoint();
    } else {
      batch.rollbackToSavePoint();
      emitted.length = emits;
    }
    return scope.reason;
  };

  const applyMessage = (value: unknown, message: BrokerMessage): string | undefined | Promise<string | undefined> => {
    if (!def.onMessage) return undefined;
    batch.setSavePoint();
    const emits = emitted.length;
    const scope: { reason: string | undefined } = { reason: undefined };
    current = scope;
    let returned: void | Promise<void>;
    try {
      returned = def.onMessage(context, value, message);
    } catch (err) {
      return settle(scope, emits, value, message, true, err);
    }
    if (returned !== undefined && typeof (returned as PromiseLike<void>).then === 'function') {
      return Promise.resolve(returned).then(
        () => settle(scope, emits, value, message, false, undefined),
        (err: unknown) => settle(scope, emits, value, message, true, err),
      );
    }
    return settle(scope, emits, value, message, false, undefined);
  };

  return { context, batch, emitted, applyMessage };
}

/** The entries of the batch's chunks, one by one; a read error is the context's (`contextError`). */
async function* entriesOf(chunks: AsyncGenerator<Chunk>): AsyncGenerator<[Buffer, Buffer]> {
  const empty = Buffer.alloc(0);
  try {
    for await (const { keys, values } of chunks) {
      for (let k = 0; k < keys.length; k++) yield [keys[k]!, values[k] ?? empty];
    }
  } catch (err) {
    throw contextError(err);
  }
}

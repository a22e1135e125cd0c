import { InvalidArgumentError, isShardflowError } from '../../errors.js';
import type { BrokerMessage } from '../brokers/broker.js';

/**
 * What a stage does with a message whose `onMessage` threw: `'dead-letter'` takes back that
 * message's writes and emits and sends it to the dead-letter topic with the error as the
 * reason, and the rest of the batch commits; `'fail'` fails the whole batch (nothing is
 * committed or acked, the partition restarts and the broker delivers the batch again).
 * After Kafka Streams' ProcessingExceptionHandler (KIP-1033: CONTINUE / FAIL) and Akka's
 * supervision deciders.
 */
export type MessageErrorDecision = 'dead-letter' | 'fail';

/**
 * Error codes that say the message's own data is bad (src/errors.ts): an argument or value
 * refused (`InvalidArgumentError`, e.g. thrown by a namespace's key function while `emit`
 * routes a value), a URL without a host (`InvalidUrlError`, `hostOf`), a value that does not
 * decode or is too large for a broker message.
 */
const BAD_INPUT_CODES: ReadonlySet<string> = new Set(['SF_ERR_INVALID_ARGUMENT', 'SF_ERR_INVALID_URL', 'SF_ERR_UNDECODABLE_MESSAGE', 'SF_ERR_PAYLOAD_TOO_LARGE']);

/** Errors the stage context's own API threw at a handler (see `contextError`). */
const fromContext = new WeakSet<object>();

/**
 * Marks `err` as the stage context refusing a handler's call (`ctx.writes` or `ctx.reads`
 * on an undeclared column family or with a value that is not bytes, `emit` to a namespace
 * that is not an output, `deadLetter` outside `onMessage`, a change of the batch while one of
 * its reads is in flight): a fault of the handler's code, not of the message, so the default
 * decision fails the batch even for an InvalidArgumentError. Returns `err`.
 */
export function contextError<E>(err: E): E {
  if (typeof err === 'object' && err !== null) fromContext.add(err);
  return err;
}

/**
 * The default of `StageDef.onError`: `'dead-letter'` for a ShardflowError of bad input (the
 * codes above: InvalidArgumentError, InvalidUrlError, UndecodableMessageError,
 * PayloadTooLargeError), thrown by the handler or by what it called (a key function or codec
 * while `emit` routes and encodes a value), unless the stage context's API threw it
 * (`contextError`); `'fail'` for every other error (a TypeError, a store or broker error):
 * an unknown error may be the handler's bug or a passing fault, and a failed batch is
 * delivered again, where a dead letter would drop the message from the stage's state.
 */
export function defaultMessageErrorDecision(err: unknown): MessageErrorDecision {
  return isShardflowError(err) && BAD_INPUT_CODES.has(err.code) && !fromContext.has(err) ? 'dead-letter' : 'fail';
}

/**
 * Asks `decide` (the stage's `onError`, else the default) what to do with `err`.
 * @throws whatever `decide` throws, or InvalidArgumentError when it answers neither
 *   `'dead-letter'` nor `'fail'` (with `err` as the cause)
 */
export function decideMessageError<I>(
  decide: ((err: unknown, value: I, message: BrokerMessage) => MessageErrorDecision) | undefined,
  err: unknown,
  value: I,
  message: BrokerMessage,
): MessageErrorDecision {
  if (!decide) return defaultMessageErrorDecision(err);
  const decision = decide(err, value, message);
  if (decision !== 'dead-letter' && decision !== 'fail') {
    throw new InvalidArgumentError(`onError must return 'dead-letter' or 'fail', got ${JSON.stringify(decision)}`, { cause: err });
  }
  return decision;
}

/** The dead-letter reason for a message whose `onMessage` threw `err`: its class, code and message. */
export function errorReason(err: unknown): string {
  if (isShardflowError(err)) return `onMessage threw ${err.name} (${err.code}): ${err.message}`;
  if (err instanceof Error) return `onMessage threw ${err.name}: ${err.message}`;
  return `onMessage threw ${String(err)}`;
}

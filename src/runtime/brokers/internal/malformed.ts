import { ReplaySubject, type Observable } from 'rxjs';
import { InvalidArgumentError, PayloadTooLargeError } from '../../../errors.js';
import { topicName, type Topic } from '../../topics.js';
import { sequence as toSequence, type Sequence } from '../../ids.js';
import type { DeadLetter } from '../broker.js';

/**
 * What every broker does with an entry that cannot become a `BrokerMessage` (a foreign or
 * broken producer wrote it): the checks, their reasons, the limits and the record a consumer
 * keeps of them. The brokers dead-letter such an entry alone (to the subscription's
 * dead-letter topic, with the reason), ack it, and deliver the rest of its batch.
 */

/**
 * Default of the brokers' `maxPayloadBytes`: 5 MiB, Pulsar's default `maxMessageSize`
 * (5242880 bytes in Pulsar's broker.conf), so a payload one broker carries every broker does.
 */
export const DEFAULT_MAX_PAYLOAD_BYTES = 5 * 1024 * 1024;

/** Default of the brokers' `maxDeadLetters`: dead letters kept per dead-letter topic. */
export const DEFAULT_MAX_DEAD_LETTERS = 10_000;

/**
 * Checks a positive integer option.
 * @throws InvalidArgumentError when `value` is not an integer >= 1.
 */
export function positiveInteger(name: string, value: number): number {
  if (!Number.isSafeInteger(value) || value < 1) throw new InvalidArgumentError(`${name} must be an integer >= 1, got ${value}`);
  return value;
}

/** The fields of an entry as found on the wire; undefined = absent. */
export interface RawFields {
  readonly payload?: Uint8Array;
  readonly producer?: string;
  readonly sequence?: string;
}

/** The wire names of the three fields, for reasons (Redis: `payload`; Pulsar: `sf-sequence`, ...). */
export interface FieldNames {
  readonly payload: string;
  readonly producer: string;
  readonly sequence: string;
}

/** A sequence as the producers write it: a decimal integer without sign, exponent or leading zeros. */
const DECIMAL = /^(0|[1-9][0-9]*)$/;

/**
 * The sequence written as `text`, or undefined when it is not a non-negative safe decimal
 * integer (`abc`, `-1`, `1.5`, `1e3`, `''`, `007` and values above 2^53 - 1 are not).
 */
export function parseSequence(text: string): Sequence | undefined {
  if (!DECIMAL.test(text)) return undefined;
  const n = Number(text);
  return Number.isSafeInteger(n) ? toSequence(n) : undefined;
}

/**
 * Why an entry with these fields is not a message, or undefined when it is one. Reasons start
 * with `malformed entry:` and name the problem: no fields of ours (neither producer nor
 * sequence), which fields are missing,
 * an empty producer, the sequence text, or the payload size against `maxPayloadBytes`.
 */
export function entryProblem(f: RawFields, maxPayloadBytes: number, names: FieldNames): string | undefined {
  const missing = (['payload', 'producer', 'sequence'] as const).filter((k) => f[k] === undefined);
  // Producer and sequence are what make an entry ours (a Pulsar message always has a payload).
  if (f.producer === undefined && f.sequence === undefined) {
    return `malformed entry: no fields of a shardflow message (${missing.map((k) => names[k]).join(', ')} absent)`;
  }
  if (missing.length > 0) return `malformed entry: missing field ${missing.map((k) => names[k]).join(', ')}`;
  if (f.producer === '') return `malformed entry: empty ${names.producer}`;
  if (parseSequence(f.sequence!) === undefined) {
    return `malformed entry: bad sequence ${JSON.stringify(f.sequence!.slice(0, 40))} in ${names.sequence} (not a non-negative decimal integer)`;
  }
  return oversized(f.payload!.byteLength, maxPayloadBytes);
}

/** The reason for a payload of `bytes` over `maxPayloadBytes`, or undefined when it fits. */
export function oversized(bytes: number, maxPayloadBytes: number): string | undefined {
  return bytes > maxPayloadBytes ? `malformed entry: oversized payload of ${bytes} bytes exceeds maxPayloadBytes ${maxPayloadBytes}` : undefined;
}

/**
 * A producer's check before it sends a payload of `bytes` on `topic`, the same in every broker.
 * @throws PayloadTooLargeError when `bytes` > `maxPayloadBytes` (nothing reaches the broker)
 */
export function checkSendSize(topic: Topic, bytes: number, maxPayloadBytes: number): void {
  if (bytes > maxPayloadBytes) {
    throw new PayloadTooLargeError(`send on ${topicName(topic)}: payload of ${bytes} bytes exceeds maxPayloadBytes ${maxPayloadBytes}; nothing was sent`, bytes, maxPayloadBytes);
  }
}

/** Warnings printed per consumer with their reason before only every 1000th is. */
const WARN_FIRST = 10;

/** How many recent malformed dead letters `malformed$` replays to a new subscriber. */
export const MALFORMED_REPLAY = 100;

/**
 * A consumer's record of the malformed entries it dead-lettered: a count, a stream of the
 * dead letters (with reasons) that replays the last `MALFORMED_REPLAY` to a new subscriber
 * (a consumer may meet malformed entries before its owner had a chance to subscribe), and a
 * process warning (`SF_MALFORMED_ENTRY`) for the first ten and every 1000th after, so nothing
 * is dropped in silence even when nobody subscribes.
 */
export class MalformedLog {
  readonly #subject = new ReplaySubject<DeadLetter>(MALFORMED_REPLAY);
  readonly malformed$: Observable<DeadLetter> = this.#subject.asObservable();
  #count = 0;

  /** @param who names the consumer in warnings, e.g. `redis consumer c1 of sub on links/3`. */
  constructor(readonly who: string) {}

  /** Malformed entries dead-lettered so far. */
  get count(): number {
    return this.#count;
  }

  /** Records one malformed entry that is in the dead-letter topic now. */
  record(dead: DeadLetter): void {
    this.#count++;
    if (this.#count <= WARN_FIRST || this.#count % 1000 === 0) {
      const more = this.#count === WARN_FIRST ? ' (further ones: every 1000th is logged; see Consumer.malformed$)' : '';
      process.emitWarning(`${this.who}: dead-lettered entry ${dead.message.id} (#${this.#count}): ${dead.reason}${more}`, { code: 'SF_MALFORMED_ENTRY' });
    }
    this.#subject.next(dead);
  }

  /** Completes `malformed$` (consumer closed). */
  complete(): void {
    this.#subject.complete();
  }
}

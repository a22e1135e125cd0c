import { C1, Packr } from 'msgpackr';
import { InvalidArgumentError, UndecodableMessageError } from '../errors.js';

/**
 * msgpack on the wire (msgpackr). One `Codec<T>` per message type; `decode` checks the shape
 * with the type's guard so a foreign or corrupt payload becomes an `UndecodableMessageError`
 * (which consumers send to the dead-letter topic with its reason) instead of a crash later.
 */
export interface Codec<T> {
  /** msgpack bytes of `value`. */
  encode(value: T): Uint8Array;
  /** @throws UndecodableMessageError when the bytes are not msgpack or fail the guard. */
  decode(bytes: Uint8Array): T;
  /**
   * Checks a value before it is sent (what `decode` would refuse at the receiver), so that a
   * producer fed from outside the type system (JSON, another queue) fails at its `send`,
   * where the caller can act, instead of leaving a dead letter downstream. Optional: codecs
   * without it are not checked at the send.
   * @throws InvalidArgumentError naming the codec and what is wrong
   */
  check?(value: unknown): asserts value is T;
}

/**
 * msgpackr records: the field names of an object shape are written once per message (as an
 * inline record definition, so each message stands alone and any msgpackr decoder reads it)
 * and each object after that is its values. A batch of 640 link operations: 40% fewer
 * bytes, encoded 1.6x and decoded 4x faster than plain maps (measured with msgpackr 2.1).
 * `mapsAsObjects`: plain msgpack maps (other producers, rows written before records) still
 * decode to objects (with records on, msgpackr would return Maps).
 */
const packr = new Packr({ useRecords: true, mapsAsObjects: true, moreTypes: false, int64AsType: 'number' });
/** The same, but a msgpack int64 (what a bigint encodes to) decodes to a bigint. */
const bigintPackr = new Packr({ useRecords: true, mapsAsObjects: true, moreTypes: false, int64AsType: 'bigint' });

/** Options of {@link msgpackCodec}. */
export interface MsgpackCodecOptions {
  /**
   * What a msgpack int64 decodes to: `number` (the default; above 2^53 it loses precision) or
   * `bigint`, so that a bigint encoded stays one. A JS number never encodes as int64 (an
   * integer above 32 bits is a float64), so numbers decode as numbers either way.
   */
  readonly int64?: 'number' | 'bigint';
}

/**
 * A msgpack codec whose `decode` accepts only values for which `guard` returns true, and
 * whose `check` runs the same guard on a value before an external producer sends it.
 * `guard` may also throw to say what is wrong (`throw new Error('outlink 3 has no host')`):
 * `decode` then throws UndecodableMessageError `<name>: <that message>`, so a stage
 * dead-letters the message with that reason; false gives the reason "value does not have the
 * expected shape". A guard's throw never escapes as another error, which would fail the
 * stage's batch and restart its partition on the same message again and again.
 * `options.int64`: what an int64 decodes to (MsgpackCodecOptions).
 */
export function msgpackCodec<T>(name: string, guard: (value: unknown) => value is T, options: MsgpackCodecOptions = {}): Codec<T> {
  const unpacker = options.int64 === 'bigint' ? bigintPackr : packr;
  return {
    encode: (value) => packr.pack(value),
    decode: (bytes) => {
      let value: unknown;
      try {
        value = unpacker.unpack(bytes);
      } catch (cause) {
        throw new UndecodableMessageError(`${name}: bytes are not msgpack (${undecodableDetail(bytes, cause instanceof Error ? cause.message : String(cause))})`, { cause });
      }
      // msgpackr reads the byte msgpack never uses (0xC1) as a marker object, not an error.
      if (value === C1) throw new UndecodableMessageError(`${name}: bytes are not msgpack (${undecodableDetail(bytes, '0xC1, a byte msgpack never uses')})`);
      const wrong = guardFailure(name, guard, value);
      if (wrong !== undefined) throw new UndecodableMessageError(wrong.message, { cause: wrong.cause });
      return value as T;
    },
    check(value: unknown): asserts value is T {
      const wrong = guardFailure(name, guard, value);
      if (wrong !== undefined) throw new InvalidArgumentError(`${wrong.message} (refused at the send)`, { cause: wrong.cause });
    },
  };
}

/** Why `guard` refuses `value` (its throw, or false), or undefined when it accepts it. */
function guardFailure(name: string, guard: (value: unknown) => boolean, value: unknown): { readonly message: string; readonly cause?: unknown } | undefined {
  try {
    return guard(value) ? undefined : { message: `${name}: value does not have the expected shape` };
  } catch (cause) {
    return { message: `${name}: ${cause instanceof Error ? cause.message : String(cause)}`, cause };
  }
}

/**
 * What was wrong with bytes msgpackr could not read, for a reason a person reads: `said`
 * (msgpackr's message), then the payload's length and first bytes (as hex, and as text when
 * they are printable ASCII: a producer that sent text or JSON instead of msgpack shows at once).
 */
function undecodableDetail(bytes: Uint8Array, said: string): string {
  const head = bytes.subarray(0, 16);
  const more = bytes.length > head.length;
  const hex = Buffer.from(head).toString('hex').replace(/(..)(?!$)/g, '$1 ');
  const text = head.every((b) => b >= 0x20 && b < 0x7f) ? `, text "${Buffer.from(head).toString('latin1')}${more ? '...' : ''}"` : '';
  return `${said}; ${bytes.length} byte${bytes.length === 1 ? '' : 's'}, starting ${hex}${more ? ' ...' : ''}${text}`;
}

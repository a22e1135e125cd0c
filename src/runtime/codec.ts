import { Packr } from 'msgpackr';
import { UndecodableMessageError } from '../errors.js';

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
}

const packr = new Packr({ useRecords: false, moreTypes: false, int64AsType: 'number' });

/** A msgpack codec whose `decode` accepts only values for which `guard` returns true. */
export function msgpackCodec<T>(name: string, guard: (value: unknown) => value is T): Codec<T> {
  return {
    encode: (value) => packr.pack(value),
    decode: (bytes) => {
      let value: unknown;
      try {
        value = packr.unpack(bytes);
      } catch (cause) {
        throw new UndecodableMessageError(`${name}: bytes are not msgpack (${(cause as Error).message})`, { cause });
      }
      if (!guard(value)) throw new UndecodableMessageError(`${name}: value does not have the expected shape`);
      return value;
    },
  };
}

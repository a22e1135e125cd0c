import { InvalidArgumentError } from '../../errors.js';
import type { ColumnFamilyOptions } from '../../storage/store.js';

/**
 * The column families a stream stage's store holds for the framework's own bookkeeping.
 * Their names start with `sf.`, which user column families may not:
 *
 * | family      | key                              | value                                        |
 * |-------------|----------------------------------|----------------------------------------------|
 * | `sf.meta`   | `applied 0x00 <stage> 0x00 <producer>` | int64 LE: highest applied sequence (epoch-packed, see producerEpoch.ts) |
 * |             | `seq 0x00 <stage> 0x00 <topic>`  | int64 LE: the outbox's next sequence on `<topic>` |
 * |             | `producer 0x00 <stage>`          | UTF-8: the outbox's producer name (`<stage>@<p>`) |
 * |             | `shape`                          | msgpack `StageShape`: what the store was written as |
 * |             | `owner-epoch`                    | int64 LE: lease epoch of the last cluster owner that opened the store (ownerEpoch.ts) |
 * | `sf.outbox` | `<stage>|<topic> 0x00 seq (BE)`  | payload bytes to publish                     |
 */
export const StreamColumnFamilies = Object.freeze({
  meta: 'sf.meta',
  outbox: 'sf.outbox',
} as const);

/**
 * Which column families of a store hold the stream bookkeeping: `meta` (applied marks and
 * outbox sequences, keys as in the table above) and `outbox` (outbox rows). Stages use
 * `StreamColumnFamilies` (`sf.meta`, `sf.outbox`); an application that opens its own stores
 * names its own (for example `meta` and `outbox`); keys and values are the same.
 */
export interface StreamColumnFamilyNames {
  readonly meta: string;
  readonly outbox: string;
}

/** Prefix of the framework's reserved column family names. */
export const RESERVED_PREFIX = 'sf.';

/**
 * The column families of a stage store: the user's, then the reserved ones.
 * @throws InvalidArgumentError when a user family's name is empty, `default` or starts with `sf.`
 */
export function stageColumnFamilies(user: Readonly<Record<string, ColumnFamilyOptions>>): Record<string, ColumnFamilyOptions> {
  for (const name of Object.keys(user)) {
    if (name.length === 0) throw new InvalidArgumentError('a column family name is empty');
    if (name.startsWith(RESERVED_PREFIX) || name === 'default') {
      throw new InvalidArgumentError(`column family ${JSON.stringify(name)} is reserved: names starting with '${RESERVED_PREFIX}' (and 'default') belong to the framework`);
    }
  }
  return { ...user, [StreamColumnFamilies.meta]: {}, [StreamColumnFamilies.outbox]: {} };
}

const SEP = 0;
const utf8d = new TextDecoder();

/** Key of an outbox row: topic name, 0x00, sequence as 8-byte big-endian (rows sort by sequence). */
export function outboxKey(topic: string, seq: number): Buffer {
  const n = Buffer.byteLength(topic, 'utf8');
  const key = Buffer.allocUnsafe(n + 9);
  key.write(topic, 0, 'utf8');
  key[n] = SEP;
  key.writeUInt32BE(Math.floor(seq / 0x1_0000_0000), n + 1);
  key.writeUInt32BE(seq >>> 0, n + 5);
  return key;
}

/** Inverse of `outboxKey`. */
export function parseOutboxKey(key: Uint8Array): { topic: string; seq: number } {
  const i = key.indexOf(SEP);
  const buf = Buffer.from(key.buffer, key.byteOffset, key.byteLength);
  return { topic: utf8d.decode(key.subarray(0, i)), seq: Number(buf.readBigUInt64BE(i + 1)) };
}

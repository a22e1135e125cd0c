import { InvalidArgumentError } from '../errors.js';
import type { Key } from './key.js';
import type { NativeWriteBatch } from './native.js';

/**
 * Puts, merges and deletes on any column families of one store, applied atomically by
 * `store.write(batch)`: all or nothing, and readers never see part of it. Made by
 * `store.batch()`. Methods are synchronous (they only append to a native buffer) and
 * chainable. `write` copies the batch, so it can be cleared and reused at once.
 *
 * @example
 * const batch = store.batch()
 *   .merge('ranks', url, encodeFloat64s(0, contribution))
 *   .put('meta', `applied/${producer}`, encodeInt64(seq));
 * await store.write(batch, { sync: true });
 */
export class WriteBatch {
  readonly #native: NativeWriteBatch;
  readonly #cf: (name: string) => number;

  /** @internal Made by Store.batch(). */
  constructor(native: NativeWriteBatch, columnFamilyIndex: (name: string) => number) {
    this.#native = native;
    this.#cf = columnFamilyIndex;
  }

  /** @internal */
  get native(): NativeWriteBatch {
    return this.#native;
  }

  /** Number of operations recorded. */
  get length(): number {
    return this.#native.count();
  }

  /** Size of the batch's serialized form in bytes. */
  get byteLength(): number {
    return this.#native.byteSize();
  }

  /** @throws InvalidArgumentError for an undeclared column family or a non-bytes value. */
  put(cf: string, key: Key, value: Uint8Array): this {
    checkValue(value);
    this.#native.put(this.#cf(cf), key, value);
    return this;
  }

  merge(cf: string, key: Key, operand: Uint8Array): this {
    checkValue(operand);
    this.#native.merge(this.#cf(cf), key, operand);
    return this;
  }

  delete(cf: string, key: Key): this {
    this.#native.delete(this.#cf(cf), key);
    return this;
  }

  /** Deletes every key in [start, end). */
  deleteRange(cf: string, start: Key, end: Key): this {
    this.#native.deleteRange(this.#cf(cf), start, end);
    return this;
  }

  clear(): this {
    this.#native.clear();
    return this;
  }
}

function checkValue(v: Uint8Array): void {
  if (!(v instanceof Uint8Array)) throw new InvalidArgumentError('values and operands must be Uint8Arrays');
}

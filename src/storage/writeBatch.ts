import { InvalidArgumentError } from '../errors.js';
import type { Key, PackedKeys } from './key.js';
import type { NativeWriteBatch } from './native.js';

/**
 * Puts, merges and deletes on any column families of one store, applied atomically by
 * `store.write(batch)`: all or nothing, and readers never see part of it. Made by
 * `store.batch()`. Methods are synchronous (they only append to a native buffer) and
 * chainable. `write` takes the batch's operations (no copy), leaving it empty and
 * reusable at once.
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
  /** Indexes of the column families an operation was recorded on since the last write (`Store.writesTo`). */
  #touched: number[] = [];

  /** @internal Made by Store.batch(). */
  constructor(native: NativeWriteBatch, columnFamilyIndex: (name: string) => number) {
    this.#native = native;
    this.#cf = (name) => {
      const i = columnFamilyIndex(name);
      if (!this.#touched.includes(i)) this.#touched.push(i);
      return i;
    };
  }

  /**
   * @internal Store.write: the column families recorded on, forgotten (the batch is empty
   * after a write); `restore` gives them back when the write failed.
   */
  takeTouched(restore?: readonly number[]): number[] {
    if (restore) {
      for (const i of restore) if (!this.#touched.includes(i)) this.#touched.push(i);
      return [];
    }
    const t = this.#touched;
    this.#touched = [];
    return t;
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

  /**
   * Many merges in one native call: `keys[i]` gets `operands[i]`, or every key gets
   * `operands` when it is one Uint8Array. Same result as calling {@link merge} for each
   * key in order; all or nothing (nothing is recorded when an argument is bad).
   * @throws InvalidArgumentError for an undeclared column family, lengths that differ, or
   *   a key / operand that is not a string / Uint8Array.
   */
  mergeMany(cf: string, keys: readonly Key[], operands: readonly Uint8Array[] | Uint8Array): this {
    this.#native.mergeMany(this.#cf(cf), keys as Key[], operands as Uint8Array[] | Uint8Array);
    return this;
  }

  /**
   * Many puts of two-part keys in one native call: put i has key `firsts[i] 0x00
   * seconds[i]` and value `values[i]`; any of the three may be one value for every put
   * (at least one must be an array; the arrays must have one length). Same result as
   * calling {@link put} with each key built in JS (e.g. link keys `source 0x00 target`),
   * without a Buffer per key; strings are encoded as UTF-8. All or nothing.
   * `options.keyOrder` records the puts in key order (see {@link PairsOptions}).
   * @throws InvalidArgumentError for an undeclared column family, arrays that differ in
   *   length, no array at all, or a key part / value of the wrong type.
   */
  putPairs(cf: string, firsts: readonly Key[] | Key, seconds: readonly Key[] | Key, values: readonly Uint8Array[] | Uint8Array, options?: PairsOptions): this {
    return this.#pairs(cf, firsts, seconds, values, false, options?.keyOrder === true);
  }

  /**
   * Many merges into two-part keys in one native call: `operands[i]` into key `firsts[i]
   * 0x00 seconds[i]`, with the argument forms of {@link putPairs}. Same result as calling
   * {@link merge} with each key built in JS (e.g. backlink keys `target 0x00 source`),
   * without a Buffer per key. All or nothing.
   * `options.keyOrder` records the merges in key order (see {@link PairsOptions}).
   * @throws InvalidArgumentError as {@link putPairs} does
   */
  mergePairs(cf: string, firsts: readonly Key[] | Key, seconds: readonly Key[] | Key, operands: readonly Uint8Array[] | Uint8Array, options?: PairsOptions): this {
    return this.#pairs(cf, firsts, seconds, operands, true, options?.keyOrder === true);
  }

  #pairs(cf: string, firsts: readonly Key[] | Key, seconds: readonly Key[] | Key, values: readonly Uint8Array[] | Uint8Array, merge: boolean, keyOrder: boolean): this {
    const joined = joinedPairs(firsts, seconds, values);
    if (joined) {
      const [n, first, firstJoined, second, secondJoined, distinct, index] = joined;
      this.#native.putPairsJoined(this.#cf(cf), n, first, firstJoined, second, secondJoined, distinct, index, merge, keyOrder);
    } else if (!merge && !keyOrder) {
      this.#native.putPairs(this.#cf(cf), firsts as Key[] | Key, seconds as Key[] | Key, values as Uint8Array[] | Uint8Array);
    } else {
      // Key parts that are bytes or hold a 0x00 (rare): each key built here.
      const [keys, operands] = builtPairs(firsts, seconds, values, keyOrder);
      if (merge) this.#native.mergeMany(this.#cf(cf), keys, operands);
      else for (let i = 0; i < keys.length; i++) this.#native.put(this.#cf(cf), keys[i]!, operands[i]!);
    }
    return this;
  }

  /**
   * Many `float64Add` merges in one native call, without one Buffer per operand: key i gets
   * the operand `values[i*stride .. (i+1)*stride)` encoded as `stride` LE float64 (the
   * `encodeFloat64s` layout). Same result as `merge(cf, keys[i], encodeFloat64s(...))` for
   * each key in order. The metric's contributions are `stride = 2`, values `[0, c0, 0, c1, ...]`.
   * `keys` may be packed (`PackedKeys`, src/storage/key.ts): no JS object per key.
   * @throws InvalidArgumentError unless `values.length === keys.length * stride`
   *   (stride 1..4096), or for an undeclared column family, a bad key, or packed `ends`
   *   that decrease or pass the end of `bytes`.
   */
  mergeFloat64s(cf: string, keys: readonly Key[] | PackedKeys, values: Float64Array, stride = 1): this {
    if (Array.isArray(keys)) this.#native.mergeFloat64s(this.#cf(cf), keys as Key[], values, stride);
    else {
      const packed = keys as PackedKeys;
      this.#native.mergeFloat64sPacked(this.#cf(cf), packed.bytes, packed.ends, values, stride, packed.starts);
    }
    return this;
  }

  /**
   * Many merges into two-part keys in runs, from packed columns, in one native call (no JS
   * object per merge): in each group, run j merges `operands` key j into the keys `first
   * 0x00 seconds_j` of the group's next `runs[j]` firsts; groups are taken in order. Without
   * options, the same result as calling {@link merge} for each key built in JS. For merges
   * that share their second key part and operand in runs: the copies of a source page's
   * metric into the backlink keys `target 0x00 source` of its targets. All or nothing.
   * - `options.lastPerKey`: only the last merge of each key is recorded. The same result
   *   only when a key's later operand replaces its earlier ones whatever they hold (e.g. a
   *   `record` operand setting the same `lww` fields each time); the caller's claim,
   *   not checked.
   * - `options.keyOrder`: the merges are recorded in key order (a stable sort: the merges
   *   of one key keep their order), for memtable insert hints (see {@link PairsOptions}).
   * @throws InvalidArgumentError for an undeclared column family, a group whose `seconds`,
   *   `operands` and `runs` differ in length or whose runs do not sum to its firsts' count,
   *   or packed `ends` / `starts` out of their bytes (or decreasing, without `starts`).
   */
  mergePairRuns(cf: string, groups: readonly PairRuns[], options?: { readonly lastPerKey?: boolean; readonly keyOrder?: boolean }): this {
    const columns: Array<Uint8Array | Uint32Array | undefined> = [];
    for (const g of groups) {
      columns.push(g.firsts.bytes, g.firsts.ends, g.firsts.starts, g.seconds.bytes, g.seconds.ends, g.seconds.starts, g.operands.bytes, g.operands.ends, g.operands.starts, g.runs);
    }
    this.#native.mergePairRuns(this.#cf(cf), columns, options?.lastPerKey === true, options?.keyOrder === true);
    return this;
  }

  delete(cf: string, key: Key): this {
    this.#native.delete(this.#cf(cf), key);
    return this;
  }

  /**
   * Deletes every key in [start, end).
   * @throws InvalidArgumentError for an undeclared column family, or one opened with
   *   `memtableInsertHint` (RocksDB 7.8 would corrupt its memtable): delete its keys one by one.
   */
  deleteRange(cf: string, start: Key, end: Key): this {
    this.#native.deleteRange(this.#cf(cf), start, end);
    return this;
  }

  clear(): this {
    this.#native.clear();
    return this;
  }

  /**
   * Marks the current end of the batch (RocksDB's `WriteBatch::SetSavePoint`); save points
   * stack. With {@link rollbackToSavePoint}, what one step recorded can be taken back
   * without losing the rest (a stage dead-letters one message of a batch this way).
   */
  setSavePoint(): this {
    this.#native.setSavePoint();
    return this;
  }

  /**
   * Removes everything recorded since the latest save point, and that save point. Cost: a
   * plain batch truncates its buffer; an `IndexedWriteBatch` also rebuilds its index (one
   * insert per operation left).
   * @throws InvalidArgumentError without a save point; StoreBusyError for an
   *   `IndexedWriteBatch` with a read in flight (nothing is removed)
   */
  rollbackToSavePoint(): this {
    this.#native.rollbackToSavePoint();
    return this;
  }

  /** Forgets the latest save point, keeping what was recorded since. @throws InvalidArgumentError without a save point */
  popSavePoint(): this {
    this.#native.popSavePoint();
    return this;
  }
}

/**
 * The fast form of a putPairs call whose key parts are strings (the usual link keys): each
 * array part joined by 0x00 into one string (one UTF-8 encoding in the native call, instead
 * of N-API reads per element, ~600 ns a put) and the values as distinct Uint8Arrays with an
 * index per put (link values repeat). Undefined when a part array holds a non-string or a
 * string with a 0x00 (it would split), a value is not a Uint8Array, lengths differ or no
 * part is an array: the general call handles those, and reports the errors.
 */
function joinedPairs(
  firsts: readonly Key[] | Key,
  seconds: readonly Key[] | Key,
  values: readonly Uint8Array[] | Uint8Array,
): [number, Key, boolean, Key, boolean, Uint8Array[], Uint32Array] | undefined {
  let n = -1;
  const part = (p: readonly Key[] | Key): [Key, boolean] | undefined => {
    if (!Array.isArray(p)) return [p as Key, false];
    if (n >= 0 && p.length !== n) return undefined;
    n = p.length;
    for (const k of p) if (typeof k !== 'string' || k.includes('\u0000')) return undefined;
    return [(p as string[]).join('\u0000'), true];
  };
  const a = part(firsts);
  const b = part(seconds);
  if (!a || !b) return undefined;
  let distinct: Uint8Array[];
  let index: Uint32Array;
  if (Array.isArray(values)) {
    if (n >= 0 && values.length !== n) return undefined;
    n = values.length;
    distinct = [];
    index = new Uint32Array(n);
    const seen = new Map<Uint8Array, number>();
    for (let i = 0; i < n; i++) {
      const v = values[i] as Uint8Array;
      if (!(v instanceof Uint8Array)) return undefined;
      let at = seen.get(v);
      if (at === undefined) {
        at = distinct.length;
        seen.set(v, at);
        distinct.push(v);
      }
      index[i] = at;
    }
  } else {
    if (n < 0) return undefined;
    distinct = [values as Uint8Array];
    index = new Uint32Array(n);
  }
  return [n, a[0], a[1], b[0], b[1], distinct, index];
}

/**
 * One group of {@link WriteBatch.mergePairRuns}: `runs.length` runs, run j merging
 * `operands` key j into `first 0x00 seconds_j` for the next `runs[j]` keys of `firsts`
 * (`sum(runs)` of them). Each column is packed (`PackedKeys`: bytes and end offsets,
 * optionally start offsets).
 */
export interface PairRuns {
  readonly firsts: PackedKeys;
  readonly seconds: PackedKeys;
  readonly operands: PackedKeys;
  readonly runs: Uint32Array;
}

/**
 * Options of {@link WriteBatch.putPairs} and {@link WriteBatch.mergePairs}.
 */
export interface PairsOptions {
  /**
   * Record the operations in the order of their keys' bytes (RocksDB's bytewise order), a
   * stable sort: operations on one key keep their given order, so the result is the same.
   * For column families with `memtableInsertHint`: a batch's inserts then each start from
   * the previous one's place in the memtable. Sorted natively (about ten times cheaper
   * than a JS comparator: the sort was 5% of a cnr-2000 load's main thread). Default false:
   * the given order.
   */
  readonly keyOrder?: boolean;
}

/**
 * The keys `first 0x00 second` and values of a pairs call that `joinedPairs` does not take,
 * in key order when `keyOrder` (stable). Checked before anything is recorded, so that the
 * call stays all or nothing.
 * @throws InvalidArgumentError for arrays that differ in length, no array at all, or a key
 *   part / value of the wrong type
 */
function builtPairs(firsts: readonly Key[] | Key, seconds: readonly Key[] | Key, values: readonly Uint8Array[] | Uint8Array, keyOrder: boolean): [Buffer[], Uint8Array[]] {
  const lengths = [firsts, seconds, values].filter((p) => Array.isArray(p)).map((p) => (p as readonly unknown[]).length);
  if (lengths.length === 0) throw new InvalidArgumentError('putPairs / mergePairs: one of firsts, seconds, values must be an array');
  const n = lengths[0]!;
  if (lengths.some((l) => l !== n)) throw new InvalidArgumentError('putPairs / mergePairs: arrays differ in length');
  const at = <T>(p: readonly T[] | T, i: number): T => (Array.isArray(p) ? (p as readonly T[])[i]! : (p as T));
  const part = (k: unknown): Buffer => {
    if (typeof k === 'string') return Buffer.from(k, 'utf8');
    if (k instanceof Uint8Array) return Buffer.from(k.buffer, k.byteOffset, k.byteLength);
    throw new InvalidArgumentError('putPairs / mergePairs: keys must be strings or Uint8Arrays');
  };
  const keys: Buffer[] = [];
  const operands: Uint8Array[] = [];
  for (let i = 0; i < n; i++) {
    const v = at(values, i);
    checkValue(v);
    keys.push(Buffer.concat([part(at(firsts, i)), SEPARATOR, part(at(seconds, i))]));
    operands.push(v);
  }
  if (!keyOrder) return [keys, operands];
  const order = keys.map((_, i) => i).sort((i, j) => Buffer.compare(keys[i]!, keys[j]!) || i - j);
  return [order.map((i) => keys[i]!), order.map((i) => operands[i]!)];
}

const SEPARATOR = Buffer.of(0);

function checkValue(v: Uint8Array): void {
  if (!(v instanceof Uint8Array)) throw new InvalidArgumentError('values and operands must be Uint8Arrays');
}

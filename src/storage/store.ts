import { InvalidArgumentError, StoreClosedError, UnknownMergeOperatorError } from '../errors.js';
import type { CompactionFilterSpec } from '../operators/compactionFilters.js';
import type { MergeOperatorSpec } from '../operators/mergeOperators.js';
import { IndexedWriteBatch } from './indexedBatch.js';
import { chunksOf, entriesOf, nativeChunks, rawChunksOf } from './internal/chunkedIteration.js';
import { WriteGroup } from './internal/writeGroup.js';
import type { Chunk, IterateOptions, RawChunk } from './iteration.js';
import { keyBytes, type Key } from './key.js';
import { nativeAddon, type NativeColumnFamily, type NativeSnapshot, type NativeStore } from './native.js';
import type { SharedResources } from './resources.js';
import { nativeSnapshotOf, Snapshot } from './snapshot.js';
import type { StoreStats } from './stats.js';
import { WriteBatch } from './writeBatch.js';
import { mkdirs } from './mkdirs.js';

export type { Key } from './key.js';

/** Per column family. */
export interface ColumnFamilyOptions {
  /** Native merge operator (src/operators/mergeOperators.ts); without one, `merge` fails. */
  mergeOperator?: MergeOperatorSpec;
  /** Native compaction filter (src/operators/compactionFilters.ts). */
  compactionFilter?: CompactionFilterSpec;
  /** Fixed-length key prefix (bytes) for prefix bloom filters; 0/undefined: none. */
  prefixLength?: number;
  /** Bloom filter bits per key for point reads; default 10, 0 disables. */
  bloomBitsPerKey?: number;
  /**
   * For a family written mostly in ascending key order (the metric's merges to `ranks`):
   * each memtable insert starts from the previous insert's place in the skip list
   * (RocksDB's `memtable_insert_with_hint_prefix_extractor` with one hint for every key),
   * so it costs O(log D) key comparisons, D the entries in between, instead of O(log N).
   * Unordered writes cost about as before. Such a family takes no range deletes: the
   * system RocksDB (7.8) shares the hint with range tombstones and corrupts its skip list,
   * so `WriteBatch.deleteRange` throws InvalidArgumentError for it. Default false.
   */
  memtableInsertHint?: boolean;
  /**
   * Largest memtable of this family in bytes (RocksDB's `write_buffer_size`), when smaller
   * than the budget's share (`memoryBudgetBytes` / 16, 1 to 32 MiB). For a family that
   * takes many merges of the same keys, as the metric's `ranks` (a [dx, dr] merge per page
   * a push changed, every round): each merge is one more skip-list entry until the memtable
   * is flushed, and an insert's search passes the keys' older entries, cache misses in a
   * large arena; a flush folds them into one value per key. Measured on a 60,000-page
   * subgraph of cnr-2000 (docs/ARCHITECTURE.md, "Where the converge's extra time goes").
   * A positive integer; default: the budget's share.
   */
  memtableBytes?: number;
}

export interface StoreOptions {
  /** Directory of the database (created, with parents, when createIfMissing). */
  path: string;
  /** Column families by name; missing ones are created. "default" always exists. */
  columnFamilies: Record<string, ColumnFamilyOptions>;
  /** Shared block cache + write-buffer manager; default: a private 32 MiB budget. */
  resources?: SharedResources;
  /** Default true. */
  createIfMissing?: boolean;
  /**
   * Seconds an obsolete write-ahead log stays in `<path>/archive` before it is deleted
   * (RocksDB's `WAL_ttl_seconds`: checked every half of it, by the log's last write); 0 (the
   * default) deletes it at once. A store checkpointed by WAL tail puts passes
   * `DEFAULT_CHECKPOINT_WAL_ARCHIVE_SECONDS`, so that a flush does not end the chain of puts
   * whose log it made obsolete (docs/checkpoints.md, "WAL tail puts").
   * @throws (open rejects) InvalidArgumentError for a negative number
   */
  walArchiveSeconds?: number;
  /**
   * Compress the write-ahead log with ZSTD (RocksDB's `wal_compression`: a streaming
   * compressor over the log's records, so later records are compressed against earlier ones).
   * For a store whose log is shipped: a WAL tail put stores the log's new bytes
   * (docs/checkpoints.md, "WAL tail puts"). A compressed log is read back by any open of the
   * store, with or without this option. Default false. Needs RocksDB 8.0 or later
   * (`walCompressionSupported()`): the log reader of earlier versions misreads a compressed
   * record that spans three or more 32 KiB blocks when two of its fragments sit at the same
   * offset of their blocks (facebook/rocksdb#11198, fixed in 8.0), and the store then cannot
   * be opened again ("Corruption: bad WriteBatch Put"; found in a restored checkpoint).
   */
  walCompression?: boolean;
  /**
   * Called synchronously before every write (`put`, `merge`, `delete`, `write` of a batch);
   * what it throws rejects that write and nothing of it is written. A fenced partition passes
   * its lease check (`PartitionFence.check`), so that no actor sharing the store commits
   * after the lease is lost, whatever its commit path. Reads, `flush`, compaction and
   * checkpoints are not guarded. Default: none.
   */
  writeGuard?: () => void;
}

export interface WriteOptions {
  /** fsync the WAL before resolving: survives a machine crash, not only a process crash. Default false. */
  sync?: boolean;
}

/** Options of `Store.checkpoint`. */
export interface StoreCheckpointOptions {
  /**
   * Bytes of live write-ahead log from which the memtables are flushed before the copy
   * (RocksDB's `log_size_for_flush`); below it the copy holds the WAL files instead. 0 (the
   * default): always flush; `Infinity`: never.
   */
  readonly walBytesForFlush?: number;
}

export interface ReadOptions {
  snapshot?: Snapshot;
}

/**
 * One RocksDB database with named column families: what a partition owns. Every
 * operation that touches the database runs on the libuv thread pool and returns a
 * Promise; merge operators and compaction filters are native and never call JS.
 *
 * Errors (src/errors.ts; match on `code`): StoreClosedError after close(),
 * StoreIOError, StoreCorruptionError, StoreBusyError (LOCK held by another handle),
 * UnknownMergeOperatorError and MergeOperatorMismatchError at open,
 * InvalidArgumentError for undeclared column families and bad arguments.
 *
 * @example
 * const store = await Store.open({ path, columnFamilies: { ranks: { mergeOperator: float64Add() } } });
 * await store.merge('ranks', url, encodeFloat64s(0, 0.15));
 * const rank = decodeFloat64s((await store.get('ranks', url))!);
 * await store.close();
 */
export class Store {
  readonly #native: NativeStore;
  readonly #cfIndex: Map<string, number>;
  readonly path: string;
  /** True when the store's write-ahead log is ZSTD-compressed (`StoreOptions.walCompression`). */
  readonly walCompression: boolean;
  #closed = false;
  readonly #group: WriteGroup;
  readonly #guard: (() => void) | undefined;
  /** Completed writes per column family index (`writesTo`). */
  readonly #writes: number[];

  private constructor(native: NativeStore, path: string, names: string[], guard: (() => void) | undefined, walCompression: boolean) {
    this.#native = native;
    this.#guard = guard;
    this.path = path;
    this.walCompression = walCompression;
    this.#cfIndex = new Map(names.map((n, i) => [n, i]));
    this.#writes = names.map(() => 0);
    this.#group = new WriteGroup(
      () => new (nativeAddon().WriteBatch)(native),
      (batch, sync) => native.write(batch, sync),
    );
  }

  /**
   * Opens (creating when allowed) the database and its column families.
   * @throws UnknownMergeOperatorError before touching the disk when a merge operator name is unknown
   * @throws MergeOperatorMismatchError when a column family was created with another operator
   * @throws StoreBusyError when another handle holds the database
   * @throws InvalidArgumentError before touching the disk for `walCompression` where the linked
   *   RocksDB cannot read compressed logs back (`walCompressionSupported()`)
   */
  static async open(options: StoreOptions): Promise<Store> {
    const addon = nativeAddon();
    if (options.walCompression === true && !walCompressionSupported()) {
      throw new InvalidArgumentError(`walCompression needs RocksDB 8.0 or later; this build links RocksDB ${addon.rocksdbVersion()}, whose log reader misreads a compressed record spanning three or more 32 KiB blocks (facebook/rocksdb#11198): the store could not be opened again`);
    }
    const columnFamilies = toNativeColumnFamilies(options, addon.isKnownMergeOperator);
    const createIfMissing = options.createIfMissing ?? true;
    if (createIfMissing) await mkdirs(options.path);
    const native = new addon.Store();
    const names = await native.open({
      path: options.path,
      createIfMissing,
      ...(options.walArchiveSeconds !== undefined ? { walArchiveSeconds: options.walArchiveSeconds } : {}),
      ...(options.walCompression !== undefined ? { walCompression: options.walCompression } : {}),
      ...(options.resources ? { resources: options.resources.native } : {}),
      columnFamilies,
    });
    return new Store(native, options.path, names, options.writeGuard, options.walCompression ?? false);
  }

  /**
   * How many writes to column family `cf` through this Store object have completed: a put,
   * merge or delete on it, or a written batch that recorded an operation on it (rolled-back
   * ones included). A reader that saw the value `n` before reading `cf`, and sees `n` again,
   * knows nothing was written to it since, e.g. to skip scanning a queue family that is
   * written by another actor of the same store (the crawl policy's `pending`). Starts at 0
   * when the store opens; writes by other processes or other Store objects are not counted.
   * @throws InvalidArgumentError for an undeclared column family
   */
  writesTo(cf: string): number {
    return this.#writes[this.#batchCf(cf)]!;
  }

  /** Declared column family names (including "default"). */
  get columnFamilies(): string[] {
    return [...this.#cfIndex.keys()];
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** The value, or undefined when the key is absent. */
  get(cf: string, key: Key, opts?: ReadOptions): Promise<Buffer | undefined> {
    const i = this.#cf(cf);
    if (i < 0) return this.#unknownCf(cf);
    let snapshot: NativeSnapshot | undefined;
    try {
      snapshot = nativeSnapshotOf(opts);
    } catch (err) {
      return Promise.reject(err);
    }
    return this.#native.get(i, key, snapshot);
  }

  /** Values in the order of `keys` (undefined where absent); one native call. */
  async multiGet(cf: string, keys: Key[], opts?: ReadOptions): Promise<(Buffer | undefined)[]> {
    const i = this.#cf(cf);
    if (i < 0) return this.#unknownCf(cf);
    const [data, lengths] = await this.#native.multiGet(i, keys, nativeSnapshotOf(opts));
    const out = new Array<Buffer | undefined>(lengths.length);
    let offset = 0;
    for (let k = 0; k < lengths.length; k++) {
      const n = lengths[k]!;
      if (n < 0) {
        out[k] = undefined;
      } else {
        out[k] = data.subarray(offset, offset + n);
        offset += n;
      }
    }
    return out;
  }

  /**
   * Single writes (`put`, `merge`, `delete`) are group-committed: those issued while an
   * earlier one is on the libuv pool go down together in one write batch when it ends
   * (src/storage/internal/writeGroup.ts). Each resolves once applied; order is kept.
   * @throws InvalidArgumentError (as a rejection) for an undeclared family or a value that
   *   is not a Uint8Array; StoreClosedError after close(); what the `writeGuard` throws.
   */
  put(cf: string, key: Key, value: Uint8Array, opts?: WriteOptions): Promise<void> {
    const i = this.#cf(cf);
    if (i < 0) return this.#unknownCf(cf);
    if (this.#closed) return Promise.reject(new StoreClosedError());
    if (!(value instanceof Uint8Array)) return Promise.reject(new InvalidArgumentError('values must be Uint8Arrays'));
    const refused = this.#refused();
    if (refused) return refused;
    const sync = opts?.sync === true;
    return this.#counted(i, this.#group.submit(() => this.#native.put(i, key, value, sync), (b) => b.put(i, key, value), sync));
  }

  /** Folds `operand` into the value with the column family's merge operator (no read); group-committed like {@link put}. */
  merge(cf: string, key: Key, operand: Uint8Array, opts?: WriteOptions): Promise<void> {
    const i = this.#cf(cf);
    if (i < 0) return this.#unknownCf(cf);
    if (this.#closed) return Promise.reject(new StoreClosedError());
    if (!(operand instanceof Uint8Array)) return Promise.reject(new InvalidArgumentError('operands must be Uint8Arrays'));
    const refused = this.#refused();
    if (refused) return refused;
    const sync = opts?.sync === true;
    return this.#counted(i, this.#group.submit(() => this.#native.merge(i, key, operand, sync), (b) => b.merge(i, key, operand), sync));
  }

  /** Group-committed like {@link put}. */
  delete(cf: string, key: Key, opts?: WriteOptions): Promise<void> {
    const i = this.#cf(cf);
    if (i < 0) return this.#unknownCf(cf);
    if (this.#closed) return Promise.reject(new StoreClosedError());
    const refused = this.#refused();
    if (refused) return refused;
    const sync = opts?.sync === true;
    return this.#counted(i, this.#group.submit(() => this.#native.delete(i, key, sync), (b) => b.delete(i, key), sync));
  }

  /** An empty batch for this store. @throws StoreClosedError */
  batch(): WriteBatch {
    this.#throwIfClosed();
    return new WriteBatch(new (nativeAddon().WriteBatch)(this.#native), this.#batchCf);
  }

  /**
   * An empty batch for this store that reads its own writes (`IndexedWriteBatch`: RocksDB's
   * WriteBatchWithIndex; `get` and `iterate` see it on top of the store). Recording costs
   * more than in a plain `batch()` (an index insert per operation: `npm run bench --
   * storage`, `indexedBatch`). @throws StoreClosedError
   */
  indexedBatch(): IndexedWriteBatch {
    this.#throwIfClosed();
    return new IndexedWriteBatch(new (nativeAddon().WriteBatch)(this.#native, true), this.#batchCf);
  }

  /** A batch's column family index. @throws InvalidArgumentError for an undeclared family */
  readonly #batchCf = (name: string): number => {
    const i = this.#cf(name);
    if (i < 0) throw new InvalidArgumentError(`unknown column family ${JSON.stringify(name)}`);
    return i;
  };

  /**
   * Applies the batch atomically across column families; takes its operations (no copy): the
   * batch is empty afterwards, reusable at once.
   * @throws (as a rejection) StoreBusyError for an `IndexedWriteBatch` with a read in flight
   *   (nothing is written); StoreClosedError, StoreIOError; what the `writeGuard` throws
   *   (nothing is written, the batch keeps its operations)
   */
  write(batch: WriteBatch, opts?: WriteOptions): Promise<void> {
    const refused = this.#refused();
    if (refused) return refused;
    const touched = batch.takeTouched();
    return this.#native.write(batch.native, opts?.sync === true).then(
      () => {
        for (const i of touched) this.#writes[i]!++;
      },
      (err: unknown) => {
        batch.takeTouched(touched);
        throw err;
      },
    );
  }

  /** `write` resolved: one more completed write to family `i` (`writesTo`). */
  #counted(i: number, write: Promise<void>): Promise<void> {
    return write.then(() => {
      this.#writes[i]!++;
    });
  }

  /**
   * Entries in key order (or reverse), one native call per `chunkSize` entries. Reads the
   * implicit snapshot taken at the first step unless `snapshot` is given. Breaking out of
   * the loop releases the native iterator.
   */
  iterate(cf: string, opts?: IterateOptions): AsyncGenerator<[Buffer, Buffer]> {
    return entriesOf(this.chunks(cf, opts));
  }

  /**
   * The fast path: one item per native call, its keys and values as Buffers viewing one
   * chunk buffer each (no per-entry copies). Same options as {@link iterate}.
   */
  chunks(cf: string, opts: IterateOptions = {}): AsyncGenerator<Chunk> {
    return chunksOf(this.#nativeChunks(cf, opts, opts.keysOnly === true));
  }

  /**
   * Like {@link chunks}, without a Buffer per entry: each item is the native call's key and
   * value buffers with their offsets ({@link RawChunk}). The buffers are valid until the
   * next item is requested. Same options as {@link iterate} except `keysOnly`.
   */
  rawChunks(cf: string, opts: Omit<IterateOptions, 'keysOnly'> = {}): AsyncGenerator<RawChunk> {
    return rawChunksOf(this.#nativeChunks(cf, opts, false));
  }

  #nativeChunks(cf: string, opts: IterateOptions, keysOnly: boolean) {
    const i = this.#cf(cf);
    return nativeChunks(i >= 0 ? i : this.#cfError(cf), (c, o) => this.#native.iterator(c, o), opts, keysOnly);
  }

  /** A point-in-time view for consistent reads across column families. @throws StoreClosedError */
  snapshot(): Snapshot {
    this.#throwIfClosed();
    return new Snapshot(this.#native.snapshot());
  }

  /** Flushes all memtables to SST files and waits. */
  flush(): Promise<void> {
    return this.#native.flush();
  }

  /** Compacts [start, end] of one column family (whole key space by default), bottommost level included. */
  compactRange(cf: string, start?: Key, end?: Key): Promise<void> {
    const i = this.#cf(cf);
    if (i < 0) return this.#unknownCf(cf);
    return this.#native.compactRange(i, start, end);
  }

  /**
   * A consistent copy of the whole store in `dir` (which must not exist; hard links where
   * the filesystem allows), openable with `Store.open({ path: dir, ... })`. It holds every
   * write completed before the call (every write is logged to the WAL).
   *
   * `options.walBytesForFlush` (bytes, default 0) is RocksDB's `log_size_for_flush`
   * (`Checkpoint::CreateCheckpoint`, rocksdb/utilities/checkpoint.h, 7.8): when the live
   * write-ahead log files total at least that many bytes, the memtables of every column family
   * are flushed first and the copy is SST files only; below it nothing is flushed and the copy
   * holds the live WAL files too (the last one copied up to its size at the call), which
   * `Store.open` replays. `Infinity`: never flush. The default 0 (always flush) gives a copy
   * with nothing to replay; a checkpoint store's put passes its own (`CheckpointPutOptions`).
   * @throws InvalidArgumentError (a negative or non-number `walBytesForFlush`, as a rejection)
   */
  checkpoint(dir: string, options: StoreCheckpointOptions = {}): Promise<void> {
    const w = options.walBytesForFlush;
    if (w !== undefined && (typeof w !== 'number' || Number.isNaN(w) || w < 0)) {
      return Promise.reject(new InvalidArgumentError(`checkpoint's walBytesForFlush must be a number >= 0 (Infinity: never flush), got ${String(w)}`));
    }
    return this.#native.checkpoint(dir, w);
  }

  /**
   * A RocksDB property such as "rocksdb.estimate-num-keys" or "rocksdb.stats", of one
   * column family ("default" when omitted). Undefined for an unknown property.
   * @throws StoreClosedError, InvalidArgumentError (unknown column family)
   */
  property(name: string, cf?: string): string | undefined {
    this.#throwIfClosed();
    let i: number | undefined;
    if (cf !== undefined) {
      i = this.#cf(cf);
      if (i < 0) throw new InvalidArgumentError(`unknown column family ${JSON.stringify(cf)}`);
    }
    return this.#native.property(name, i);
  }

  /** Sizes, memory, compaction/stall counters, merge faults and filter drops. @throws StoreClosedError */
  stats(): StoreStats {
    this.#throwIfClosed();
    return this.#native.stats() as unknown as StoreStats;
  }

  /**
   * Stops new work (it rejects with StoreClosedError), waits for in-flight work (writes
   * waiting for their group included), closes
   * iterators and snapshots, then the database. Safe to call twice (same promise result).
   */
  async close(): Promise<void> {
    this.#closed = true;
    await this.#group.drained();
    return this.#native.close();
  }

  /** The write guard's error as a rejection, or undefined when it lets the write go. */
  #refused(): Promise<never> | undefined {
    if (!this.#guard) return undefined;
    try {
      this.#guard();
      return undefined;
    } catch (err) {
      return Promise.reject(err);
    }
  }

  #cf(name: string): number {
    return this.#cfIndex.get(name) ?? -1;
  }

  #unknownCf(name: string): Promise<never> {
    return Promise.reject(this.#cfError(name));
  }

  #cfError(name: string): Error {
    return this.#closed ? new StoreClosedError() : new InvalidArgumentError(`unknown column family ${JSON.stringify(name)}`);
  }

  #throwIfClosed(): void {
    if (this.#closed) throw new StoreClosedError();
  }
}

function toNativeColumnFamilies(options: StoreOptions, isKnown: (name: string) => boolean): NativeColumnFamily[] {
  if (typeof options?.path !== 'string' || options.path.length === 0) {
    throw new InvalidArgumentError('path must be a non-empty string');
  }
  if (typeof options.columnFamilies !== 'object' || options.columnFamilies === null) {
    throw new InvalidArgumentError('columnFamilies must be an object');
  }
  return Object.entries(options.columnFamilies).map(([name, cf]) => {
    const out: NativeColumnFamily = { name };
    if (cf.mergeOperator !== undefined) {
      const op = cf.mergeOperator as MergeOperatorSpec & { fields?: Record<string, string>; defaultRule?: string };
      if (typeof op.name !== 'string' || !isKnown(op.name)) {
        throw new UnknownMergeOperatorError(`unknown merge operator ${JSON.stringify(op.name)} for column family ${name}`);
      }
      out.mergeOperator = {
        name: op.name,
        ...(op.fields ? { fields: op.fields } : {}),
        ...(op.defaultRule ? { defaultRule: op.defaultRule } : {}),
      };
    }
    if (cf.compactionFilter !== undefined) {
      const f = cf.compactionFilter;
      out.compactionFilter =
        f.kind === 'drop_prefixes' ? { kind: f.kind, prefixes: f.prefixes.map((p) => keyBytes(p)) } : { ...f };
    }
    if (cf.prefixLength !== undefined) {
      if (!Number.isInteger(cf.prefixLength) || cf.prefixLength < 0) {
        throw new InvalidArgumentError(`prefixLength of ${name} must be an integer >= 0`);
      }
      out.prefixLength = cf.prefixLength;
    }
    if (cf.bloomBitsPerKey !== undefined) {
      if (!(cf.bloomBitsPerKey >= 0)) throw new InvalidArgumentError(`bloomBitsPerKey of ${name} must be >= 0`);
      out.bloomBitsPerKey = cf.bloomBitsPerKey;
    }
    if (cf.memtableInsertHint !== undefined) {
      if (typeof cf.memtableInsertHint !== 'boolean') throw new InvalidArgumentError(`memtableInsertHint of ${name} must be a boolean`);
      out.memtableInsertHint = cf.memtableInsertHint;
    }
    if (cf.memtableBytes !== undefined) {
      if (!Number.isInteger(cf.memtableBytes) || cf.memtableBytes < 1) throw new InvalidArgumentError(`memtableBytes of ${name} must be a positive integer`);
      out.memtableBytes = cf.memtableBytes;
    }
    return out;
  });
}

/** The RocksDB version the native addon links, `major.minor.patch` (e.g. `7.8.3`, Debian's `librocksdb-dev`). */
export function rocksdbVersion(): string {
  return nativeAddon().rocksdbVersion();
}

/**
 * Whether `StoreOptions.walCompression` can be used: RocksDB 8.0 or later, whose log reader
 * reads every compressed record back (facebook/rocksdb#11198 fixed its streaming uncompression
 * of fragments at the same block offset).
 */
export function walCompressionSupported(): boolean {
  const major = Number(rocksdbVersion().split('.')[0]);
  return major >= 8;
}

import { InvalidArgumentError } from '../errors.js';
import { chunksOf, entriesOf, nativeChunks } from './internal/chunkedIteration.js';
import type { Chunk, IterateOptions } from './iteration.js';
import type { Key } from './key.js';
import type { NativeIndexedBatch } from './native.js';
import { nativeSnapshotOf, type Snapshot } from './snapshot.js';
import { WriteBatch } from './writeBatch.js';

/**
 * A write batch that reads its own writes: RocksDB's WriteBatchWithIndex (the batch of a
 * RocksDB transaction). It records like a `WriteBatch` and is written the same way
 * (`store.write(batch)`, atomic), and its reads see the store with the batch's operations
 * on top, so a read-then-write step sees what the steps before it wrote without committing
 * them (Kafka Streams' and Flink's keyed state are read-your-writes the same way):
 *
 * - `get`: RocksDB's `GetFromBatchAndDB`. The batch's last put or delete of the key wins;
 *   merges recorded after it, or over the store's value when the batch has no put or delete
 *   of the key, are resolved with the column family's merge operator.
 * - `iterate` / `chunks`: RocksDB's `NewIteratorWithBase` over a store iterator, merges
 *   resolved the same way (RocksDB 7.8 resolves them in the iterator too). An iterator
 *   sees the batch and the store as they were at its first step, like a store iterator:
 *   writing to the batch while iterating is allowed and exact (the iterator keeps a private
 *   copy of the batch entries it has yet to reach, made at the first change after it
 *   started); the writes show to reads made after them.
 *
 * Reads run on the libuv pool; the batch must not change while one is in flight: a record,
 * `clear`, `rollbackToSavePoint` or `store.write(batch)` then throws StoreBusyError (await
 * each read before writing). `deleteRange` throws InvalidArgumentError: RocksDB 7.8 does not
 * index range deletes (`WriteBatchWithIndex::DeleteRange` is NotSupported); delete the keys
 * one by one. Recording costs more than in a plain batch (an index insert per operation:
 * `npm run bench -- storage`, `indexedBatch`). Made by `store.indexedBatch()`.
 *
 * @example
 * const batch = store.indexedBatch().put('pages', url, page);
 * await batch.get('pages', url); // page, not yet in the store
 * await store.write(batch);
 */
export class IndexedWriteBatch extends WriteBatch {
  readonly #reads: NativeIndexedBatch;
  readonly #cfIndex: (name: string) => number;

  /** @internal Made by Store.indexedBatch(). */
  constructor(native: NativeIndexedBatch, columnFamilyIndex: (name: string) => number) {
    super(native, columnFamilyIndex);
    this.#reads = native;
    this.#cfIndex = columnFamilyIndex;
  }

  /**
   * The value of `key` with this batch on top of the store (or of `opts.snapshot`: the
   * snapshot picks what is read from the store; the batch is read as it is), undefined when
   * absent or deleted.
   * @throws (as a rejection) InvalidArgumentError for an undeclared column family or a bad
   *   key; StoreClosedError after the store closed or for a released snapshot
   */
  get(cf: string, key: Key, opts?: { snapshot?: Snapshot }): Promise<Buffer | undefined> {
    try {
      return this.#reads.get(this.#cfIndex(cf), key, nativeSnapshotOf(opts));
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /**
   * Entries of `cf` with this batch on top of the store, in key order (or reverse); the
   * options and chunking of `Store.iterate` (`snapshot` picks what is read from the store).
   * @throws InvalidArgumentError for an undeclared column family or bad options;
   *   StoreClosedError after the store closed
   */
  iterate(cf: string, opts?: IterateOptions): AsyncGenerator<[Buffer, Buffer]> {
    return entriesOf(this.chunks(cf, opts));
  }

  /** Like {@link iterate}, a chunk at a time (`Store.chunks`). */
  chunks(cf: string, opts: IterateOptions = {}): AsyncGenerator<Chunk> {
    let index: number | Error;
    try {
      index = this.#cfIndex(cf);
    } catch (err) {
      index = err as Error;
    }
    return chunksOf(nativeChunks(index, (c, o) => this.#reads.iterator(c, o), opts, opts.keysOnly === true));
  }

  /** @throws InvalidArgumentError always: RocksDB 7.8 does not index range deletes; delete the keys one by one. */
  override deleteRange(_cf: string, _start: Key, _end: Key): this {
    throw new InvalidArgumentError(
      "an indexed (read-your-writes) batch takes no range deletes (RocksDB 7.8's WriteBatchWithIndex does not index them): delete the keys one by one",
    );
  }
}

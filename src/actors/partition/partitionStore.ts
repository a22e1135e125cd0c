import { Store, type SharedResources } from '../../storage/index.js';
import { partitionColumnFamilies } from './schema.js';

/**
 * The RocksDB store of one partition, shared by the partition's actors (crawl policy,
 * indexer, backlinks, metrics). Reference-counted: the first `acquire` opens it, the last
 * `release` closes it, so restarting one actor keeps it open, and restarting the whole
 * partition (one-for-all) closes and reopens it. RocksDB allows one open instance of a
 * directory per process; this handle is that instance.
 */
export class PartitionStoreHandle {
  #store: Promise<Store> | undefined;
  #refs = 0;
  #closing: Promise<void> = Promise.resolve();

  /**
   * @param path directory of the store (created if missing)
   * @param resources block cache and write-buffer manager shared by all stores of the process
   * @param options.writeGuard run before every write of every actor through this handle
   *   (`StoreOptions.writeGuard`): a cluster partition passes its fence's `check`, so that
   *   none of its actors commits once the lease is lost, whatever its commit path
   * @param options.walArchiveSeconds `StoreOptions.walArchiveSeconds` (a store checkpointed by WAL tail puts)
   * @param options.walCompression `StoreOptions.walCompression` (the same)
   */
  constructor(readonly path: string, readonly resources?: SharedResources, readonly options: { readonly writeGuard?: () => void; readonly walArchiveSeconds?: number; readonly walCompression?: boolean } = {}) {}

  /** Opens the store if needed. @throws the store's open errors (corruption, I/O, unknown merge operator). */
  async acquire(): Promise<Store> {
    this.#refs++;
    await this.#closing;
    let opening = this.#store;
    if (!opening) {
      opening = Store.open({
        path: this.path,
        columnFamilies: partitionColumnFamilies(),
        ...(this.resources ? { resources: this.resources } : {}),
        ...(this.options.writeGuard ? { writeGuard: this.options.writeGuard } : {}),
        ...(this.options.walArchiveSeconds !== undefined ? { walArchiveSeconds: this.options.walArchiveSeconds } : {}),
        ...(this.options.walCompression !== undefined ? { walCompression: this.options.walCompression } : {}),
      });
      this.#store = opening;
      opening.catch(() => { if (this.#store === opening) this.#store = undefined; });
    }
    try {
      return await opening;
    } catch (err) {
      this.#refs--;
      throw err;
    }
  }

  /** Drops one reference; closes the store when it was the last. */
  async release(): Promise<void> {
    if (this.#refs <= 0) return;
    this.#refs--;
    if (this.#refs > 0 || !this.#store) return;
    const store = this.#store;
    this.#store = undefined;
    this.#closing = store.then((s) => s.close(), () => undefined);
    await this.#closing;
  }
}

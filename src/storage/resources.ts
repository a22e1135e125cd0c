import { InvalidArgumentError } from '../errors.js';
import { nativeAddon, type NativeResources } from './native.js';

/** Options of {@link SharedResources.create}. */
export interface SharedResourcesOptions {
  /**
   * Bytes for block cache + memtables of every store given these resources (>= 1 MiB).
   * Memtables are charged to the cache; the write-buffer manager flushes the largest
   * memtable once memtables reach half the budget.
   */
  memoryBudgetBytes: number;
}

/** Current use of a {@link SharedResources}, in bytes. */
export interface SharedResourcesUsage {
  budgetBytes: number;
  /** Charged to the block cache apart from fixedBytes: data/index/filter blocks and memtable reservations. */
  blockCacheBytes: number;
  /**
   * Fixed costs of the open stores (RocksDB bookkeeping outside cache and memtables,
   * about 768 KiB + 64 KiB per column family each), also charged to the cache, so the
   * budget covers them: blockCacheBytes + fixedBytes stays near budgetBytes.
   */
  fixedBytes: number;
  /** Memtable memory of all stores. */
  memtableBytes: number;
}

/**
 * One block cache and one write-buffer manager shared by all stores of a process that are
 * opened with it (`Store.open({ resources })`), so that 64 partitions fit one stated
 * memory budget. Immutable; safe to drop once the stores are open (they keep a reference).
 *
 * @example
 * const resources = SharedResources.create({ memoryBudgetBytes: 256 * 2 ** 20 });
 * const store = await Store.open({ path, columnFamilies: { ranks: {} }, resources });
 */
export class SharedResources {
  /** @internal The native handle; used by Store.open. */
  readonly native: NativeResources;

  private constructor(native: NativeResources) {
    this.native = native;
  }

  /** @throws InvalidArgumentError when the budget is not a number >= 1 MiB. */
  static create(options: SharedResourcesOptions): SharedResources {
    const budget = options?.memoryBudgetBytes;
    if (typeof budget !== 'number' || !Number.isFinite(budget) || budget < 2 ** 20) {
      throw new InvalidArgumentError(`memoryBudgetBytes must be a number >= 1 MiB, got ${String(budget)}`);
    }
    return new SharedResources(new (nativeAddon().Resources)(Math.floor(budget)));
  }

  usage(): SharedResourcesUsage {
    return this.native.usage();
  }
}

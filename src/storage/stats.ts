/**
 * `store.stats()`: a snapshot of counters and sizes. Byte counts are bytes, times are
 * microseconds, all numbers (counters since open unless noted).
 */
export interface ColumnFamilyStats {
  estimateNumKeys: number;
  /** All SST files, including obsolete ones not yet deleted. */
  totalSstBytes: number;
  liveSstBytes: number;
  /** Active + unflushed immutable memtables. */
  memtableBytes: number;
  level0Files: number;
  pendingCompactionBytes: number;
  /** Write stops / slowdowns caused by this column family. */
  writeStops: number;
  writeSlowdowns: number;
  /** Malformed operands or values met by the merge operator (kept the last good value). */
  mergeFaults: number;
  /** Values offered to / dropped by the compaction filter. */
  filterExamined: number;
  filterDropped: number;
  [name: string]: number;
}

export interface StoreStats {
  runningCompactions: number;
  runningFlushes: number;
  /** 1 while writes are stopped. */
  writeStopped: number;
  /** Bytes/s writes are delayed to, 0 when not delayed. */
  delayedWriteRate: number;
  backgroundErrors: number;
  estimateNumKeys: number;
  totalSstBytes: number;
  liveSstBytes: number;
  memtableBytes: number;
  memtableBytesWithPinned: number;
  pendingCompactionBytes: number;
  tableReadersBytes: number;
  /** Microseconds writers spent stalled. */
  stallMicros: number;
  compactReadBytes: number;
  compactWriteBytes: number;
  flushWriteBytes: number;
  /** Keys dropped by compaction filters (RocksDB's count). */
  compactionFilterDrops: number;
  /** Merges RocksDB saw fail (shardflow operators never fail; stays 0). */
  mergeFailures: number;
  keysWritten: number;
  /**
   * Write calls that reached RocksDB (each batch, group of single writes or lone write is
   * one), as RocksDB counts them: done by the calling thread, or by another thread's write
   * group. Their sum against `keysWritten` shows how much writes were grouped.
   */
  writesDoneBySelf: number;
  writesDoneByOther: number;
  keysRead: number;
  bytesWritten: number;
  walSyncs: number;
  blockCacheHits: number;
  blockCacheMisses: number;
  /** Sum over column families. */
  mergeFaults: number;
  filterDropped: number;
  /** Usage of the (possibly shared) resources this store charges. */
  sharedBlockCacheBytes: number;
  sharedMemtableBytes: number;
  /** Fixed per-store costs of all stores on these resources, charged to the shared cache (included in sharedBlockCacheBytes). */
  sharedFixedBytes: number;
  /**
   * This store's fixed cost charged to the budget at open: RocksDB bookkeeping outside the
   * cache and memtables, measured at about 768 KiB + 64 KiB per column family (hidden ones
   * included); see docs/storage.md.
   */
  fixedBytes: number;
  memoryBudgetBytes: number;
  columnFamilies: Record<string, ColumnFamilyStats>;
}

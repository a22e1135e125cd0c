// shardflow/store.h: one RocksDB instance with named column families.
//
// Meaning: a Store is what one partition owns: a RocksDB database, its column families
// (each with an optional native merge operator, compaction filter, fixed-length prefix
// extractor and bloom filter), and the shared memory Resources it charges. Keys compare
// bytewise. The binding (native/src/objects/store.cc) exposes it to JS; nothing here
// knows about N-API.
//
// Threading: every method except Close() may be called concurrently from any thread
// (RocksDB's DB is thread-safe). Close() must not overlap any other call on the same
// Store or on its iterators; the binding guarantees it by waiting for in-flight work.
// All methods are noexcept and report failures through Status.
//
// Lifetimes: Open() returns a shared_ptr. Snapshots, iterators and write batches hold a
// reference to the Store, so the Store object outlives them, but the database does not:
// Close() releases live snapshots and deletes live RocksDB iterators first, after which
// they report Status::Closed. Column-family references (ColumnFamilyRef) stay valid for
// the life of the Store object even after Close(), so write batches built against a store
// never dangle.
//
// Column family bookkeeping: a hidden column family "shardflow.meta" records the merge
// operator name of each column family at creation; opening it again with another name
// fails with Status::MergeOperatorMismatch before any user write.
#ifndef SHARDFLOW_STORE_H_
#define SHARDFLOW_STORE_H_

#include <cstdint>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include <rocksdb/cache.h>

#include "shardflow/compaction_filters.h"
#include "shardflow/merge_operators.h"
#include "shardflow/status.h"

namespace rocksdb {
class Cache;
class ColumnFamilyHandle;
class DB;
class Iterator;
class Snapshot;
class Statistics;
class WriteBatch;
class WriteBufferManager;
}  // namespace rocksdb

namespace shardflow {

class IndexedBatch;
class Iterator;
struct IteratorOptions;
class Snapshot;

// One block cache and one write-buffer manager shared by every store of a process that
// is given the same Resources. Memtables are charged to the cache, so the budget bounds
// block cache + memtables together. Thread-safe; immutable after Create().
class Resources {
 public:
  // memory_budget_bytes >= 1 MiB. Half of it may be memtables; the write-buffer manager
  // flushes the largest memtable when that half is full, and stalls writes at the whole.
  static Status Create(uint64_t memory_budget_bytes, std::shared_ptr<Resources>* out) noexcept;
  const std::shared_ptr<rocksdb::Cache>& cache() const noexcept { return cache_; }
  const std::shared_ptr<rocksdb::WriteBufferManager>& write_buffer_manager() const noexcept {
    return wbm_;
  }
  uint64_t budget() const noexcept { return budget_; }
  uint64_t CacheUsage() const noexcept;
  uint64_t MemtableUsage() const noexcept;
  // Memory an open store costs outside the block cache and memtables (RocksDB
  // bookkeeping: statistics, WAL / MANIFEST / LOG writer buffers, table cache,
  // per-column-family version, stats and memtable state), measured with
  // bench/storage.ts on Linux x64: about kStoreFixedBytes + kColumnFamilyFixedBytes per
  // column family (hidden ones included). Store::Open charges it to the shared cache as a
  // pinned entry (ReserveFixed) so the block cache shrinks by as much and the process stays
  // near the budget; Close releases it.
  static constexpr uint64_t kStoreFixedBytes = 768u << 10;
  static constexpr uint64_t kColumnFamilyFixedBytes = 64u << 10;
  // Pins `bytes` in the cache; returns the handle to give back to ReleaseFixed (null when
  // the insert failed, then nothing is charged).
  rocksdb::Cache::Handle* ReserveFixed(uint64_t bytes) noexcept;
  void ReleaseFixed(rocksdb::Cache::Handle* handle, uint64_t bytes) noexcept;
  // Bytes currently reserved by ReserveFixed (included in CacheUsage()).
  uint64_t FixedUsage() const noexcept { return fixed_.load(std::memory_order_relaxed); }

 private:
  std::shared_ptr<rocksdb::Cache> cache_;
  std::atomic<uint64_t> fixed_{0};
  std::atomic<uint64_t> next_reservation_{0};
  std::shared_ptr<rocksdb::WriteBufferManager> wbm_;
  uint64_t budget_ = 0;
};

struct ColumnFamilyConfig {
  std::string name;
  std::optional<MergeOperatorSpec> merge_operator;
  std::optional<CompactionFilterSpec> compaction_filter;
  uint32_t prefix_length = 0;       // 0: no prefix extractor
  double bloom_bits_per_key = 10;   // 0: no bloom filter
  bool memtable_insert_hint = false;  // one skip-list insert hint for all keys (no DeleteRange)
  uint64_t memtable_bytes = 0;        // 0: the budget's share (Resources::budget() / 16, 1 to 32 MiB)
};

struct StoreConfig {
  std::string path;
  bool create_if_missing = true;
  std::vector<ColumnFamilyConfig> column_families;  // "default" is added when missing
  std::shared_ptr<Resources> resources;              // null: a private 32 MiB budget
  // Seconds an obsolete write-ahead log is kept in <path>/archive before it is deleted
  // (RocksDB's WAL_ttl_seconds); 0: deleted at once. For WAL tail checkpoints.
  uint64_t wal_archive_seconds = 0;
  // ZSTD-compress the write-ahead log (RocksDB's `wal_compression`, streaming, per record).
  bool wal_compression = false;
};

// A stable reference to one column family: valid for the life of the Store object.
struct ColumnFamilyRef;

// Per-column-family counters and sizes (Store::Stats).
struct ColumnFamilyStats {
  std::string name;
  std::vector<std::pair<std::string, uint64_t>> values;
};

struct StoreStats {
  std::vector<std::pair<std::string, uint64_t>> values;  // db-wide
  std::vector<ColumnFamilyStats> column_families;
};

class Store {
 public:
  static Status Open(const StoreConfig& config, std::shared_ptr<Store>* out) noexcept;
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Index of a declared column family (the order of StoreConfig::column_families after
  // "default" was added), or -1.
  int ColumnFamilyIndex(std::string_view name) const noexcept;
  const std::vector<std::string>& ColumnFamilyNames() const noexcept { return names_; }
  const ColumnFamilyRef* Ref(int cf) const noexcept;

  Status Get(int cf, const Snapshot* snap, std::string_view key, std::string* value,
             bool* found) noexcept;
  // `key` as `batch` (made for this store) leaves it on top of the database (or of `snap`),
  // RocksDB's WriteBatchWithIndex::GetFromBatchAndDB: the batch's last put or delete of the
  // key wins, and merges recorded after it (or over the database's value when there is no
  // put or delete) are resolved with the family's merge operator. The caller keeps the
  // batch unchanged meanwhile (IndexedBatch::BeginRead).
  Status GetFromBatch(int cf, const Snapshot* snap, IndexedBatch* batch, std::string_view key,
                      std::string* value, bool* found) noexcept;
  // values/found are resized to keys.size().
  Status MultiGet(int cf, const Snapshot* snap, const std::vector<std::string>& keys,
                  std::vector<std::string>* values, std::vector<bool>* found) noexcept;
  Status Put(int cf, std::string_view key, std::string_view value, bool sync) noexcept;
  Status Merge(int cf, std::string_view key, std::string_view operand, bool sync) noexcept;
  Status Delete(int cf, std::string_view key, bool sync) noexcept;
  // Atomic across column families.
  Status Write(rocksdb::WriteBatch* batch, bool sync) noexcept;
  // Flushes the memtables of every column family and waits for it.
  Status Flush() noexcept;
  // Null bounds mean the start / end of the key space.
  Status CompactRange(int cf, const std::string* start, const std::string* end) noexcept;
  // A consistent point-in-time copy (hard links where possible) in `dir`, which must not
  // exist. Openable later with Open(). `wal_bytes_for_flush` is RocksDB's
  // `log_size_for_flush`: the memtables of every family are flushed first when the live WAL
  // files total at least that many bytes (0: always; UINT64_MAX: never); otherwise the copy
  // holds the live WAL files (the last one copied up to its size at the call), replayed by
  // Open().
  Status Checkpoint(const std::string& dir, uint64_t wal_bytes_for_flush) noexcept;

  // RocksDB property (e.g. "rocksdb.estimate-num-keys"); cf < 0 means "default".
  bool Property(const std::string& name, int cf, std::string* out) noexcept;
  StoreStats Stats() noexcept;

  Status NewSnapshot(std::shared_ptr<Snapshot>* out) noexcept;
  // With `batch` (made for this store; null for none): the batch's entries on top of the
  // database's, see shardflow/iterator.h. Owner thread of the batch.
  Status NewIterator(int cf, IteratorOptions options, std::shared_ptr<Snapshot> snap,
                     std::shared_ptr<IndexedBatch> batch, std::unique_ptr<Iterator>* out) noexcept;

  // Releases snapshots, deletes iterators, flushes nothing (the WAL is durable) and
  // closes the database. Idempotent.
  Status Close() noexcept;
  bool closed() const noexcept;

 private:
  friend class Iterator;
  friend class Snapshot;
  Store() = default;
  rocksdb::ColumnFamilyHandle* Handle(int cf) const noexcept;
  // Get, or GetFromBatch when `batch` is not null.
  Status GetImpl(int cf, const Snapshot* snap, IndexedBatch* batch, std::string_view key,
                 std::string* value, bool* found) noexcept;
  // Registry of live snapshots / iterators, guarded by mu_.
  void Unregister(Snapshot* s) noexcept;
  void Unregister(Iterator* it) noexcept;
  // mu_ held, store open: a snapshot registered like NewSnapshot's.
  std::shared_ptr<Snapshot> NewSnapshotLocked() noexcept;
  // mu_ held, store open: the RocksDB iterator of `it` (over its batch index, if any).
  rocksdb::Iterator* MakeRocksIterator(Iterator* it) noexcept;
  // Deletes the RocksDB iterator of `it` (Iterator::Detach) / makes it again (next chunk).
  void DropRocksIterator(Iterator* it) noexcept;
  Status RemakeRocksIterator(Iterator* it) noexcept;
  Status CheckOpen(int cf) const noexcept;
  // Throttles a writer while the shared memtables are over budget (store.cc).
  void AdmitWrite() noexcept;

  mutable std::mutex mu_;
  bool closed_ = false;
  rocksdb::DB* db_ = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;      // all opened, declared first
  std::vector<std::unique_ptr<ColumnFamilyRef>> refs_;     // declared only
  std::vector<std::string> names_;                         // declared only
  std::vector<std::shared_ptr<MergeFaults>> merge_faults_;
  std::vector<std::shared_ptr<FilterCounters>> filter_counters_;
  std::vector<std::unique_ptr<rocksdb::CompactionFilter>> filters_;
  std::shared_ptr<Resources> resources_;
  rocksdb::Cache::Handle* fixed_reservation_ = nullptr;  // Resources::ReserveFixed
  uint64_t fixed_bytes_ = 0;
  std::shared_ptr<rocksdb::Statistics> statistics_;
  std::unordered_set<Snapshot*> snapshots_;
  std::unordered_set<Iterator*> iterators_;
  std::weak_ptr<Store> self_;
};

// A point-in-time view shared by reads and iterators on any column family of one store.
// Released when the last reference drops or when the store closes, whichever is first.
// Thread-safe.
class Snapshot {
 public:
  ~Snapshot();
  const rocksdb::Snapshot* get() const noexcept { return snap_; }

 private:
  friend class Store;
  std::shared_ptr<Store> store_;
  const rocksdb::Snapshot* snap_ = nullptr;  // null once released (guarded by store mu_)
};

}  // namespace shardflow

#endif  // SHARDFLOW_STORE_H_

// shardflow::Store: opening with native operators, reads, writes, maintenance, close.
// See shardflow/store.h for the contracts.
#include "shardflow/store.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <thread>
#include <unordered_map>

#include <rocksdb/cache.h>
#include <rocksdb/compaction_filter.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/merge_operator.h>
#include <rocksdb/slice_transform.h>
#include <rocksdb/statistics.h>
#include <rocksdb/table.h>
#include <rocksdb/utilities/checkpoint.h>
#include <rocksdb/utilities/write_batch_with_index.h>
#include <rocksdb/write_buffer_manager.h>

#include "shardflow/indexed_batch.h"
#include "shardflow/iterator.h"
#include "shardflow/write_batch.h"

namespace shardflow {

namespace {

constexpr char kMetaFamily[] = "shardflow.meta";
constexpr char kMergeKeyPrefix[] = "merge_operator/";
constexpr char kNoOperator[] = "-";
constexpr uint64_t kPrivateBudget = 32ull << 20;

struct CfState {
  rocksdb::ColumnFamilyOptions options;
  std::shared_ptr<MergeFaults> faults = std::make_shared<MergeFaults>();
  std::shared_ptr<FilterCounters> counters = std::make_shared<FilterCounters>();
  std::unique_ptr<rocksdb::CompactionFilter> filter;
};

Status MakeColumnFamilyOptions(const ColumnFamilyConfig& cfg, const Resources& res, CfState* st) {
  rocksdb::ColumnFamilyOptions& o = st->options;
  if (cfg.merge_operator) {
    Status s = CreateMergeOperator(*cfg.merge_operator, st->faults, &o.merge_operator);
    if (!s.ok()) return s;
  }
  if (cfg.compaction_filter) {
    Status s = CreateCompactionFilter(*cfg.compaction_filter, st->counters, &st->filter);
    if (!s.ok()) return s;
    o.compaction_filter = st->filter.get();
  }
  if (cfg.prefix_length > 0) {
    o.prefix_extractor.reset(rocksdb::NewFixedPrefixTransform(cfg.prefix_length));
    o.memtable_prefix_bloom_size_ratio = 0.05;
  }
  rocksdb::BlockBasedTableOptions t;
  t.block_cache = res.cache();
  t.cache_index_and_filter_blocks = true;
  t.cache_index_and_filter_blocks_with_high_priority = true;
  t.pin_l0_filter_and_index_blocks_in_cache = true;
  t.format_version = 5;
  if (cfg.bloom_bits_per_key > 0) {
    t.filter_policy.reset(rocksdb::NewBloomFilterPolicy(cfg.bloom_bits_per_key));
  }
  o.table_factory.reset(rocksdb::NewBlockBasedTableFactory(t));
  // Many column families x many stores share one write-buffer manager: keep single
  // memtables small so that an idle family does not pin a large arena.
  o.write_buffer_size = std::clamp<uint64_t>(res.budget() / 16, 1ull << 20, 32ull << 20);
  // A family that asks for smaller memtables (ColumnFamilyOptions.memtableBytes): each
  // insert searches a shorter skip list (see the option's docstring).
  if (cfg.memtable_bytes > 0) o.write_buffer_size = std::min<uint64_t>(o.write_buffer_size, cfg.memtable_bytes);
  // Arena blocks are what a touched memtable costs at least: with 64 stores x 12 families,
  // 64 KiB blocks were 48 MiB of nearly empty memtables, enough to keep the write-buffer
  // manager flushing tiny memtables with small budgets.
  o.arena_block_size = std::min<size_t>(o.write_buffer_size / 8, 16u << 10);
  // One memtable being written, one being flushed; a third stops this store's writers
  // until its own flush ends (bounds memory per family; never waits on other stores).
  o.max_write_buffer_number = 2;
  o.level_compaction_dynamic_level_bytes = true;
  // No compression for L0, whose files are rewritten soonest (most of a flush's CPU), LZ4
  // below: faster than the default Snappy at a similar ratio (the RocksDB tuning guide's
  // advice). Not the base level too: with dynamic level bytes a small family lives wholly
  // in its base level (entry i > 0 applies to base level + i - 1), so it would never be
  // compressed. Snappy on every level was a tenth of the background threads' CPU in the
  // rank benchmark.
  o.compression_per_level = {rocksdb::kNoCompression, rocksdb::kLZ4Compression, rocksdb::kLZ4Compression,
                             rocksdb::kLZ4Compression, rocksdb::kLZ4Compression, rocksdb::kLZ4Compression,
                             rocksdb::kLZ4Compression};
  // For families written mostly in key order: one insert hint for every key (an empty
  // prefix), so a memtable insert starts from the previous insert's position in the skip
  // list instead of its top (O(log D) key comparisons, D the entries in between, instead
  // of O(log N)). RocksDB 7.8 uses the same hint for range tombstones, which corrupts the
  // skip list: WriteBatch DeleteRange refuses such families (ColumnFamilyRef; fixed upstream in 8.x,
  // "Hints are for point key table only").
  if (cfg.memtable_insert_hint) {
    o.memtable_insert_with_hint_prefix_extractor.reset(rocksdb::NewCappedPrefixTransform(0));
  }
  return Status::OK();
}

rocksdb::DBOptions MakeDbOptions(const StoreConfig& config, const Resources& res,
                                 const std::shared_ptr<rocksdb::Statistics>& stats) {
  rocksdb::DBOptions o;
  o.create_if_missing = config.create_if_missing;
  o.create_missing_column_families = true;
  o.max_background_jobs = 2;
  o.max_open_files = 256;
  o.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
  o.keep_log_file_num = 2;
  o.max_log_file_size = 1 << 20;
  o.stats_dump_period_sec = 0;
  o.stats_persist_period_sec = 0;
  // Families with few writes would keep old WAL files alive; bound the WAL.
  o.max_total_wal_size = 64ull << 20;
  // Obsolete logs moved to archive/ and deleted after this many seconds (checked every half
  // of it), instead of at once: a chain of WAL tail checkpoints reads a log a flush made
  // obsolete since its last put (src/checkpoint/fileThreads.ts, readLogTail).
  o.WAL_ttl_seconds = config.wal_archive_seconds;
  // Streaming ZSTD over the log's records (RocksDB 7.1+; only ZSTD is supported): a store
  // whose log is shipped to a checkpoint store (WAL tail puts) uploads a fifth to a sixth of
  // the bytes. A reader needs no option: a compressed log starts with a record that names its
  // compression, and RocksDB replays either kind.
  if (config.wal_compression) o.wal_compression = rocksdb::kZSTD;
  o.write_buffer_manager = res.write_buffer_manager();
  // Per-store fixed memory matters with 64 stores: the WAL/SST writer buffer defaults to
  // 1 MiB each (64 MiB for 64 stores, measured in bench/storage.ts).
  o.writable_file_max_buffer_size = 128u << 10;
  o.table_cache_numshardbits = 4;
  o.statistics = stats;
  return o;
}

// Bytes of a log that holds no write batch: a compressed log begins with a record naming its
// compression (a 7-byte record header and a 4-byte compression type); the smallest record of a
// write batch is a header and a 12-byte batch header, 19 bytes.
constexpr uintmax_t kEmptyLogBytes = 11;

// True when `path` has a write-ahead log file (*.log) that may hold a write batch.
bool WalHoldsData(const std::string& path) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(path, ec)) {
    std::error_code sec;
    if (entry.path().extension() == ".log" && entry.is_regular_file(sec) && entry.file_size(sec) > kEmptyLogBytes) return true;
  }
  return false;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Open

Status Store::Open(const StoreConfig& config, std::shared_ptr<Store>* out) noexcept {
  // 1. Validate everything that needs no disk: names, operators, filters.
  std::vector<ColumnFamilyConfig> declared = config.column_families;
  if (std::none_of(declared.begin(), declared.end(),
                   [](const ColumnFamilyConfig& c) { return c.name == "default"; })) {
    ColumnFamilyConfig d;
    d.name = "default";
    declared.insert(declared.begin(), std::move(d));
  }
  {
    std::unordered_map<std::string, int> seen;
    for (const ColumnFamilyConfig& c : declared) {
      if (c.name.empty()) return Status::InvalidArgument("column family name is empty");
      if (c.name.rfind("shardflow.", 0) == 0) {
        return Status::InvalidArgument("column family names starting with \"shardflow.\" are reserved: " + c.name);
      }
      if (seen[c.name]++ > 0) return Status::InvalidArgument("duplicate column family " + c.name);
      if (c.merge_operator && !IsKnownMergeOperator(c.merge_operator->name)) {
        return Status::UnknownMergeOperator("unknown merge operator \"" + c.merge_operator->name +
                                            "\" for column family " + c.name);
      }
    }
  }
  std::shared_ptr<Resources> res = config.resources;
  if (!res) {
    Status s = Resources::Create(kPrivateBudget, &res);
    if (!s.ok()) return s;
  }
  std::vector<CfState> states(declared.size());
  for (size_t i = 0; i < declared.size(); ++i) {
    Status s = MakeColumnFamilyOptions(declared[i], *res, &states[i]);
    if (!s.ok()) return s;
  }

  // 1b. RocksDB 7.8 replays a WAL's range tombstones through the insert hint of a family
  //     that has one (see MakeColumnFamilyOptions), corrupting its memtable; a WAL written
  //     before the family had hints may hold some. Recover such a WAL without hints first:
  //     the recovered memtables are flushed, and the reopen below has nothing to replay.
  bool hinted = std::any_of(declared.begin(), declared.end(),
                            [](const ColumnFamilyConfig& c) { return c.memtable_insert_hint; });
  if (hinted && WalHoldsData(config.path)) {
    StoreConfig plain = config;
    plain.resources = res;
    for (ColumnFamilyConfig& c : plain.column_families) c.memtable_insert_hint = false;
    std::shared_ptr<Store> recovered;
    Status s = Store::Open(plain, &recovered);
    if (!s.ok()) return s;
    s = recovered->Flush();
    Status c = recovered->Close();
    if (!s.ok()) return s;
    if (!c.ok()) return c;
  }

  // 2. Open with every existing family (RocksDB requires it) plus the declared ones.
  auto store = std::shared_ptr<Store>(new Store());
  store->self_ = store;
  store->resources_ = res;
  store->statistics_ = rocksdb::CreateDBStatistics();
  store->statistics_->set_stats_level(rocksdb::StatsLevel::kExceptTimeForMutex);
  rocksdb::DBOptions db_options = MakeDbOptions(config, *res, store->statistics_);

  std::vector<std::string> existing;
  rocksdb::Status ls = rocksdb::DB::ListColumnFamilies(db_options, config.path, &existing);
  if (!ls.ok()) existing.clear();  // a new database (Open reports real I/O errors)

  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (size_t i = 0; i < declared.size(); ++i) {
    descriptors.emplace_back(declared[i].name, states[i].options);
  }
  // The hidden and undeclared families hold a few keys: small memtables.
  rocksdb::ColumnFamilyOptions small;
  small.write_buffer_size = 1u << 20;
  small.arena_block_size = 16u << 10;
  descriptors.emplace_back(kMetaFamily, small);
  std::vector<std::string> undeclared;
  for (const std::string& name : existing) {
    bool known = name == kMetaFamily ||
                 std::any_of(declared.begin(), declared.end(),
                             [&](const ColumnFamilyConfig& c) { return c.name == name; });
    if (!known) {
      undeclared.push_back(name);
      descriptors.emplace_back(name, small);
    }
  }

  rocksdb::DB* db = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::Status os = rocksdb::DB::Open(db_options, config.path, descriptors, &handles, &db);
  if (!os.ok()) return Status::FromRocks(os);
  store->db_ = db;
  store->handles_ = handles;
  // This store's memory outside cache and memtables, charged to the shared budget.
  store->fixed_bytes_ = Resources::kStoreFixedBytes + Resources::kColumnFamilyFixedBytes * handles.size();
  store->fixed_reservation_ = res->ReserveFixed(store->fixed_bytes_);
  if (store->fixed_reservation_ == nullptr) store->fixed_bytes_ = 0;
  for (size_t i = 0; i < declared.size(); ++i) {
    store->names_.push_back(declared[i].name);
    store->refs_.push_back(std::make_unique<ColumnFamilyRef>(declared[i].name, handles[i]->GetID(), declared[i].memtable_insert_hint));
    store->merge_faults_.push_back(states[i].faults);
    store->filter_counters_.push_back(states[i].counters);
    store->filters_.push_back(std::move(states[i].filter));
  }

  // 3. The merge operator recorded for each family must match the declaration.
  rocksdb::ColumnFamilyHandle* meta = handles[declared.size()];
  rocksdb::WriteBatch record;
  auto fail = [&](Status s) {
    store->Close();
    return s;
  };
  for (size_t i = 0; i < declared.size() + undeclared.size(); ++i) {
    bool is_declared = i < declared.size();
    const std::string& name = is_declared ? declared[i].name : undeclared[i - declared.size()];
    std::string want = is_declared && declared[i].merge_operator ? declared[i].merge_operator->name
                                                                 : std::string(kNoOperator);
    std::string have;
    rocksdb::Status gs = db->Get(rocksdb::ReadOptions(), meta, kMergeKeyPrefix + name, &have);
    if (gs.IsNotFound()) {
      if (is_declared) record.Put(meta, kMergeKeyPrefix + name, want);
      continue;
    }
    if (!gs.ok()) return fail(Status::FromRocks(gs));
    if (!is_declared && have != kNoOperator) {
      return fail(Status::MergeOperatorMismatch("column family " + name +
                                                " exists with merge operator \"" + have +
                                                "\" but is not declared"));
    }
    if (is_declared && have != want) {
      return fail(Status::MergeOperatorMismatch(
          "column family " + name + " was created with merge operator \"" + have +
          "\", opened with \"" + want + "\""));
    }
  }
  if (record.Count() > 0) {
    rocksdb::WriteOptions wo;
    wo.sync = true;
    rocksdb::Status ws = db->Write(wo, &record);
    if (!ws.ok()) return fail(Status::FromRocks(ws));
  }
  *out = std::move(store);
  return Status::OK();
}

Store::~Store() { Close(); }

// ---------------------------------------------------------------------------------------
// Column families

int Store::ColumnFamilyIndex(std::string_view name) const noexcept {
  for (size_t i = 0; i < names_.size(); ++i) {
    if (names_[i] == name) return static_cast<int>(i);
  }
  return -1;
}

const ColumnFamilyRef* Store::Ref(int cf) const noexcept {
  if (cf < 0 || static_cast<size_t>(cf) >= refs_.size()) return nullptr;
  return refs_[cf].get();
}

rocksdb::ColumnFamilyHandle* Store::Handle(int cf) const noexcept { return handles_[cf]; }

bool Store::closed() const noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  return closed_;
}

Status Store::CheckOpen(int cf) const noexcept {
  // closed_ only flips in Close(), which never overlaps other calls (see store.h).
  if (closed_ || db_ == nullptr) return Status::Closed("store is closed");
  if (cf < 0 || static_cast<size_t>(cf) >= names_.size()) {
    return Status::InvalidArgument("no column family with index " + std::to_string(cf));
  }
  return Status::OK();
}

// ---------------------------------------------------------------------------------------
// Reads

namespace {
Status ReadOptionsFor(const Store* store, const Snapshot* snap, rocksdb::ReadOptions* ro) {
  if (snap != nullptr) {
    if (snap->get() == nullptr) return Status::Closed("snapshot is released");
    ro->snapshot = snap->get();
  }
  (void)store;
  return Status::OK();
}
}  // namespace

Status Store::Get(int cf, const Snapshot* snap, std::string_view key, std::string* value,
                  bool* found) noexcept {
  return GetImpl(cf, snap, nullptr, key, value, found);
}

Status Store::GetFromBatch(int cf, const Snapshot* snap, IndexedBatch* batch, std::string_view key,
                           std::string* value, bool* found) noexcept {
  return GetImpl(cf, snap, batch, key, value, found);
}

Status Store::GetImpl(int cf, const Snapshot* snap, IndexedBatch* batch, std::string_view key,
                      std::string* value, bool* found) noexcept {
  Status s = CheckOpen(cf);
  if (!s.ok()) return s;
  rocksdb::ReadOptions ro;
  s = ReadOptionsFor(this, snap, &ro);
  if (!s.ok()) return s;
  rocksdb::PinnableSlice pinned;
  const rocksdb::Slice k(key.data(), key.size());
  rocksdb::Status rs = batch ? batch->wbwi()->GetFromBatchAndDB(db_, ro, handles_[cf], k, &pinned)
                             : db_->Get(ro, handles_[cf], k, &pinned);
  if (rs.IsNotFound()) {
    *found = false;
    return Status::OK();
  }
  if (!rs.ok()) return Status::FromRocks(rs);
  *found = true;
  value->assign(pinned.data(), pinned.size());
  return Status::OK();
}

Status Store::MultiGet(int cf, const Snapshot* snap, const std::vector<std::string>& keys,
                       std::vector<std::string>* values, std::vector<bool>* found) noexcept {
  Status s = CheckOpen(cf);
  if (!s.ok()) return s;
  rocksdb::ReadOptions ro;
  s = ReadOptionsFor(this, snap, &ro);
  if (!s.ok()) return s;
  const size_t n = keys.size();
  std::vector<rocksdb::Slice> slices(keys.begin(), keys.end());
  std::vector<rocksdb::PinnableSlice> pinned(n);
  std::vector<rocksdb::Status> statuses(n);
  db_->MultiGet(ro, handles_[cf], n, slices.data(), pinned.data(), statuses.data());
  values->resize(n);
  found->assign(n, false);
  for (size_t i = 0; i < n; ++i) {
    if (statuses[i].IsNotFound()) continue;
    if (!statuses[i].ok()) return Status::FromRocks(statuses[i]);
    (*found)[i] = true;
    (*values)[i].assign(pinned[i].data(), pinned[i].size());
  }
  return Status::OK();
}

// ---------------------------------------------------------------------------------------
// Writes

namespace {
rocksdb::WriteOptions WriteOptionsFor(bool sync) {
  rocksdb::WriteOptions wo;
  wo.sync = sync;
  return wo;
}
rocksdb::Slice S(std::string_view v) { return rocksdb::Slice(v.data(), v.size()); }
}  // namespace

// Write admission under a shared budget. RocksDB's write-buffer manager flushes early but
// does not slow writers (its stall mode deadlocks with many stores, see resources.cc), so
// with many stores writing faster than the flush threads, immutable memtables piled up
// to 2-6x the budget in bench/storage.ts. Here a writer that finds memtables over half
// the budget first flushes its own store and waits for it (throttling it to flush speed
// and freeing memory); a store holding almost nothing waits briefly for others' flushes
// instead, bounded so that it never blocks for long. Runs on the pool thread of the write.
void Store::AdmitWrite() noexcept {
  const uint64_t limit = resources_->budget() / 2;
  if (resources_->MemtableUsage() <= limit) return;
  uint64_t mine = 0;
  db_->GetAggregatedIntProperty("rocksdb.cur-size-active-mem-table", &mine);
  if (mine >= (256u << 10)) {
    rocksdb::FlushOptions fo;
    fo.wait = true;
    fo.allow_write_stall = true;
    std::vector<rocksdb::ColumnFamilyHandle*> busy;
    for (rocksdb::ColumnFamilyHandle* h : handles_) {
      uint64_t size = 0;
      if (db_->GetIntProperty(h, "rocksdb.cur-size-active-mem-table", &size) && size >= (64u << 10)) busy.push_back(h);
    }
    if (!busy.empty()) {
      db_->Flush(fo, busy);  // a failure here surfaces on the write itself
      return;
    }
  }
  for (int i = 0; i < 50 && resources_->MemtableUsage() > limit; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

Status Store::Put(int cf, std::string_view key, std::string_view value, bool sync) noexcept {
  Status s = CheckOpen(cf);
  if (!s.ok()) return s;
  AdmitWrite();
  return Status::FromRocks(db_->Put(WriteOptionsFor(sync), handles_[cf], S(key), S(value)));
}

Status Store::Merge(int cf, std::string_view key, std::string_view operand, bool sync) noexcept {
  Status s = CheckOpen(cf);
  if (!s.ok()) return s;
  AdmitWrite();
  return Status::FromRocks(db_->Merge(WriteOptionsFor(sync), handles_[cf], S(key), S(operand)));
}

Status Store::Delete(int cf, std::string_view key, bool sync) noexcept {
  Status s = CheckOpen(cf);
  if (!s.ok()) return s;
  AdmitWrite();
  return Status::FromRocks(db_->Delete(WriteOptionsFor(sync), handles_[cf], S(key)));
}

Status Store::Write(rocksdb::WriteBatch* batch, bool sync) noexcept {
  Status s = CheckOpen(0);
  if (!s.ok()) return s;
  AdmitWrite();
  return Status::FromRocks(db_->Write(WriteOptionsFor(sync), batch));
}

// ---------------------------------------------------------------------------------------
// Maintenance

Status Store::Flush() noexcept {
  Status s = CheckOpen(0);
  if (!s.ok()) return s;
  rocksdb::FlushOptions fo;
  fo.wait = true;
  std::vector<rocksdb::ColumnFamilyHandle*> all(handles_.begin(), handles_.end());
  return Status::FromRocks(db_->Flush(fo, all));
}

Status Store::CompactRange(int cf, const std::string* start, const std::string* end) noexcept {
  Status s = CheckOpen(cf);
  if (!s.ok()) return s;
  rocksdb::CompactRangeOptions co;
  // Rewrite the bottommost level too, so compaction filters and merges reach every file.
  co.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForceOptimized;
  rocksdb::Slice a, b;
  if (start) a = rocksdb::Slice(*start);
  if (end) b = rocksdb::Slice(*end);
  return Status::FromRocks(db_->CompactRange(co, handles_[cf], start ? &a : nullptr, end ? &b : nullptr));
}

Status Store::Checkpoint(const std::string& dir, uint64_t wal_bytes_for_flush) noexcept {
  Status s = CheckOpen(0);
  if (!s.ok()) return s;
  rocksdb::Checkpoint* cp = nullptr;
  rocksdb::Status rs = rocksdb::Checkpoint::Create(db_, &cp);
  if (!rs.ok()) return Status::FromRocks(rs);
  std::unique_ptr<rocksdb::Checkpoint> owned(cp);
  // RocksDB 7.8 (DBImpl::GetLiveFilesStorageInfo): with the live WAL files under
  // log_size_for_flush, nothing is flushed; the SST files are hard-linked and every live WAL
  // file is included (all of them, whatever each family's log number), the last one copied
  // up to its size after FlushWAL. Every write is WAL-logged here (no disableWAL), so the
  // copy holds every write completed before the call.
  return Status::FromRocks(owned->CreateCheckpoint(dir, wal_bytes_for_flush));
}

bool Store::Property(const std::string& name, int cf, std::string* out) noexcept {
  if (!CheckOpen(cf < 0 ? 0 : cf).ok()) return false;
  return db_->GetProperty(handles_[cf < 0 ? 0 : cf], name, out);
}

StoreStats Store::Stats() noexcept {
  StoreStats out;
  if (!CheckOpen(0).ok()) return out;
  struct Prop {
    const char* rocks;
    const char* js;
  };
  static constexpr Prop kDbProps[] = {
      {"rocksdb.num-running-compactions", "runningCompactions"},
      {"rocksdb.num-running-flushes", "runningFlushes"},
      {"rocksdb.is-write-stopped", "writeStopped"},
      {"rocksdb.actual-delayed-write-rate", "delayedWriteRate"},
      {"rocksdb.background-errors", "backgroundErrors"},
  };
  static constexpr Prop kAggregated[] = {
      {"rocksdb.estimate-num-keys", "estimateNumKeys"},
      {"rocksdb.total-sst-files-size", "totalSstBytes"},
      {"rocksdb.live-sst-files-size", "liveSstBytes"},
      {"rocksdb.cur-size-all-mem-tables", "memtableBytes"},
      {"rocksdb.size-all-mem-tables", "memtableBytesWithPinned"},
      {"rocksdb.estimate-pending-compaction-bytes", "pendingCompactionBytes"},
      {"rocksdb.estimate-table-readers-mem", "tableReadersBytes"},
  };
  static constexpr Prop kCfProps[] = {
      {"rocksdb.estimate-num-keys", "estimateNumKeys"},
      {"rocksdb.total-sst-files-size", "totalSstBytes"},
      {"rocksdb.live-sst-files-size", "liveSstBytes"},
      {"rocksdb.cur-size-all-mem-tables", "memtableBytes"},
      {"rocksdb.num-files-at-level0", "level0Files"},
      {"rocksdb.estimate-pending-compaction-bytes", "pendingCompactionBytes"},
  };
  struct Tick {
    rocksdb::Tickers t;
    const char* js;
  };
  static constexpr Tick kTickers[] = {
      {rocksdb::STALL_MICROS, "stallMicros"},
      {rocksdb::COMPACT_READ_BYTES, "compactReadBytes"},
      {rocksdb::COMPACT_WRITE_BYTES, "compactWriteBytes"},
      {rocksdb::FLUSH_WRITE_BYTES, "flushWriteBytes"},
      {rocksdb::COMPACTION_KEY_DROP_USER, "compactionFilterDrops"},
      {rocksdb::NUMBER_MERGE_FAILURES, "mergeFailures"},
      {rocksdb::NUMBER_KEYS_WRITTEN, "keysWritten"},
      {rocksdb::WRITE_DONE_BY_SELF, "writesDoneBySelf"},
      {rocksdb::WRITE_DONE_BY_OTHER, "writesDoneByOther"},
      {rocksdb::NUMBER_KEYS_READ, "keysRead"},
      {rocksdb::BYTES_WRITTEN, "bytesWritten"},
      {rocksdb::WAL_FILE_SYNCED, "walSyncs"},
      {rocksdb::BLOCK_CACHE_HIT, "blockCacheHits"},
      {rocksdb::BLOCK_CACHE_MISS, "blockCacheMisses"},
  };
  uint64_t v = 0;
  for (const Prop& p : kDbProps) {
    if (db_->GetIntProperty(p.rocks, &v)) out.values.emplace_back(p.js, v);
  }
  for (const Prop& p : kAggregated) {
    if (db_->GetAggregatedIntProperty(p.rocks, &v)) out.values.emplace_back(p.js, v);
  }
  for (const Tick& t : kTickers) out.values.emplace_back(t.js, statistics_->getTickerCount(t.t));
  uint64_t faults = 0, dropped = 0;
  for (size_t i = 0; i < names_.size(); ++i) {
    ColumnFamilyStats cs;
    cs.name = names_[i];
    for (const Prop& p : kCfProps) {
      if (db_->GetIntProperty(handles_[i], p.rocks, &v)) cs.values.emplace_back(p.js, v);
    }
    std::map<std::string, std::string> cfstats;
    if (db_->GetMapProperty(handles_[i], "rocksdb.cfstats", &cfstats)) {
      for (const char* k : {"io_stalls.total_stop", "io_stalls.total_slowdown"}) {
        auto it = cfstats.find(k);
        if (it != cfstats.end()) {
          cs.values.emplace_back(std::string(k) == "io_stalls.total_stop" ? "writeStops" : "writeSlowdowns",
                                 static_cast<uint64_t>(std::strtod(it->second.c_str(), nullptr)));
        }
      }
    }
    cs.values.emplace_back("mergeFaults", merge_faults_[i]->Get());
    cs.values.emplace_back("filterExamined", filter_counters_[i]->examined.load());
    cs.values.emplace_back("filterDropped", filter_counters_[i]->dropped.load());
    faults += merge_faults_[i]->Get();
    dropped += filter_counters_[i]->dropped.load();
    out.column_families.push_back(std::move(cs));
  }
  out.values.emplace_back("mergeFaults", faults);
  out.values.emplace_back("filterDropped", dropped);
  out.values.emplace_back("sharedBlockCacheBytes", resources_->CacheUsage());
  out.values.emplace_back("sharedMemtableBytes", resources_->MemtableUsage());
  out.values.emplace_back("sharedFixedBytes", resources_->FixedUsage());
  out.values.emplace_back("fixedBytes", fixed_bytes_);
  out.values.emplace_back("memoryBudgetBytes", resources_->budget());
  return out;
}

// ---------------------------------------------------------------------------------------
// Snapshots and iterators

Status Store::NewSnapshot(std::shared_ptr<Snapshot>* out) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_ || db_ == nullptr) return Status::Closed("store is closed");
  *out = NewSnapshotLocked();
  return Status::OK();
}

std::shared_ptr<Snapshot> Store::NewSnapshotLocked() noexcept {
  auto snap = std::shared_ptr<Snapshot>(new Snapshot());
  snap->store_ = self_.lock();
  snap->snap_ = db_->GetSnapshot();
  snapshots_.insert(snap.get());
  return snap;
}

Snapshot::~Snapshot() {
  if (store_) store_->Unregister(this);
}

void Store::Unregister(Snapshot* s) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  if (snapshots_.erase(s) > 0 && s->snap_ != nullptr && db_ != nullptr) {
    db_->ReleaseSnapshot(s->snap_);
  }
  s->snap_ = nullptr;
}

Status Store::NewIterator(int cf, IteratorOptions options, std::shared_ptr<Snapshot> snap,
                          std::shared_ptr<IndexedBatch> batch, std::unique_ptr<Iterator>* out) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  Status s = CheckOpen(cf);
  if (!s.ok()) return s;
  if (snap && snap->store_.get() != this) {
    return Status::InvalidArgument("snapshot belongs to another store");
  }
  if (snap && snap->snap_ == nullptr) return Status::Closed("snapshot is released");
  std::unique_ptr<Iterator> it(new Iterator());
  it->store_ = self_.lock();
  // A batch iterator may make its RocksDB iterator again (Iterator::Detach): pin the
  // database's state of now for it.
  if (batch && !snap) snap = NewSnapshotLocked();
  it->snapshot_ = std::move(snap);
  it->options_ = std::move(options);
  it->cf_ = cf;
  rocksdb::ReadOptions& ro = *it->read_options_;
  ro.total_order_seek = true;  // bounds, not the prefix extractor, decide what is visited
  if (it->snapshot_) ro.snapshot = it->snapshot_->snap_;
  if (it->options_.lower) {
    it->lower_slice_ = std::make_unique<rocksdb::Slice>(*it->options_.lower);
    ro.iterate_lower_bound = it->lower_slice_.get();
  }
  if (it->options_.upper) {
    it->upper_slice_ = std::make_unique<rocksdb::Slice>(*it->options_.upper);
    ro.iterate_upper_bound = it->upper_slice_.get();
  }
  if (batch) {
    it->delta_ = batch->wbwi_;
    batch->iterators_.insert(it.get());
    it->batch_ = std::move(batch);
  }
  it->it_ = MakeRocksIterator(it.get());
  iterators_.insert(it.get());
  *out = std::move(it);
  return Status::OK();
}

rocksdb::Iterator* Store::MakeRocksIterator(Iterator* it) noexcept {
  rocksdb::Iterator* base = db_->NewIterator(*it->read_options_, handles_[it->cf_]);
  if (!it->delta_) return base;
  return it->delta_->NewIteratorWithBase(handles_[it->cf_], base, it->read_options_.get());
}

void Store::DropRocksIterator(Iterator* it) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  delete it->it_;
  it->it_ = nullptr;
}

Status Store::RemakeRocksIterator(Iterator* it) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_ || db_ == nullptr) return Status::Closed("store is closed");
  if (it->snapshot_ && it->snapshot_->snap_ == nullptr) return Status::Closed("snapshot is released");
  delete it->it_;
  it->it_ = MakeRocksIterator(it);
  it->rebuild_ = false;
  return Status::OK();
}

void Store::Unregister(Iterator* it) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  iterators_.erase(it);
  delete it->it_;
  it->it_ = nullptr;
}

// ---------------------------------------------------------------------------------------
// Close

Status Store::Close() noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return Status::OK();
  closed_ = true;
  if (db_ == nullptr) return Status::OK();
  for (Iterator* it : iterators_) {
    delete it->it_;
    it->it_ = nullptr;
  }
  iterators_.clear();
  for (Snapshot* s : snapshots_) {
    if (s->snap_ != nullptr) db_->ReleaseSnapshot(s->snap_);
    s->snap_ = nullptr;
  }
  snapshots_.clear();
  for (rocksdb::ColumnFamilyHandle* h : handles_) db_->DestroyColumnFamilyHandle(h);
  handles_.clear();
  rocksdb::Status cs = db_->Close();
  delete db_;
  db_ = nullptr;
  filters_.clear();  // the DB no longer references them
  resources_->ReleaseFixed(fixed_reservation_, fixed_bytes_);
  fixed_reservation_ = nullptr;
  fixed_bytes_ = 0;
  return Status::FromRocks(cs);
}

}  // namespace shardflow

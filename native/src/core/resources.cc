// Shared block cache + write-buffer manager (shardflow/store.h, class Resources).
#include <cstdlib>
#include <mutex>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <rocksdb/cache.h>
#include <rocksdb/env.h>
#include <rocksdb/write_buffer_manager.h>

#include "shardflow/store.h"

namespace shardflow {

namespace {
// glibc raises its mmap threshold each time a large mmapped block is freed (up to 32 MiB),
// after which large transient buffers (write batches of MiBs, their copies, flush and
// compaction buffers) come from the heap arenas and stay in RSS once freed: with 64 stores
// writing 500 KiB batches that was 60-90 MiB of peak RSS above the budget (bench/storage.ts:
// peak RSS / budget 1.34 -> 1.09 with the threshold fixed). A fixed 128 KiB threshold (the
// default) keeps large blocks in mmap, returned to the OS on free. Process-wide, once; a
// MALLOC_MMAP_THRESHOLD_ set in the environment wins.
void FixMmapThreshold() noexcept {
#if defined(__GLIBC__)
  static std::once_flag once;
  std::call_once(once, [] {
    if (std::getenv("MALLOC_MMAP_THRESHOLD_") == nullptr) mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  });
#endif
}
}  // namespace

Status Resources::Create(uint64_t memory_budget_bytes, std::shared_ptr<Resources>* out) noexcept {
  FixMmapThreshold();
  if (memory_budget_bytes < (1u << 20)) {
    return Status::InvalidArgument("memoryBudgetBytes must be at least 1 MiB");
  }
  auto r = std::shared_ptr<Resources>(new Resources());
  r->budget_ = memory_budget_bytes;
  rocksdb::LRUCacheOptions cache_options;
  cache_options.capacity = memory_budget_bytes;
  cache_options.num_shard_bits = 4;
  // Index and filter blocks live in the cache too (cache_index_and_filter_blocks); give
  // them priority so a scan does not evict them.
  cache_options.high_pri_pool_ratio = 0.2;
  r->cache_ = rocksdb::NewLRUCache(cache_options);
  // Memtables are charged to the cache, so cache + memtables share the budget. Once
  // memtables pass a quarter of it, every write flushes a memtable of its own store, so
  // flushing keeps pace with many writing stores; the headroom up to the whole budget
  // absorbs flushes that lag.
  // No stalls (allow_stall): with many stores, writers stalled on the global limit stop
  // asking for flushes while idle stores' memtables keep usage above it, a deadlock that
  // happened with 64 stores on a 128 MiB budget in bench/storage.ts. Each column family
  // still stops its own writers at max_write_buffer_number memtables (store.cc), which
  // only waits for that store's own flush.
  r->wbm_ = std::make_shared<rocksdb::WriteBufferManager>(memory_budget_bytes / 4, r->cache_,
                                                          /*allow_stall=*/false);
  // Flushes of all stores share the process-wide Env pool: give them both cores.
  rocksdb::Env::Default()->SetBackgroundThreads(2, rocksdb::Env::Priority::HIGH);
  *out = std::move(r);
  return Status::OK();
}

namespace {
char kFixedDummy = 0;
void NoDelete(const rocksdb::Slice&, void*) {}
}  // namespace

rocksdb::Cache::Handle* Resources::ReserveFixed(uint64_t bytes) noexcept {
  if (bytes == 0) return nullptr;
  std::string key = "shardflow.fixed/" + std::to_string(next_reservation_.fetch_add(1));
  rocksdb::Cache::Handle* handle = nullptr;
  rocksdb::Status s = cache_->Insert(key, &kFixedDummy, bytes, &NoDelete, &handle,
                                     rocksdb::Cache::Priority::HIGH);
  if (!s.ok()) return nullptr;
  fixed_.fetch_add(bytes, std::memory_order_relaxed);
  return handle;
}

void Resources::ReleaseFixed(rocksdb::Cache::Handle* handle, uint64_t bytes) noexcept {
  if (handle == nullptr) return;
  cache_->Release(handle, /*erase_if_last_ref=*/true);
  fixed_.fetch_sub(bytes, std::memory_order_relaxed);
}

uint64_t Resources::CacheUsage() const noexcept { return cache_->GetUsage(); }
uint64_t Resources::MemtableUsage() const noexcept { return wbm_->memory_usage(); }

}  // namespace shardflow

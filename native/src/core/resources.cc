// Shared block cache + write-buffer manager (shardflow/store.h, class Resources).
#include <rocksdb/cache.h>
#include <rocksdb/env.h>
#include <rocksdb/write_buffer_manager.h>

#include "shardflow/store.h"

namespace shardflow {

Status Resources::Create(uint64_t memory_budget_bytes, std::shared_ptr<Resources>* out) noexcept {
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

uint64_t Resources::CacheUsage() const noexcept { return cache_->GetUsage(); }
uint64_t Resources::MemtableUsage() const noexcept { return wbm_->memory_usage(); }

}  // namespace shardflow

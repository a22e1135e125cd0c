// Shared block cache + write-buffer manager (shardflow/store.h, class Resources).
#include <rocksdb/cache.h>
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
  // Memtables may use half the budget before the manager flushes the largest one; their
  // memory is charged to the cache, so cache + memtables stay within the budget.
  // No write stalls from the manager: with many stores a stall in one waits on flushes
  // of others; flushing the largest memtable early keeps usage bounded instead.
  r->wbm_ = std::make_shared<rocksdb::WriteBufferManager>(memory_budget_bytes / 2, r->cache_,
                                                          /*allow_stall=*/false);
  *out = std::move(r);
  return Status::OK();
}

uint64_t Resources::CacheUsage() const noexcept { return cache_->GetUsage(); }
uint64_t Resources::MemtableUsage() const noexcept { return wbm_->memory_usage(); }

}  // namespace shardflow

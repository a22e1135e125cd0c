// Internal: one factory per filter file (native/src/filters/<filter>.cc); registry.cc maps
// kinds onto them. See shardflow/compaction_filters.h.
#ifndef SHARDFLOW_FILTERS_INTERNAL_H_
#define SHARDFLOW_FILTERS_INTERNAL_H_

#include <memory>

#include <rocksdb/compaction_filter.h>

#include "shardflow/compaction_filters.h"

namespace shardflow::filters {

std::unique_ptr<rocksdb::CompactionFilter> NewDropPrefixes(const CompactionFilterSpec& spec,
                                                           std::shared_ptr<FilterCounters> c);
std::unique_ptr<rocksdb::CompactionFilter> NewTombstones(const CompactionFilterSpec& spec,
                                                         std::shared_ptr<FilterCounters> c);
std::unique_ptr<rocksdb::CompactionFilter> NewTtl(const CompactionFilterSpec& spec,
                                                  std::shared_ptr<FilterCounters> c);

// Wall clock in ms since the epoch.
int64_t NowMillis() noexcept;

}  // namespace shardflow::filters

#endif  // SHARDFLOW_FILTERS_INTERNAL_H_

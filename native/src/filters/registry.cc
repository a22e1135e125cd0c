// Compaction filter kinds -> factories, with parameter checks.
#include <chrono>

#include "filters/filters.h"

namespace shardflow {

namespace filters {
int64_t NowMillis() noexcept {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}
}  // namespace filters

Status CreateCompactionFilter(const CompactionFilterSpec& spec,
                              std::shared_ptr<FilterCounters> counters,
                              std::unique_ptr<rocksdb::CompactionFilter>* out) noexcept {
  if (spec.kind == "drop_prefixes") {
    if (spec.prefixes.empty()) return Status::InvalidArgument("dropPrefixes needs at least one prefix");
    *out = filters::NewDropPrefixes(spec, std::move(counters));
    return Status::OK();
  }
  if (spec.kind == "tombstones") {
    if (spec.grace_ms < 0) return Status::InvalidArgument("tombstone graceMs must be >= 0");
    *out = filters::NewTombstones(spec, std::move(counters));
    return Status::OK();
  }
  if (spec.kind == "ttl") {
    if (spec.ttl_ms <= 0) return Status::InvalidArgument("ttlMs must be > 0");
    if (spec.field.empty()) return Status::InvalidArgument("ttl needs a timestamp field");
    *out = filters::NewTtl(spec, std::move(counters));
    return Status::OK();
  }
  return Status::InvalidArgument("unknown compaction filter \"" + spec.kind + "\"");
}

}  // namespace shardflow

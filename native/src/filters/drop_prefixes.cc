// drop_prefixes: drops every value whose key starts with one of the configured prefixes
// (e.g. the keys of a removed host). Merge operands are kept (compaction_filters.h).
#include <string>
#include <vector>

#include "filters/filters.h"

namespace shardflow::filters {
namespace {

class DropPrefixes final : public rocksdb::CompactionFilter {
 public:
  DropPrefixes(std::vector<std::string> prefixes, std::shared_ptr<FilterCounters> c)
      : prefixes_(std::move(prefixes)), counters_(std::move(c)) {}

  const char* Name() const override { return "shardflow.drop_prefixes.v1"; }

  bool Filter(int /*level*/, const rocksdb::Slice& key, const rocksdb::Slice& /*value*/,
              std::string* /*new_value*/, bool* /*value_changed*/) const noexcept override {
    counters_->examined.fetch_add(1, std::memory_order_relaxed);
    for (const std::string& p : prefixes_) {
      if (key.starts_with(p)) {
        counters_->dropped.fetch_add(1, std::memory_order_relaxed);
        return true;
      }
    }
    return false;
  }

 private:
  std::vector<std::string> prefixes_;
  std::shared_ptr<FilterCounters> counters_;
};

}  // namespace

std::unique_ptr<rocksdb::CompactionFilter> NewDropPrefixes(const CompactionFilterSpec& spec,
                                                           std::shared_ptr<FilterCounters> c) {
  return std::make_unique<DropPrefixes>(spec.prefixes, std::move(c));
}

}  // namespace shardflow::filters

// tombstones: drops lww-format tombstones (an 8-byte LE int64 timestamp in ms and an empty
// payload, see shardflow.lww.v1) whose timestamp is older than now - grace_ms. The grace
// period lets late writes with older timestamps still lose against the tombstone.
#include "filters/filters.h"
#include "util/little_endian.h"

namespace shardflow::filters {
namespace {

class Tombstones final : public rocksdb::CompactionFilter {
 public:
  Tombstones(int64_t grace_ms, std::shared_ptr<FilterCounters> c)
      : grace_ms_(grace_ms), counters_(std::move(c)) {}

  const char* Name() const override { return "shardflow.tombstones.v1"; }

  bool Filter(int /*level*/, const rocksdb::Slice& /*key*/, const rocksdb::Slice& value,
              std::string* /*new_value*/, bool* /*value_changed*/) const noexcept override {
    counters_->examined.fetch_add(1, std::memory_order_relaxed);
    if (value.size() != 8) return false;  // not a tombstone (or not lww format): keep
    int64_t ts = util::LoadI64LE(value.data());
    if (ts >= NowMillis() - grace_ms_) return false;
    counters_->dropped.fetch_add(1, std::memory_order_relaxed);
    return true;
  }

 private:
  int64_t grace_ms_;
  std::shared_ptr<FilterCounters> counters_;
};

}  // namespace

std::unique_ptr<rocksdb::CompactionFilter> NewTombstones(const CompactionFilterSpec& spec,
                                                         std::shared_ptr<FilterCounters> c) {
  return std::make_unique<Tombstones>(spec.grace_ms, std::move(c));
}

}  // namespace shardflow::filters

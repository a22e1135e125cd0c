// ttl: drops msgpack records whose timestamp field is older than now - ttl_ms. The field
// holds ms since the epoch as an int or float, or a msgpack timestamp (ext type -1, what
// msgpackr writes for a Date). Values that are not maps, lack the field, or do not parse
// are kept: a filter never drops on doubt.
#include "filters/filters.h"
#include "util/msgpack.h"

namespace shardflow::filters {
namespace {

using util::msgpack::Value;

// Milliseconds of a msgpack timestamp extension (32, 64 or 96-bit form).
bool TimestampMillis(const Value& v, double* ms) {
  if (v.IsNumber()) {
    *ms = v.AsDouble();
    return true;
  }
  if (v.type != Value::Type::kExt || v.ext_type != -1) return false;
  auto be = [&](size_t off, size_t n) {
    uint64_t x = 0;
    for (size_t k = 0; k < n; ++k) x = (x << 8) | static_cast<uint8_t>(v.s[off + k]);
    return x;
  };
  if (v.s.size() == 4) {
    *ms = static_cast<double>(be(0, 4)) * 1000.0;
  } else if (v.s.size() == 8) {
    uint64_t x = be(0, 8);
    *ms = static_cast<double>(x & 0x3ffffffffULL) * 1000.0 + static_cast<double>(x >> 34) / 1e6;
  } else if (v.s.size() == 12) {
    *ms = static_cast<double>(static_cast<int64_t>(be(4, 8))) * 1000.0 +
          static_cast<double>(be(0, 4)) / 1e6;
  } else {
    return false;
  }
  return true;
}

class Ttl final : public rocksdb::CompactionFilter {
 public:
  Ttl(std::string field, int64_t ttl_ms, std::shared_ptr<FilterCounters> c)
      : field_(std::move(field)), ttl_ms_(ttl_ms), counters_(std::move(c)) {}

  const char* Name() const override { return "shardflow.ttl.v1"; }

  bool Filter(int /*level*/, const rocksdb::Slice& /*key*/, const rocksdb::Slice& value,
              std::string* /*new_value*/, bool* /*value_changed*/) const noexcept override {
    counters_->examined.fetch_add(1, std::memory_order_relaxed);
    Value record;
    if (!util::msgpack::Parse(std::string_view(value.data(), value.size()), &record)) return false;
    if (record.type != Value::Type::kMap) return false;
    const Value* ts = record.Find(field_);
    double ms = 0;
    if (ts == nullptr || !TimestampMillis(*ts, &ms)) return false;
    if (ms >= static_cast<double>(NowMillis() - ttl_ms_)) return false;
    counters_->dropped.fetch_add(1, std::memory_order_relaxed);
    return true;
  }

 private:
  std::string field_;
  int64_t ttl_ms_;
  std::shared_ptr<FilterCounters> counters_;
};

}  // namespace

std::unique_ptr<rocksdb::CompactionFilter> NewTtl(const CompactionFilterSpec& spec,
                                                  std::shared_ptr<FilterCounters> c) {
  return std::make_unique<Ttl>(spec.field, spec.ttl_ms, std::move(c));
}

}  // namespace shardflow::filters

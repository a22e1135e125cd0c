// shardflow.float64_max.v1 / shardflow.float64_min.v1: value and operands are one 8-byte
// little-endian float64; the result is the largest / smallest (std::fmax / std::fmin, so a
// NaN loses against any number). Identity: a missing value. Associative and commutative,
// so PartialMerge == Merge.
// Malformed operand (size != 8): skipped, counted; a malformed existing value counts one
// fault and is treated as missing.
#include <cmath>

#include "merge/operators.h"
#include "util/little_endian.h"

namespace shardflow::merge {
namespace {

template <bool kMax>
class Float64Extremum final : public rocksdb::AssociativeMergeOperator {
 public:
  explicit Float64Extremum(std::shared_ptr<MergeFaults> faults) : faults_(std::move(faults)) {}

  const char* Name() const override {
    return kMax ? "shardflow.float64_max.v1" : "shardflow.float64_min.v1";
  }

  // IN existing: value or left operand so far (may be null); IN value: next operand;
  // OUT new_value: the extremum. Always returns true.
  bool Merge(const rocksdb::Slice& /*key*/, const rocksdb::Slice* existing,
             const rocksdb::Slice& value, std::string* new_value,
             rocksdb::Logger* /*logger*/) const noexcept override {
    bool have_base = existing != nullptr && existing->size() == 8;
    if (existing != nullptr && !have_base) faults_->Add();
    if (value.size() != 8) {
      faults_->Add();
      if (have_base) {
        new_value->assign(existing->data(), 8);
      } else {
        // Nothing good so far: NaN, which any later number replaces (fmax/fmin).
        new_value->resize(8);
        util::StoreF64LE(new_value->data(), std::nan(""));
      }
      return true;
    }
    double v = util::LoadF64LE(value.data());
    if (have_base) {
      double b = util::LoadF64LE(existing->data());
      v = kMax ? std::fmax(b, v) : std::fmin(b, v);
    }
    new_value->resize(8);
    util::StoreF64LE(new_value->data(), v);
    return true;
  }

 private:
  std::shared_ptr<MergeFaults> faults_;
};

}  // namespace

std::shared_ptr<rocksdb::MergeOperator> NewFloat64Max(std::shared_ptr<MergeFaults> faults) {
  return std::make_shared<Float64Extremum<true>>(std::move(faults));
}

std::shared_ptr<rocksdb::MergeOperator> NewFloat64Min(std::shared_ptr<MergeFaults> faults) {
  return std::make_shared<Float64Extremum<false>>(std::move(faults));
}

}  // namespace shardflow::merge

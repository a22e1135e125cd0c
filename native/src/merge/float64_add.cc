// shardflow.float64_add.v1: value and operands are N >= 1 little-endian float64; operands
// add element-wise. An operand shorter than the value adds to its first elements; the
// result is as long as the longest input. Used for ranks: value [x, r], a push writes
// [r, -r], a contribution writes [0, c] (or just [c] to add to the first element).
// Identity: a missing value (the empty vector). Associative up to float rounding,
// commutative, so PartialMerge == Merge.
// Malformed operand (empty or size % 8 != 0): skipped, counted; a malformed existing
// value counts one fault and is treated as missing.
#include <algorithm>

#include "merge/operators.h"
#include "util/little_endian.h"

namespace shardflow::merge {
namespace {

bool WellFormed(const rocksdb::Slice& s) noexcept { return s.size() >= 8 && s.size() % 8 == 0; }

class Float64Add final : public rocksdb::AssociativeMergeOperator {
 public:
  explicit Float64Add(std::shared_ptr<MergeFaults> faults) : faults_(std::move(faults)) {}

  const char* Name() const override { return "shardflow.float64_add.v1"; }

  // IN existing: value or left operand so far (may be null); IN value: next operand;
  // OUT new_value: element-wise sum. Always returns true.
  bool Merge(const rocksdb::Slice& /*key*/, const rocksdb::Slice* existing,
             const rocksdb::Slice& value, std::string* new_value,
             rocksdb::Logger* /*logger*/) const noexcept override {
    const rocksdb::Slice* base = existing;
    if (base != nullptr && !WellFormed(*base)) {
      faults_->Add();
      base = nullptr;
    }
    if (!WellFormed(value)) {
      faults_->Add();
      if (base != nullptr) {
        new_value->assign(base->data(), base->size());
      } else {
        new_value->assign(8, '\0');  // nothing good so far: [0]
        util::StoreF64LE(new_value->data(), 0.0);
      }
      return true;
    }
    if (base == nullptr) {
      new_value->assign(value.data(), value.size());
      return true;
    }
    const rocksdb::Slice& longer = base->size() >= value.size() ? *base : value;
    const rocksdb::Slice& shorter = base->size() >= value.size() ? value : *base;
    new_value->assign(longer.data(), longer.size());
    char* out = new_value->data();
    for (size_t off = 0; off < shorter.size(); off += 8) {
      util::StoreF64LE(out + off, util::LoadF64LE(out + off) + util::LoadF64LE(shorter.data() + off));
    }
    return true;
  }

 private:
  std::shared_ptr<MergeFaults> faults_;
};

}  // namespace

std::shared_ptr<rocksdb::MergeOperator> NewFloat64Add(std::shared_ptr<MergeFaults> faults) {
  return std::make_shared<Float64Add>(std::move(faults));
}

}  // namespace shardflow::merge

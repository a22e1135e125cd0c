// shardflow.int64_add.v1: value and operands are 8-byte little-endian int64; operands add
// (two's-complement wrap-around on overflow, like int64 arithmetic in RocksDB's uint64add).
// Identity: a missing value (0). Associative and commutative, so PartialMerge == Merge.
// Malformed operand (size != 8): skipped, counted; a malformed existing value counts one
// fault and is treated as missing.
#include "merge/operators.h"
#include "util/little_endian.h"

namespace shardflow::merge {
namespace {

class Int64Add final : public rocksdb::AssociativeMergeOperator {
 public:
  explicit Int64Add(std::shared_ptr<MergeFaults> faults) : faults_(std::move(faults)) {}

  const char* Name() const override { return "shardflow.int64_add.v1"; }

  // IN existing: the value or left operand so far (may be null); IN value: the next
  // operand; OUT new_value: the sum. Always returns true (never fails the merge).
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
        new_value->assign(8, '\0');  // nothing good so far: the identity
      }
      return true;
    }
    uint64_t sum = util::LoadU64LE(value.data());
    if (have_base) sum += util::LoadU64LE(existing->data());
    new_value->resize(8);
    util::StoreU64LE(new_value->data(), sum);
    return true;
  }

 private:
  std::shared_ptr<MergeFaults> faults_;
};

}  // namespace

std::shared_ptr<rocksdb::MergeOperator> NewInt64Add(std::shared_ptr<MergeFaults> faults) {
  return std::make_shared<Int64Add>(std::move(faults));
}

}  // namespace shardflow::merge

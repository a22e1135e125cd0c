// shardflow.lww.v1 (last write wins by timestamp): value and operands are an 8-byte
// little-endian int64 timestamp (ms) followed by the payload. The entry with the larger
// timestamp wins; on a tie the later operand wins (write order). An empty payload is a
// tombstone (a deletion that still carries its time; see the `tombstones` compaction
// filter). Identity: a missing value. Associative (it is a max over (timestamp, write
// position), and partial merges keep write order), so PartialMerge == Merge.
// Malformed operand (shorter than 8 bytes): skipped, counted; a malformed existing value
// counts one fault and is treated as missing.
#include "merge/operators.h"
#include "util/little_endian.h"

namespace shardflow::merge {
namespace {

class LastWriteWins final : public rocksdb::AssociativeMergeOperator {
 public:
  explicit LastWriteWins(std::shared_ptr<MergeFaults> faults) : faults_(std::move(faults)) {}

  const char* Name() const override { return "shardflow.lww.v1"; }

  // IN existing: older value or left operand (may be null); IN value: the newer operand;
  // OUT new_value: whichever has the larger timestamp (value on a tie).
  bool Merge(const rocksdb::Slice& /*key*/, const rocksdb::Slice* existing,
             const rocksdb::Slice& value, std::string* new_value,
             rocksdb::Logger* /*logger*/) const noexcept override {
    bool have_base = existing != nullptr && existing->size() >= 8;
    if (existing != nullptr && !have_base) faults_->Add();
    bool good = value.size() >= 8;
    if (!good) faults_->Add();
    const rocksdb::Slice* winner = nullptr;
    if (have_base && good) {
      winner = util::LoadI64LE(value.data()) >= util::LoadI64LE(existing->data()) ? &value : existing;
    } else if (good) {
      winner = &value;
    } else if (have_base) {
      winner = existing;
    }
    if (winner == nullptr) {
      // Nothing good so far: a tombstone at the smallest time, which any write beats.
      new_value->resize(8);
      util::StoreI64LE(new_value->data(), INT64_MIN);
      return true;
    }
    new_value->assign(winner->data(), winner->size());
    return true;
  }

 private:
  std::shared_ptr<MergeFaults> faults_;
};

}  // namespace

std::shared_ptr<rocksdb::MergeOperator> NewLastWriteWins(std::shared_ptr<MergeFaults> faults) {
  return std::make_shared<LastWriteWins>(std::move(faults));
}

}  // namespace shardflow::merge

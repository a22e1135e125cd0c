// shardflow.set.v1: a set of byte strings with add/remove.
//
// Encoding: a sequence of entries [tag u8][LEB128 length][member bytes]; tag 1 = add,
// 2 = remove. An operand is any sequence of entries, applied in order. A value holds adds
// only, sorted bytewise and unique (canonical, so equal sets have equal bytes).
//
//   FullMergeV2:        base (or empty) -> apply every operand's entries in order -> value
//   PartialMergeMulti:  operands -> one operand holding, per member, its last entry; the
//                       removes stay (tombstones) because the base they cancel may be
//                       older than the operands being combined
//
// Applying the combined operand equals applying the originals in order, because the
// effect of a sequence of adds/removes on one member is its last entry.
// Identity: the empty operand / empty set.
// Malformed operand (unknown tag, truncated length or member): the whole operand is
// skipped and counted; a malformed base counts one fault and is treated as empty.
#include <map>

#include "merge/operators.h"

namespace shardflow::merge {
namespace {

constexpr uint8_t kAdd = 1;
constexpr uint8_t kRemove = 2;

// member -> last tag
using Ops = std::map<std::string, uint8_t, std::less<>>;

bool ReadVarint(const char*& p, const char* end, uint64_t* out) {
  uint64_t v = 0;
  for (int shift = 0; shift <= 35 && p < end; shift += 7) {
    uint8_t b = static_cast<uint8_t>(*p++);
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) {
      *out = v;
      return true;
    }
  }
  return false;
}

void WriteVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

// Applies the entries of `s` to `ops` (member -> last tag). All or nothing: on malformed
// input `ops` is left unchanged and false is returned.
bool Apply(const rocksdb::Slice& s, Ops* ops) {
  std::vector<std::pair<std::string_view, uint8_t>> parsed;
  const char* p = s.data();
  const char* end = p + s.size();
  while (p < end) {
    uint8_t tag = static_cast<uint8_t>(*p++);
    uint64_t len = 0;
    if ((tag != kAdd && tag != kRemove) || !ReadVarint(p, end, &len) ||
        static_cast<uint64_t>(end - p) < len) {
      return false;
    }
    parsed.emplace_back(std::string_view(p, len), tag);
    p += len;
  }
  for (const auto& [member, tag] : parsed) {
    auto it = ops->find(member);
    if (it == ops->end()) {
      ops->emplace(std::string(member), tag);
    } else {
      it->second = tag;
    }
  }
  return true;
}

void Encode(const Ops& ops, bool keep_removes, std::string* out) {
  out->clear();
  for (const auto& [member, tag] : ops) {
    if (tag == kRemove && !keep_removes) continue;
    out->push_back(static_cast<char>(tag));
    WriteVarint(out, member.size());
    out->append(member);
  }
}

class SetOperator final : public rocksdb::MergeOperator {
 public:
  explicit SetOperator(std::shared_ptr<MergeFaults> faults) : faults_(std::move(faults)) {}

  const char* Name() const override { return "shardflow.set.v1"; }

  // IN merge_in.existing_value: the base set (may be null); IN operand_list: oldest first;
  // OUT new_value: the canonical set. Always returns true.
  bool FullMergeV2(const MergeOperationInput& merge_in,
                   MergeOperationOutput* merge_out) const noexcept override {
    Ops ops;
    if (merge_in.existing_value != nullptr && !Apply(*merge_in.existing_value, &ops)) {
      faults_->Add();
      ops.clear();
    }
    for (const rocksdb::Slice& operand : merge_in.operand_list) {
      if (!Apply(operand, &ops)) faults_->Add();
    }
    Encode(ops, /*keep_removes=*/false, &merge_out->new_value);
    return true;
  }

  // IN operand_list: oldest first; OUT new_value: one operand equivalent to all of them.
  bool PartialMergeMulti(const rocksdb::Slice& /*key*/, const std::deque<rocksdb::Slice>& operand_list,
                         std::string* new_value, rocksdb::Logger* /*logger*/) const noexcept override {
    Ops ops;
    for (const rocksdb::Slice& operand : operand_list) {
      if (!Apply(operand, &ops)) faults_->Add();
    }
    Encode(ops, /*keep_removes=*/true, new_value);
    return true;
  }

  bool PartialMerge(const rocksdb::Slice& key, const rocksdb::Slice& left, const rocksdb::Slice& right,
                    std::string* new_value, rocksdb::Logger* logger) const noexcept override {
    return PartialMergeMulti(key, std::deque<rocksdb::Slice>{left, right}, new_value, logger);
  }

 private:
  std::shared_ptr<MergeFaults> faults_;
};

}  // namespace

std::shared_ptr<rocksdb::MergeOperator> NewSet(std::shared_ptr<MergeFaults> faults) {
  return std::make_shared<SetOperator>(std::move(faults));
}

}  // namespace shardflow::merge

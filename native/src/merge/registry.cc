// The table of versioned merge-operator names. Adding an operator: a file in this folder,
// a factory in operators.h, a row here, a declaration in src/operators/mergeOperators.ts.
#include <cstring>

#include "merge/operators.h"

namespace shardflow {

namespace {

using Factory = std::shared_ptr<rocksdb::MergeOperator> (*)(const MergeOperatorSpec&,
                                                            std::shared_ptr<MergeFaults>);

// Adapts the factories of operators without parameters.
template <std::shared_ptr<rocksdb::MergeOperator> (*F)(std::shared_ptr<MergeFaults>)>
std::shared_ptr<rocksdb::MergeOperator> NoParams(const MergeOperatorSpec&, std::shared_ptr<MergeFaults> f) {
  return F(std::move(f));
}

struct Entry {
  const char* name;
  Factory make;
  bool takes_fields;
};

constexpr Entry kOperators[] = {
    {"shardflow.int64_add.v1", &NoParams<merge::NewInt64Add>, false},
    {"shardflow.float64_add.v1", &NoParams<merge::NewFloat64Add>, false},
    {"shardflow.float64_max.v1", &NoParams<merge::NewFloat64Max>, false},
    {"shardflow.float64_min.v1", &NoParams<merge::NewFloat64Min>, false},
    {"shardflow.lww.v1", &NoParams<merge::NewLastWriteWins>, false},
    {"shardflow.set.v1", &NoParams<merge::NewSet>, false},
    {"shardflow.record.v1", &merge::NewRecord, true},
};

const Entry* Find(const std::string& name) noexcept {
  for (const Entry& e : kOperators) {
    if (name == e.name) return &e;
  }
  return nullptr;
}

}  // namespace

bool IsKnownMergeOperator(const std::string& name) noexcept { return Find(name) != nullptr; }

Status CreateMergeOperator(const MergeOperatorSpec& spec, std::shared_ptr<MergeFaults> faults,
                           std::shared_ptr<rocksdb::MergeOperator>* out) noexcept {
  const Entry* e = Find(spec.name);
  if (e == nullptr) {
    return Status::UnknownMergeOperator("unknown merge operator \"" + spec.name + "\"");
  }
  if (!e->takes_fields && !spec.fields.empty()) {
    return Status::InvalidArgument("merge operator \"" + spec.name + "\" takes no fields");
  }
  *out = e->make(spec, std::move(faults));
  return Status::OK();
}

}  // namespace shardflow

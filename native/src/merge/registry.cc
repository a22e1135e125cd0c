// The table of versioned merge-operator names. Adding an operator: a file in this folder,
// a factory in operators.h, a row here, a declaration in src/operators/mergeOperators.ts.
#include <cstring>

#include "merge/operators.h"

namespace shardflow {

namespace {

struct Entry {
  const char* name;
  std::shared_ptr<rocksdb::MergeOperator> (*make)(std::shared_ptr<MergeFaults>);
};

constexpr Entry kOperators[] = {
    {"shardflow.int64_add.v1", &merge::NewInt64Add},
    {"shardflow.float64_add.v1", &merge::NewFloat64Add},
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
  *out = e->make(std::move(faults));
  return Status::OK();
}

}  // namespace shardflow

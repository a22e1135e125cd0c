// Internal: one factory per operator file (native/src/merge/<op>.cc); the registry in
// registry.cc maps versioned names onto them. See shardflow/merge_operators.h.
#ifndef SHARDFLOW_MERGE_OPERATORS_INTERNAL_H_
#define SHARDFLOW_MERGE_OPERATORS_INTERNAL_H_

#include <memory>

#include <rocksdb/merge_operator.h>

#include "shardflow/merge_operators.h"

namespace shardflow::merge {

std::shared_ptr<rocksdb::MergeOperator> NewInt64Add(std::shared_ptr<MergeFaults> faults);
std::shared_ptr<rocksdb::MergeOperator> NewFloat64Add(std::shared_ptr<MergeFaults> faults);
std::shared_ptr<rocksdb::MergeOperator> NewFloat64Max(std::shared_ptr<MergeFaults> faults);
std::shared_ptr<rocksdb::MergeOperator> NewFloat64Min(std::shared_ptr<MergeFaults> faults);
std::shared_ptr<rocksdb::MergeOperator> NewLastWriteWins(std::shared_ptr<MergeFaults> faults);
std::shared_ptr<rocksdb::MergeOperator> NewSet(std::shared_ptr<MergeFaults> faults);
std::shared_ptr<rocksdb::MergeOperator> NewRecord(const MergeOperatorSpec& spec,
                                                  std::shared_ptr<MergeFaults> faults);

}  // namespace shardflow::merge

#endif  // SHARDFLOW_MERGE_OPERATORS_INTERNAL_H_

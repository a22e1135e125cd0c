// evaluateMerge(spec, existing | undefined, operands[], mode): runs a merge operator on
// the JS thread without a database, the way RocksDB would call it: mode "full" is
// FullMergeV2(existing, operands), mode "partial" is PartialMergeMulti(operands).
// Resolves nothing asynchronously; returns { value: Buffer, faults: number }.
// For tests (partial + full == full, malformed input) and for tools that inspect
// operands; stores never use it.
#ifndef SHARDFLOW_OBJECTS_MERGE_PROBE_H_
#define SHARDFLOW_OBJECTS_MERGE_PROBE_H_

#include <napi.h>

namespace shardflow::binding {

Napi::Value EvaluateMerge(const Napi::CallbackInfo& info);

}  // namespace shardflow::binding

#endif  // SHARDFLOW_OBJECTS_MERGE_PROBE_H_

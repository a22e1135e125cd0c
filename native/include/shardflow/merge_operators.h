// shardflow/merge_operators.h: the native merge operators, declared from TypeScript by name.
//
// Meaning: RocksDB calls a merge operator inside reads and on background compaction
// threads to fold "merge operands" into a value, so a write never needs a read first.
// shardflow only ships operators written in C++; JS declares which one a column family
// uses by a versioned name (src/operators/mergeOperators.ts). A name's meaning never
// changes: a new encoding or rule gets a new name (".v2"), like RocksDB comparators.
//
//   name                        value / operand format                        tier
//   shardflow.int64_add.v1      8-byte little-endian int64; operands add      associative
//   shardflow.float64_add.v1    N >= 1 little-endian float64, element-wise    associative
//                               add; the result is as long as the longest
//   shardflow.float64_max.v1    8-byte little-endian float64; the largest     associative
//   shardflow.float64_min.v1    8-byte little-endian float64; the smallest    associative
//   shardflow.lww.v1            8-byte LE int64 timestamp (ms) + payload;      associative
//                               larger timestamp wins, ties: later operand
//   shardflow.set.v1            entries [tag u8][varint len][member bytes],    full + partial
//                               tag 1 = add, 2 = remove; values hold adds only
//   shardflow.record.v1         msgpack map string -> scalar/array; one rule   full + partial
//                               per field (sum, max, min, lww, set)
//
// Associative operators have an identity (a missing value) and PartialMerge equals Merge.
// The full-tier operators (set, record) keep removals as tombstones in partial merges
// (the base they cancel may be older than the operands being combined) and drop them in
// full merges (the base is known there).
//
// Malformed operands (wrong length, bad msgpack): the operator never fails the merge
// (a failed merge makes reads and compactions fail with Corruption for the whole key).
// It skips the operand, keeps the last good value, and counts one fault in the
// MergeFaults counter shared with the store (Store.stats().mergeFaults). A malformed
// existing value counts one fault and is treated as absent.
//
// Threading: operators are stateless apart from the atomic fault counter; RocksDB calls
// them concurrently from user and compaction threads. They never call into JS and never
// throw: every entry point is noexcept (an allocation failure terminates, as in RocksDB).
// Lifetimes: RocksDB keeps the operator (shared_ptr in the column family options) for as
// long as the DB is open; the fault counter is shared and outlives both.
#ifndef SHARDFLOW_MERGE_OPERATORS_H_
#define SHARDFLOW_MERGE_OPERATORS_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "shardflow/status.h"

namespace rocksdb {
class MergeOperator;
}

namespace shardflow {

// Count of malformed operands / values met by the operators of one column family.
struct MergeFaults {
  std::atomic<uint64_t> count{0};
  void Add() noexcept { count.fetch_add(1, std::memory_order_relaxed); }
  uint64_t Get() const noexcept { return count.load(std::memory_order_relaxed); }
};

// The rule of one field of shardflow.record.v1.
//   kSum: numbers add (int + int stays int64; any float makes a float64)
//   kMax / kMin: numeric max / min
//   kLww: the later operand's value wins (write order); nil is a value too
//   kSet: arrays are sets; an operand value that is an array adds its elements, a map
//         {"add": [...], "remove": [...]} adds and removes
enum class FieldRule { kSum, kMax, kMin, kLww, kSet };

struct RecordField {
  std::string name;
  FieldRule rule = FieldRule::kLww;
};

// What TypeScript declared: the versioned name plus parameters (record fields only).
struct MergeOperatorSpec {
  std::string name;
  std::vector<RecordField> fields;      // shardflow.record.v1: one rule per named field
  FieldRule default_rule = FieldRule::kLww;  // record: rule of fields not listed
};

// Makes the operator the spec names. Unknown name -> Status::UnknownMergeOperator and
// *out is untouched; bad parameters -> Status::InvalidArgument.
Status CreateMergeOperator(const MergeOperatorSpec& spec, std::shared_ptr<MergeFaults> faults,
                           std::shared_ptr<rocksdb::MergeOperator>* out) noexcept;

// True when `name` is in the registry (used to validate before opening anything).
bool IsKnownMergeOperator(const std::string& name) noexcept;

}  // namespace shardflow

#endif  // SHARDFLOW_MERGE_OPERATORS_H_

// A small MessagePack reader/writer for the record merge operator and the TTL filter.
//
// Covers the whole format except that map keys must be strings (records are
// string -> value maps): nil, bool, ints (kept as int64, or uint64 above INT64_MAX),
// float32/64 (read as double), str, bin, array, map, ext (kept opaque, so msgpackr's
// Date extension -1 survives a merge untouched). Nesting deeper than 64 levels, truncated
// input, trailing bytes and non-string map keys are malformed. Never throws; no
// allocation limits beyond the input size.
#ifndef SHARDFLOW_UTIL_MSGPACK_H_
#define SHARDFLOW_UTIL_MSGPACK_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace shardflow::util::msgpack {

struct Value {
  enum class Type { kNil, kBool, kInt, kUInt, kFloat, kStr, kBin, kArray, kMap, kExt };
  Type type = Type::kNil;
  bool b = false;
  int64_t i = 0;
  uint64_t u = 0;
  double f = 0;
  int8_t ext_type = 0;
  std::string s;  // str, bin, ext payload
  std::vector<Value> array;
  std::vector<std::pair<std::string, Value>> map;  // in wire order

  bool IsNumber() const noexcept {
    return type == Type::kInt || type == Type::kUInt || type == Type::kFloat;
  }
  double AsDouble() const noexcept {
    return type == Type::kInt ? static_cast<double>(i)
           : type == Type::kUInt ? static_cast<double>(u)
                                 : f;
  }
  const Value* Find(std::string_view key) const noexcept;  // map lookup, or null
  Value* Find(std::string_view key) noexcept;
};

bool operator==(const Value& a, const Value& b) noexcept;

// Parses exactly one value filling all of `data`. False when malformed.
bool Parse(std::string_view data, Value* out) noexcept;
// Appends the smallest encoding of `v`.
void Encode(const Value& v, std::string* out) noexcept;

}  // namespace shardflow::util::msgpack

#endif  // SHARDFLOW_UTIL_MSGPACK_H_

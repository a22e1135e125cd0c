#include "objects/write_batch.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "addon.h"
#include "objects/store.h"
#include "shardflow/write_batch.h"
#include "util/bytes.h"
#include "util/errors.h"
#include "util/little_endian.h"

namespace shardflow::binding {

Napi::Function WriteBatchWrap::Init(Napi::Env env) {
  return DefineClass(env, "WriteBatch",
                     {
                         InstanceMethod<&WriteBatchWrap::Put>("put"),
                         InstanceMethod<&WriteBatchWrap::Merge>("merge"),
                         InstanceMethod<&WriteBatchWrap::MergeMany>("mergeMany"),
                         InstanceMethod<&WriteBatchWrap::PutPairs>("putPairs"),
                         InstanceMethod<&WriteBatchWrap::PutPairsJoined>("putPairsJoined"),
                         InstanceMethod<&WriteBatchWrap::MergeFloat64s>("mergeFloat64s"),
                         InstanceMethod<&WriteBatchWrap::MergeFloat64sPacked>("mergeFloat64sPacked"),
                         InstanceMethod<&WriteBatchWrap::MergePairRuns>("mergePairRuns"),
                         InstanceMethod<&WriteBatchWrap::Delete>("delete"),
                         InstanceMethod<&WriteBatchWrap::DeleteRange>("deleteRange"),
                         InstanceMethod<&WriteBatchWrap::Clear>("clear"),
                         InstanceMethod<&WriteBatchWrap::Count>("count"),
                         InstanceMethod<&WriteBatchWrap::ByteSize>("byteSize"),
                         InstanceMethod<&WriteBatchWrap::SetSavePoint>("setSavePoint"),
                         InstanceMethod<&WriteBatchWrap::RollbackToSavePoint>("rollbackToSavePoint"),
                         InstanceMethod<&WriteBatchWrap::PopSavePoint>("popSavePoint"),
                         InstanceMethod<&WriteBatchWrap::Get>("get"),
                         InstanceMethod<&WriteBatchWrap::NewIterator>("iterator"),
                     });
}

WriteBatchWrap::WriteBatchWrap(const Napi::CallbackInfo& info) : Napi::ObjectWrap<WriteBatchWrap>(info) {
  Napi::Env env = info.Env();
  bool is = false;
  if (info.Length() >= 1 && info[0].IsObject()) {
    napi_instanceof(env, info[0], Addon::Get(env)->store_ctor.Value(), &is);
  }
  if (!is) {
    ThrowStatus(env, Status::InvalidArgument("WriteBatch expects a Store"));
    return;
  }
  StoreWrap* owner = Napi::ObjectWrap<StoreWrap>::Unwrap(info[0].As<Napi::Object>());
  if (!owner->is_open()) {
    ThrowStatus(env, Status::Closed("store is not open"));
    return;
  }
  store_ = owner->store();
  if (info.Length() >= 2 && info[1].ToBoolean().Value()) {
    indexed_ = std::make_shared<IndexedBatch>();
    rec_ = indexed_->wbwi();
    owner_ = owner;
    owner_ref_ = Napi::Persistent(info[0].As<Napi::Object>());
  }
}

WriteBatchWrap* WriteBatchWrap::FromValue(Napi::Value value) {
  if (!value.IsObject()) return nullptr;
  Napi::Env env = value.Env();
  bool is = false;
  napi_instanceof(env, value, Addon::Get(env)->write_batch_ctor.Value(), &is);
  return is ? Napi::ObjectWrap<WriteBatchWrap>::Unwrap(value.As<Napi::Object>()) : nullptr;
}

const ColumnFamilyRef* WriteBatchWrap::CfArg(const Napi::CallbackInfo& info) {
  const ColumnFamilyRef* ref = nullptr;
  if (info.Length() >= 1 && info[0].IsNumber()) ref = store_->Ref(info[0].As<Napi::Number>().Int32Value());
  if (ref == nullptr) ThrowStatus(info.Env(), Status::InvalidArgument("unknown column family index"));
  return ref;
}

bool WriteBatchWrap::Changeable(Napi::Env env) {
  if (!indexed_) return true;
  Status s = indexed_->PrepareChange();
  if (s.ok()) return true;
  ThrowStatus(env, s);
  return false;
}

namespace {
rocksdb::Slice S(std::string_view v) { return rocksdb::Slice(v.data(), v.size()); }

bool ReadArgs(const Napi::CallbackInfo& info, size_t n, BytesArg* args) {
  for (size_t i = 0; i < n; ++i) {
    if (info.Length() <= i + 1 || !args[i].Read(info[i + 1])) {
      ThrowStatus(info.Env(), Status::InvalidArgument("keys and values must be strings or Uint8Arrays"));
      return false;
    }
  }
  return true;
}

}  // namespace

void WriteBatchWrap::ReportMemory(Napi::Env env) {
  const int64_t size = static_cast<int64_t>(rec_->GetWriteBatch()->GetDataSize());
  const int64_t delta = size - reported_;
  if (delta >= (64 << 10) || delta <= -(64 << 10)) {
    Napi::MemoryManagement::AdjustExternalMemory(env, delta);
    reported_ = size;
  }
}

Status WriteBatchWrap::Take(Napi::Env env, rocksdb::WriteBatch* out) {
  if (indexed_) {
    Status s = indexed_->PrepareChange();
    if (!s.ok()) return s;
    indexed_->TakeInto(out);
  } else {
    *out = std::move(batch_);
    batch_ = rocksdb::WriteBatch();
  }
  ReportMemory(env);
  return Status::OK();
}

void WriteBatchWrap::Finalize(Napi::Env env) {
  if (reported_ != 0) Napi::MemoryManagement::AdjustExternalMemory(env, -reported_);
  reported_ = 0;
}

Napi::Value WriteBatchWrap::Check(Napi::Env env, const rocksdb::Status& s) {
  if (!s.ok()) return ThrowStatus(env, Status::FromRocks(s));
  ReportMemory(env);
  return env.Undefined();
}

Napi::Value WriteBatchWrap::Put(const Napi::CallbackInfo& info) {
  const ColumnFamilyRef* cf = CfArg(info);
  BytesArg a[2];
  if (cf == nullptr || !ReadArgs(info, 2, a) || !Changeable(info.Env())) return info.Env().Undefined();
  return Check(info.Env(), rec_->Put(const_cast<ColumnFamilyRef*>(cf), S(a[0].View()), S(a[1].View())));
}

Napi::Value WriteBatchWrap::Merge(const Napi::CallbackInfo& info) {
  const ColumnFamilyRef* cf = CfArg(info);
  BytesArg a[2];
  if (cf == nullptr || !ReadArgs(info, 2, a) || !Changeable(info.Env())) return info.Env().Undefined();
  return Check(info.Env(), rec_->Merge(const_cast<ColumnFamilyRef*>(cf), S(a[0].View()), S(a[1].View())));
}

namespace {
// Keys of a batched call: an Array of strings / Uint8Arrays. False (thrown) otherwise.
bool KeysArg(const Napi::CallbackInfo& info, size_t i, Napi::Array* out) {
  if (info.Length() <= i || !info[i].IsArray()) {
    ThrowStatus(info.Env(), Status::InvalidArgument("keys must be an array"));
    return false;
  }
  *out = info[i].As<Napi::Array>();
  return true;
}

// Puts key `a 0x00 b` (built by RocksDB from slice parts, no copy here) with `value`.
rocksdb::Status PutPair(rocksdb::WriteBatchBase* batch, rocksdb::ColumnFamilyHandle* cf, std::string_view a, std::string_view b, std::string_view value) {
  static const char kSep = 0;
  const rocksdb::Slice key_parts[3] = {S(a), rocksdb::Slice(&kSep, 1), S(b)};
  const rocksdb::Slice value_part = S(value);
  return batch->Put(cf, rocksdb::SliceParts(key_parts, 3), rocksdb::SliceParts(&value_part, 1));
}

// The merge of `value` into key `a 0x00 b` (as PutPair puts it).
rocksdb::Status MergePair(rocksdb::WriteBatchBase* batch, rocksdb::ColumnFamilyHandle* cf, std::string_view a, std::string_view b, std::string_view value) {
  static const char kSep = 0;
  const rocksdb::Slice key_parts[3] = {S(a), rocksdb::Slice(&kSep, 1), S(b)};
  const rocksdb::Slice value_part = S(value);
  return batch->Merge(cf, rocksdb::SliceParts(key_parts, 3), rocksdb::SliceParts(&value_part, 1));
}

// On failure the batch is rolled back to where the call started: all or nothing.
Napi::Value Rollback(Napi::Env env, rocksdb::WriteBatchBase* batch, Status s) {
  batch->RollbackToSavePoint();
  return ThrowStatus(env, std::move(s));
}
}  // namespace

template <typename Record>
Napi::Value WriteBatchWrap::RecordAll(Napi::Env env, const ColumnFamilyRef* cf, size_t n, Record&& record) {
  if (!Changeable(env)) return env.Undefined();
  rec_->SetSavePoint();
  auto* ref = const_cast<ColumnFamilyRef*>(cf);
  for (size_t i = 0; i < n; ++i) {
    Status s = record(ref, i);
    if (!s.ok()) return Rollback(env, rec_, std::move(s));
  }
  rec_->PopSavePoint();
  ReportMemory(env);
  return env.Undefined();
}

Napi::Value WriteBatchWrap::MergeMany(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const ColumnFamilyRef* cf = CfArg(info);
  Napi::Array keys;
  if (cf == nullptr || !KeysArg(info, 1, &keys)) return env.Undefined();
  const uint32_t n = keys.Length();
  // operands: an Array as long as keys, or one Uint8Array merged into every key.
  bool shared = false;
  Napi::Array operands;
  BytesArg one;
  if (info.Length() > 2 && info[2].IsArray()) {
    operands = info[2].As<Napi::Array>();
    if (operands.Length() != n) {
      return ThrowStatus(env, Status::InvalidArgument("mergeMany: keys and operands differ in length"));
    }
  } else if (info.Length() > 2 && info[2].IsTypedArray() && one.Read(info[2])) {
    shared = true;
  } else {
    return ThrowStatus(env, Status::InvalidArgument("mergeMany: operands must be an array or a Uint8Array"));
  }
  return RecordAll(env, cf, n, [&](rocksdb::ColumnFamilyHandle* ref, size_t i) {
    BytesArg k, v;
    if (!k.Read(keys.Get(static_cast<uint32_t>(i)))) return Status::InvalidArgument("keys must be strings or Uint8Arrays");
    if (!shared && !v.Read(operands.Get(static_cast<uint32_t>(i)))) return Status::InvalidArgument("operands must be Uint8Arrays");
    return Status::FromRocks(rec_->Merge(ref, S(k.View()), S(shared ? one.View() : v.View())));
  });
}

Napi::Value WriteBatchWrap::PutPairs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const ColumnFamilyRef* cf = CfArg(info);
  if (cf == nullptr) return env.Undefined();
  // Each of firsts, seconds, values: an Array (one per put, all of one length) or one value
  // for every put. At least one must be an Array.
  Napi::Array arrays[3];
  bool is_array[3] = {false, false, false};
  BytesArg fixed[3];
  int64_t n = -1;
  for (size_t j = 0; j < 3; ++j) {
    if (info.Length() <= j + 1) return ThrowStatus(env, Status::InvalidArgument("putPairs: expects firsts, seconds and values"));
    Napi::Value v = info[j + 1];
    if (v.IsArray()) {
      arrays[j] = v.As<Napi::Array>();
      is_array[j] = true;
      const int64_t len = arrays[j].Length();
      if (n >= 0 && len != n) return ThrowStatus(env, Status::InvalidArgument("putPairs: arrays differ in length"));
      n = len;
    } else if (!fixed[j].Read(v) || (j == 2 && !v.IsTypedArray())) {
      return ThrowStatus(env, Status::InvalidArgument("putPairs: keys must be strings or Uint8Arrays, values Uint8Arrays"));
    }
  }
  if (n < 0) return ThrowStatus(env, Status::InvalidArgument("putPairs: one of firsts, seconds, values must be an array"));
  BytesArg read[3];
  return RecordAll(env, cf, static_cast<size_t>(n), [&](rocksdb::ColumnFamilyHandle* ref, size_t i) {
    std::string_view part[3];
    for (size_t j = 0; j < 3; ++j) {
      if (!is_array[j]) {
        part[j] = fixed[j].View();
        continue;
      }
      Napi::Value v = arrays[j].Get(static_cast<uint32_t>(i));
      if (!read[j].Read(v) || (j == 2 && !v.IsTypedArray())) {
        return Status::InvalidArgument("putPairs: keys must be strings or Uint8Arrays, values Uint8Arrays");
      }
      part[j] = read[j].View();
    }
    return Status::FromRocks(PutPair(rec_, ref, part[0], part[1], part[2]));
  });
}

Napi::Value WriteBatchWrap::PutPairsJoined(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const ColumnFamilyRef* cf = CfArg(info);
  if (cf == nullptr) return env.Undefined();
  const Status bad = Status::InvalidArgument("putPairsJoined: expects n, first, firstJoined, second, secondJoined, values[], valueIndex[, merge, keyOrder]");
  // Optional: merge (merges instead of puts), keyOrder (recorded in key order).
  const bool merge = info.Length() > 8 && info[8].IsBoolean() && info[8].As<Napi::Boolean>().Value();
  const bool key_order = info.Length() > 9 && info[9].IsBoolean() && info[9].As<Napi::Boolean>().Value();
  if (info.Length() < 8 || !info[1].IsNumber() || !info[3].IsBoolean() || !info[5].IsBoolean() || !info[6].IsArray() ||
      !info[7].IsTypedArray() || info[7].As<Napi::TypedArray>().TypedArrayType() != napi_uint32_array) {
    return ThrowStatus(env, bad);
  }
  const int64_t n = info[1].As<Napi::Number>().Int64Value();
  Napi::Uint32Array index = info[7].As<Napi::Uint32Array>();
  if (n < 0 || static_cast<uint64_t>(n) != index.ElementLength()) return ThrowStatus(env, bad);
  // Each key part: one shared value, or n parts split out of one 0x00-joined string.
  BytesArg shared[2];
  std::vector<std::string_view> parts[2];
  for (size_t j = 0; j < 2; ++j) {
    Napi::Value v = info[2 + 2 * j];
    const bool joined = info[3 + 2 * j].As<Napi::Boolean>().Value();
    if (!shared[j].Read(v) || (joined && !v.IsString())) return ThrowStatus(env, bad);
    if (!joined) continue;
    std::string_view all = shared[j].View();
    parts[j].reserve(static_cast<size_t>(n));
    while (true) {
      const size_t sep = all.find('\0');
      parts[j].push_back(all.substr(0, sep));
      if (sep == std::string_view::npos) break;
      all.remove_prefix(sep + 1);
    }
    if (parts[j].size() != static_cast<size_t>(n) && !(n == 0 && parts[j].size() == 1)) {
      return ThrowStatus(env, Status::InvalidArgument("putPairsJoined: a joined part has a 0x00 inside a key part, or the wrong count"));
    }
  }
  Napi::Array values_arg = info[6].As<Napi::Array>();
  std::vector<BytesArg> values(values_arg.Length());
  for (uint32_t v = 0; v < values_arg.Length(); ++v) {
    Napi::Value value = values_arg.Get(v);
    if (!value.IsTypedArray() || !values[v].Read(value)) return ThrowStatus(env, Status::InvalidArgument("putPairsJoined: values must be Uint8Arrays"));
  }
  const uint32_t* which = index.Data();
  for (int64_t i = 0; i < n; ++i) {
    if (which[i] >= values.size()) return ThrowStatus(env, Status::InvalidArgument("putPairsJoined: valueIndex out of range"));
  }
  auto first = [&](size_t i) { return parts[0].empty() ? shared[0].View() : parts[0][i]; };
  auto second = [&](size_t i) { return parts[1].empty() ? shared[1].View() : parts[1][i]; };
  // keyOrder: a stable sort by key `a 0x00 b` (operations on one key keep their order).
  // Comparing (a, b) part by part is comparing those bytes: no part holds a 0x00, so where
  // one a is a prefix of the other, the shorter key has the 0x00 at the first difference.
  // std::string_view compares as unsigned bytes (char_traits<char>), as RocksDB's
  // bytewise comparator does.
  std::vector<uint32_t> order;
  if (key_order) {
    order.resize(static_cast<size_t>(n));
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<uint32_t>(i);
    std::stable_sort(order.begin(), order.end(), [&](uint32_t x, uint32_t y) {
      const int c = first(x).compare(first(y));
      return c != 0 ? c < 0 : second(x).compare(second(y)) < 0;
    });
  }
  return RecordAll(env, cf, static_cast<size_t>(n), [&](rocksdb::ColumnFamilyHandle* ref, size_t k) {
    const size_t i = key_order ? order[k] : k;
    const std::string_view value = values[which[i]].View();
    return Status::FromRocks(merge ? MergePair(rec_, ref, first(i), second(i), value) : PutPair(rec_, ref, first(i), second(i), value));
  });
}

Napi::Value WriteBatchWrap::MergeFloat64s(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const ColumnFamilyRef* cf = CfArg(info);
  Napi::Array keys;
  if (cf == nullptr || !KeysArg(info, 1, &keys)) return env.Undefined();
  const uint32_t n = keys.Length();
  if (info.Length() <= 3 || !info[2].IsTypedArray() ||
      info[2].As<Napi::TypedArray>().TypedArrayType() != napi_float64_array || !info[3].IsNumber()) {
    return ThrowStatus(env, Status::InvalidArgument("mergeFloat64s: values must be a Float64Array and stride a number"));
  }
  Napi::Float64Array values = info[2].As<Napi::Float64Array>();
  const int64_t stride = info[3].As<Napi::Number>().Int64Value();
  if (stride < 1 || stride > 4096 || static_cast<uint64_t>(stride) * n != values.ElementLength()) {
    return ThrowStatus(env, Status::InvalidArgument("mergeFloat64s: values.length must be keys.length * stride (stride 1..4096)"));
  }
  const double* data = values.Data();
  std::string operand(static_cast<size_t>(stride) * 8, '\0');
  return RecordAll(env, cf, n, [&](rocksdb::ColumnFamilyHandle* ref, size_t i) {
    BytesArg k;
    if (!k.Read(keys.Get(static_cast<uint32_t>(i)))) return Status::InvalidArgument("keys must be strings or Uint8Arrays");
    for (int64_t j = 0; j < stride; ++j) util::StoreF64LE(operand.data() + j * 8, data[i * stride + j]);
    return Status::FromRocks(rec_->Merge(ref, S(k.View()), rocksdb::Slice(operand)));
  });
}

// mergeFloat64sPacked(cf, keyBytes: Uint8Array, keyEnds: Uint32Array, values: Float64Array,
// stride, keyStarts?: Uint32Array): as mergeFloat64s, with key i = keyBytes[keyEnds[i-1] ..
// keyEnds[i]) (keyEnds[-1] = 0), or keyBytes[keyStarts[i] .. keyEnds[i]) when keyStarts is
// given (keys picked out of a larger buffer, in any order), so that many keys cost no JS
// object each (the metric's contributions on the wire, the pages of a push).
Napi::Value WriteBatchWrap::MergeFloat64sPacked(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const ColumnFamilyRef* cf = CfArg(info);
  if (cf == nullptr) return env.Undefined();
  if (info.Length() <= 4 || !info[1].IsTypedArray() ||
      info[1].As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array || !info[2].IsTypedArray() ||
      info[2].As<Napi::TypedArray>().TypedArrayType() != napi_uint32_array || !info[3].IsTypedArray() ||
      info[3].As<Napi::TypedArray>().TypedArrayType() != napi_float64_array || !info[4].IsNumber()) {
    return ThrowStatus(env, Status::InvalidArgument(
        "mergeFloat64sPacked: expects keyBytes: Uint8Array, keyEnds: Uint32Array, values: Float64Array, stride: number"));
  }
  Napi::Uint8Array bytes = info[1].As<Napi::Uint8Array>();
  Napi::Uint32Array ends = info[2].As<Napi::Uint32Array>();
  Napi::Float64Array values = info[3].As<Napi::Float64Array>();
  const int64_t stride = info[4].As<Napi::Number>().Int64Value();
  const size_t n = ends.ElementLength();
  const uint32_t* start = nullptr;
  if (info.Length() > 5 && !info[5].IsUndefined()) {
    if (!info[5].IsTypedArray() || info[5].As<Napi::TypedArray>().TypedArrayType() != napi_uint32_array ||
        info[5].As<Napi::Uint32Array>().ElementLength() != n) {
      return ThrowStatus(env, Status::InvalidArgument("mergeFloat64sPacked: keyStarts must be a Uint32Array as long as keyEnds"));
    }
    start = info[5].As<Napi::Uint32Array>().Data();
  }
  if (stride < 1 || stride > 4096 || static_cast<uint64_t>(stride) * n != values.ElementLength()) {
    return ThrowStatus(env, Status::InvalidArgument("mergeFloat64sPacked: values.length must be keyEnds.length * stride (stride 1..4096)"));
  }
  const char* base = reinterpret_cast<const char*>(bytes.Data());
  const uint32_t* end = ends.Data();
  uint32_t previous = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint32_t from = start != nullptr ? start[i] : previous;
    if (end[i] < from || end[i] > bytes.ByteLength()) {
      return ThrowStatus(env, Status::InvalidArgument(start != nullptr ? "mergeFloat64sPacked: each key must have start <= end <= keyBytes.length"
                                                                        : "mergeFloat64sPacked: keyEnds must be non-decreasing and within keyBytes"));
    }
    previous = end[i];
  }
  const double* data = values.Data();
  std::string operand(static_cast<size_t>(stride) * 8, '\0');
  return RecordAll(env, cf, n, [&](rocksdb::ColumnFamilyHandle* ref, size_t i) {
    const uint32_t from = start != nullptr ? start[i] : (i == 0 ? 0 : end[i - 1]);
    for (int64_t j = 0; j < stride; ++j) util::StoreF64LE(operand.data() + j * 8, data[i * stride + j]);
    return Status::FromRocks(rec_->Merge(ref, rocksdb::Slice(base + from, end[i] - from), rocksdb::Slice(operand)));
  });
}

namespace {
// A packed key column from JS: bytes (Uint8Array), ends (Uint32Array) and optional starts
// (Uint32Array as long as ends; without it key i starts where key i-1 ends). Part i is
// bytes[start_i .. ends[i]).
struct PackedArg {
  const char* base = nullptr;
  const uint32_t* ends = nullptr;
  const uint32_t* starts = nullptr;
  size_t n = 0;
  std::string_view Part(size_t i) const {
    const uint32_t from = starts != nullptr ? starts[i] : (i == 0 ? 0 : ends[i - 1]);
    return std::string_view(base + from, ends[i] - from);
  }
};

bool IsTyped(const Napi::Value& v, napi_typedarray_type type) {
  return v.IsTypedArray() && v.As<Napi::TypedArray>().TypedArrayType() == type;
}

// Reads a[i], a[i+1], a[i+2] (bytes, ends, starts or undefined) and checks every part lies
// within bytes (and, without starts, that ends do not decrease). False: *error set.
bool ReadPacked(const Napi::Array& a, uint32_t i, PackedArg* out, const char** error) {
  Napi::Value b = a.Get(i), e = a.Get(i + 1), st = a.Get(i + 2);
  if (!IsTyped(b, napi_uint8_array) || !IsTyped(e, napi_uint32_array) || !(st.IsUndefined() || IsTyped(st, napi_uint32_array))) {
    *error = "expects bytes: Uint8Array, ends: Uint32Array, starts: Uint32Array | undefined per column";
    return false;
  }
  Napi::Uint8Array bytes = b.As<Napi::Uint8Array>();
  Napi::Uint32Array ends = e.As<Napi::Uint32Array>();
  out->base = reinterpret_cast<const char*>(bytes.Data());
  out->ends = ends.Data();
  out->n = ends.ElementLength();
  out->starts = nullptr;
  if (!st.IsUndefined()) {
    Napi::Uint32Array starts = st.As<Napi::Uint32Array>();
    if (starts.ElementLength() != out->n) {
      *error = "starts must be as long as ends";
      return false;
    }
    out->starts = starts.Data();
  }
  uint32_t previous = 0;
  for (size_t k = 0; k < out->n; ++k) {
    const uint32_t from = out->starts != nullptr ? out->starts[k] : previous;
    if (out->ends[k] < from || out->ends[k] > bytes.ByteLength()) {
      *error = out->starts != nullptr ? "each part must have start <= end <= bytes.length" : "ends must be non-decreasing and within bytes";
      return false;
    }
    previous = out->ends[k];
  }
  return true;
}

// One merge of mergePairRuns: key `first 0x00 second`, operand.
struct PairMerge {
  std::string_view first, second, operand;
};

struct PairHash {
  const std::vector<PairMerge>* all;
  size_t operator()(uint32_t i) const {
    const PairMerge& m = (*all)[i];
    const size_t h = std::hash<std::string_view>()(m.first);
    return h ^ (std::hash<std::string_view>()(m.second) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
  }
};

struct PairEq {
  const std::vector<PairMerge>* all;
  bool operator()(uint32_t i, uint32_t j) const {
    const PairMerge& a = (*all)[i];
    const PairMerge& b = (*all)[j];
    return a.first == b.first && a.second == b.second;
  }
};
}  // namespace

// mergePairRuns(cf, columns: Array, lastPerKey: boolean, keyOrder: boolean): columns holds
// groups of ten values (firstBytes, firstEnds, firstStarts?, secondBytes, secondEnds,
// secondStarts?, operandBytes, operandEnds, operandStarts?, runs: Uint32Array); run j of a
// group merges operand j into the keys `first 0x00 second_j` of the group's next runs[j]
// firsts, group after group. lastPerKey keeps only the last merge of each key (for operands
// that replace each other); keyOrder records them sorted by key (memtable insert hints).
Napi::Value WriteBatchWrap::MergePairRuns(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const ColumnFamilyRef* cf = CfArg(info);
  if (cf == nullptr) return env.Undefined();
  if (info.Length() < 4 || !info[1].IsArray() || !info[2].IsBoolean() || !info[3].IsBoolean()) {
    return ThrowStatus(env, Status::InvalidArgument("mergePairRuns: expects columns: Array, lastPerKey: boolean, keyOrder: boolean"));
  }
  Napi::Array columns = info[1].As<Napi::Array>();
  const bool last_per_key = info[2].As<Napi::Boolean>().Value();
  const bool key_order = info[3].As<Napi::Boolean>().Value();
  if (columns.Length() % 10 != 0) return ThrowStatus(env, Status::InvalidArgument("mergePairRuns: columns must hold groups of ten"));
  std::vector<PairMerge> all;
  for (uint32_t g = 0; g < columns.Length(); g += 10) {
    PackedArg col[3];
    const char* error = nullptr;
    for (uint32_t j = 0; j < 3; ++j) {
      if (!ReadPacked(columns, g + 3 * j, &col[j], &error)) return ThrowStatus(env, Status::InvalidArgument(std::string("mergePairRuns: ") + error));
    }
    Napi::Value runs_arg = columns.Get(g + 9);
    if (!IsTyped(runs_arg, napi_uint32_array)) return ThrowStatus(env, Status::InvalidArgument("mergePairRuns: runs must be a Uint32Array"));
    Napi::Uint32Array runs_array = runs_arg.As<Napi::Uint32Array>();
    const uint32_t* runs = runs_array.Data();
    const size_t m = runs_array.ElementLength();
    if (col[1].n != m || col[2].n != m) return ThrowStatus(env, Status::InvalidArgument("mergePairRuns: seconds, operands and runs differ in length"));
    uint64_t total = 0;
    for (size_t j = 0; j < m; ++j) total += runs[j];
    if (total != col[0].n) return ThrowStatus(env, Status::InvalidArgument("mergePairRuns: runs do not sum to the firsts' count"));
    size_t i = 0;
    for (size_t j = 0; j < m; ++j) {
      for (uint32_t k = 0; k < runs[j]; ++k, ++i) all.push_back({col[0].Part(i), col[1].Part(j), col[2].Part(j)});
    }
  }
  std::vector<uint32_t> order;
  order.reserve(all.size());
  if (last_per_key) {
    // From the last merge back: a key's first sight is its last merge.
    std::unordered_set<uint32_t, PairHash, PairEq> seen(all.size() * 2, PairHash{&all}, PairEq{&all});
    for (size_t i = all.size(); i-- > 0;) {
      if (seen.insert(static_cast<uint32_t>(i)).second) order.push_back(static_cast<uint32_t>(i));
    }
    std::reverse(order.begin(), order.end());
  } else {
    for (size_t i = 0; i < all.size(); ++i) order.push_back(static_cast<uint32_t>(i));
  }
  if (key_order) {
    // Part by part, as in putPairsJoined (a stable sort: merges of one key keep their order).
    std::stable_sort(order.begin(), order.end(), [&](uint32_t x, uint32_t y) {
      const int c = all[x].first.compare(all[y].first);
      return c != 0 ? c < 0 : all[x].second.compare(all[y].second) < 0;
    });
  }
  return RecordAll(env, cf, order.size(), [&](rocksdb::ColumnFamilyHandle* ref, size_t k) {
    const PairMerge& m = all[order[k]];
    return Status::FromRocks(MergePair(rec_, ref, m.first, m.second, m.operand));
  });
}

Napi::Value WriteBatchWrap::Delete(const Napi::CallbackInfo& info) {
  const ColumnFamilyRef* cf = CfArg(info);
  BytesArg a[1];
  if (cf == nullptr || !ReadArgs(info, 1, a) || !Changeable(info.Env())) return info.Env().Undefined();
  return Check(info.Env(), rec_->Delete(const_cast<ColumnFamilyRef*>(cf), S(a[0].View())));
}

Napi::Value WriteBatchWrap::DeleteRange(const Napi::CallbackInfo& info) {
  const ColumnFamilyRef* cf = CfArg(info);
  BytesArg a[2];
  if (cf == nullptr || !ReadArgs(info, 2, a)) return info.Env().Undefined();
  if (indexed_) {
    return ThrowStatus(info.Env(), Status::InvalidArgument(
        "an indexed (read-your-writes) batch takes no range deletes (RocksDB 7.8's WriteBatchWithIndex does not index them): delete the keys one by one"));
  }
  if (!cf->TakesRangeDeletes()) {
    return ThrowStatus(info.Env(), Status::InvalidArgument("column family " + cf->GetName() +
                                                           " uses memtable insert hints and takes no range deletes: delete its keys one by one"));
  }
  return Check(info.Env(), rec_->DeleteRange(const_cast<ColumnFamilyRef*>(cf), S(a[0].View()), S(a[1].View())));
}

Napi::Value WriteBatchWrap::Clear(const Napi::CallbackInfo& info) {
  if (!Changeable(info.Env())) return info.Env().Undefined();
  if (indexed_) {
    rec_->Clear();
  } else if (batch_.GetDataSize() > (64u << 10)) {
    // Give the memory back (rocksdb::WriteBatch::Clear keeps its string's capacity).
    batch_ = rocksdb::WriteBatch();
  } else {
    batch_.Clear();
  }
  ReportMemory(info.Env());
  return info.Env().Undefined();
}

Napi::Value WriteBatchWrap::Count(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), rec_->GetWriteBatch()->Count());
}

Napi::Value WriteBatchWrap::ByteSize(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), static_cast<double>(rec_->GetWriteBatch()->GetDataSize()));
}

// Save points (RocksDB's WriteBatch::SetSavePoint, RollbackToSavePoint, PopSavePoint): a
// stack of places in the batch; a rollback removes what was recorded since the top one (an
// indexed batch rebuilds its index then, O(entries)) and pops it.
Napi::Value WriteBatchWrap::SetSavePoint(const Napi::CallbackInfo& info) {
  rec_->SetSavePoint();
  return info.Env().Undefined();
}

namespace {
Napi::Value NoSavePoint(Napi::Env env, const rocksdb::Status& s) {
  if (s.IsNotFound()) return ThrowStatus(env, Status::InvalidArgument("the batch has no save point (setSavePoint() first)"));
  return ThrowStatus(env, Status::FromRocks(s));
}
}  // namespace

Napi::Value WriteBatchWrap::RollbackToSavePoint(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!Changeable(env)) return env.Undefined();
  rocksdb::Status s = rec_->RollbackToSavePoint();
  if (!s.ok()) return NoSavePoint(env, s);
  ReportMemory(env);
  return env.Undefined();
}

Napi::Value WriteBatchWrap::PopSavePoint(const Napi::CallbackInfo& info) {
  rocksdb::Status s = rec_->PopSavePoint();
  if (!s.ok()) return NoSavePoint(info.Env(), s);
  return info.Env().Undefined();
}

}  // namespace shardflow::binding

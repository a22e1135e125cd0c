// Module entry: registers the classes, the per-environment Addon state and the cleanup
// hook that closes stores left open when the environment (main or worker thread) ends.
#include <napi.h>

#include <cstring>
#include <string>
#include <vector>

#include <rocksdb/version.h>

#include "addon.h"
#include "objects/iterator.h"
#include "objects/merge_probe.h"
#include "objects/resources.h"
#include "objects/snapshot.h"
#include "objects/store.h"
#include "objects/write_batch.h"
#include "shardflow/merge_operators.h"
#include "util/errors.h"

namespace shardflow::binding {
namespace {

void CloseOpenStores(Addon* addon) {
  std::vector<StoreWrap*> stores(addon->open_stores.begin(), addon->open_stores.end());
  addon->open_stores.clear();
  for (StoreWrap* s : stores) s->CloseForTeardown();
}

Napi::Value KnownMergeOperator(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsString()) return Napi::Boolean::New(env, false);
  return Napi::Boolean::New(env, IsKnownMergeOperator(info[0].As<Napi::String>().Utf8Value()));
}

// gatherKeys(bytes: Uint8Array, starts: Uint32Array, ends: Uint32Array) -> Buffer: the keys
// bytes[starts[i], ends[i]) copied one after another (packed keys, storage/key.ts), with no
// per-key JS call.
Napi::Value GatherKeys(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto is = [&](size_t i, napi_typedarray_type t) {
    return info.Length() > i && info[i].IsTypedArray() && info[i].As<Napi::TypedArray>().TypedArrayType() == t;
  };
  if (!is(0, napi_uint8_array) || !is(1, napi_uint32_array) || !is(2, napi_uint32_array) ||
      info[1].As<Napi::Uint32Array>().ElementLength() != info[2].As<Napi::Uint32Array>().ElementLength()) {
    return ThrowStatus(env, Status::InvalidArgument("gatherKeys: expects bytes: Uint8Array, starts and ends: Uint32Arrays of one length"));
  }
  Napi::Uint8Array bytes = info[0].As<Napi::Uint8Array>();
  const uint32_t* start = info[1].As<Napi::Uint32Array>().Data();
  const uint32_t* end = info[2].As<Napi::Uint32Array>().Data();
  const size_t n = info[1].As<Napi::Uint32Array>().ElementLength();
  size_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    if (start[i] > end[i] || end[i] > bytes.ByteLength()) {
      return ThrowStatus(env, Status::InvalidArgument("gatherKeys: each key must have start <= end <= bytes.length"));
    }
    total += end[i] - start[i];
  }
  Napi::Buffer<uint8_t> out = Napi::Buffer<uint8_t>::New(env, total);
  uint8_t* at = out.Data();
  for (size_t i = 0; i < n; ++i) {
    std::memcpy(at, bytes.Data() + start[i], end[i] - start[i]);
    at += end[i] - start[i];
  }
  return out;
}

// The version of the RocksDB this addon was compiled against ("major.minor.patch", from
// rocksdb/version.h): what the TypeScript side checks features against (StoreOptions.walCompression).
Napi::Value RocksdbVersion(const Napi::CallbackInfo& info) {
  return Napi::String::New(info.Env(), std::to_string(ROCKSDB_MAJOR) + "." + std::to_string(ROCKSDB_MINOR) + "." + std::to_string(ROCKSDB_PATCH));
}

}  // namespace

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  auto* addon = new Addon();
  env.SetInstanceData<Addon>(addon);  // deleted by node-addon-api at environment teardown
  env.AddCleanupHook([addon]() { CloseOpenStores(addon); });

  Napi::Function store = StoreWrap::Init(env);
  Napi::Function snapshot = SnapshotWrap::Init(env);
  Napi::Function iterator = IteratorWrap::Init(env);
  Napi::Function batch = WriteBatchWrap::Init(env);
  Napi::Function resources = ResourcesWrap::Init(env);
  addon->store_ctor = Napi::Persistent(store);
  addon->snapshot_ctor = Napi::Persistent(snapshot);
  addon->iterator_ctor = Napi::Persistent(iterator);
  addon->write_batch_ctor = Napi::Persistent(batch);
  addon->resources_ctor = Napi::Persistent(resources);

  exports.Set("Store", store);
  exports.Set("Snapshot", snapshot);
  exports.Set("Iterator", iterator);
  exports.Set("WriteBatch", batch);
  exports.Set("Resources", resources);
  exports.Set("setErrorClasses", Napi::Function::New(env, SetErrorClasses, "setErrorClasses"));
  exports.Set("evaluateMerge", Napi::Function::New(env, EvaluateMerge, "evaluateMerge"));
  exports.Set("gatherKeys", Napi::Function::New(env, GatherKeys, "gatherKeys"));
  exports.Set("isKnownMergeOperator", Napi::Function::New(env, KnownMergeOperator, "isKnownMergeOperator"));
  exports.Set("rocksdbVersion", Napi::Function::New(env, RocksdbVersion, "rocksdbVersion"));
  return exports;
}

}  // namespace shardflow::binding

static Napi::Object InitShardflow(Napi::Env env, Napi::Object exports) {
  return shardflow::binding::Init(env, exports);
}

NODE_API_MODULE(shardflow_native, InitShardflow)

#include "objects/write_batch.h"

#include "addon.h"
#include "objects/store.h"
#include "shardflow/write_batch.h"
#include "util/bytes.h"
#include "util/errors.h"

namespace shardflow::binding {

Napi::Function WriteBatchWrap::Init(Napi::Env env) {
  return DefineClass(env, "WriteBatch",
                     {
                         InstanceMethod<&WriteBatchWrap::Put>("put"),
                         InstanceMethod<&WriteBatchWrap::Merge>("merge"),
                         InstanceMethod<&WriteBatchWrap::Delete>("delete"),
                         InstanceMethod<&WriteBatchWrap::DeleteRange>("deleteRange"),
                         InstanceMethod<&WriteBatchWrap::Clear>("clear"),
                         InstanceMethod<&WriteBatchWrap::Count>("count"),
                         InstanceMethod<&WriteBatchWrap::ByteSize>("byteSize"),
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

Napi::Value Check(Napi::Env env, const rocksdb::Status& s) {
  if (!s.ok()) return ThrowStatus(env, Status::FromRocks(s));
  return env.Undefined();
}
}  // namespace

Napi::Value WriteBatchWrap::Put(const Napi::CallbackInfo& info) {
  const ColumnFamilyRef* cf = CfArg(info);
  BytesArg a[2];
  if (cf == nullptr || !ReadArgs(info, 2, a)) return info.Env().Undefined();
  return Check(info.Env(), batch_.Put(const_cast<ColumnFamilyRef*>(cf), S(a[0].View()), S(a[1].View())));
}

Napi::Value WriteBatchWrap::Merge(const Napi::CallbackInfo& info) {
  const ColumnFamilyRef* cf = CfArg(info);
  BytesArg a[2];
  if (cf == nullptr || !ReadArgs(info, 2, a)) return info.Env().Undefined();
  return Check(info.Env(), batch_.Merge(const_cast<ColumnFamilyRef*>(cf), S(a[0].View()), S(a[1].View())));
}

Napi::Value WriteBatchWrap::Delete(const Napi::CallbackInfo& info) {
  const ColumnFamilyRef* cf = CfArg(info);
  BytesArg a[1];
  if (cf == nullptr || !ReadArgs(info, 1, a)) return info.Env().Undefined();
  return Check(info.Env(), batch_.Delete(const_cast<ColumnFamilyRef*>(cf), S(a[0].View())));
}

Napi::Value WriteBatchWrap::DeleteRange(const Napi::CallbackInfo& info) {
  const ColumnFamilyRef* cf = CfArg(info);
  BytesArg a[2];
  if (cf == nullptr || !ReadArgs(info, 2, a)) return info.Env().Undefined();
  return Check(info.Env(), batch_.DeleteRange(const_cast<ColumnFamilyRef*>(cf), S(a[0].View()), S(a[1].View())));
}

Napi::Value WriteBatchWrap::Clear(const Napi::CallbackInfo& info) {
  batch_.Clear();
  return info.Env().Undefined();
}

Napi::Value WriteBatchWrap::Count(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), batch_.Count());
}

Napi::Value WriteBatchWrap::ByteSize(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), static_cast<double>(batch_.GetDataSize()));
}

}  // namespace shardflow::binding

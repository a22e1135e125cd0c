#include "objects/snapshot.h"

#include "addon.h"

namespace shardflow::binding {

Napi::Function SnapshotWrap::Init(Napi::Env env) {
  return DefineClass(env, "Snapshot", {InstanceMethod<&SnapshotWrap::Release>("release")});
}

Napi::Object SnapshotWrap::New(Napi::Env env, std::shared_ptr<Snapshot> snap) {
  Napi::Object obj = Addon::Get(env)->snapshot_ctor.New({});
  if (!obj.IsEmpty()) Napi::ObjectWrap<SnapshotWrap>::Unwrap(obj)->snap_ = std::move(snap);
  return obj;
}

bool SnapshotWrap::FromValue(Napi::Value value, std::shared_ptr<Snapshot>* out) {
  out->reset();
  if (value.IsUndefined() || value.IsNull()) return true;
  if (!value.IsObject()) return false;
  Napi::Env env = value.Env();
  bool is = false;
  napi_instanceof(env, value, Addon::Get(env)->snapshot_ctor.Value(), &is);
  if (!is) return false;
  *out = Napi::ObjectWrap<SnapshotWrap>::Unwrap(value.As<Napi::Object>())->snap_;
  return true;
}

Status SnapshotWrap::Arg(Napi::Value value, std::shared_ptr<Snapshot>* out) {
  if (!FromValue(value, out)) return Status::InvalidArgument("snapshot must come from store.snapshot()");
  if (!value.IsUndefined() && !value.IsNull() && !*out) return Status::Closed("snapshot is released");
  return Status::OK();
}

Napi::Value SnapshotWrap::Release(const Napi::CallbackInfo& info) {
  snap_.reset();
  return info.Env().Undefined();
}

}  // namespace shardflow::binding

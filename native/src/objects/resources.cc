#include "objects/resources.h"

#include "addon.h"
#include "util/errors.h"

namespace shardflow::binding {

Napi::Function ResourcesWrap::Init(Napi::Env env) {
  return DefineClass(env, "Resources", {InstanceMethod<&ResourcesWrap::Usage>("usage")});
}

ResourcesWrap::ResourcesWrap(const Napi::CallbackInfo& info) : Napi::ObjectWrap<ResourcesWrap>(info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsNumber() || info[0].As<Napi::Number>().DoubleValue() < 0) {
    ThrowStatus(env, Status::InvalidArgument("memoryBudgetBytes must be a non-negative number"));
    return;
  }
  Status s = Resources::Create(static_cast<uint64_t>(info[0].As<Napi::Number>().DoubleValue()), &resources_);
  if (!s.ok()) ThrowStatus(env, s);
}

bool ResourcesWrap::FromValue(Napi::Value value, std::shared_ptr<Resources>* out) {
  out->reset();
  if (value.IsUndefined() || value.IsNull()) return true;
  if (!value.IsObject()) return false;
  Napi::Env env = value.Env();
  bool is = false;
  napi_instanceof(env, value, Addon::Get(env)->resources_ctor.Value(), &is);
  if (!is) return false;
  *out = Napi::ObjectWrap<ResourcesWrap>::Unwrap(value.As<Napi::Object>())->resources_;
  return *out != nullptr;
}

Napi::Value ResourcesWrap::Usage(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object o = Napi::Object::New(env);
  o.Set("budgetBytes", Napi::Number::New(env, static_cast<double>(resources_->budget())));
  // blockCacheBytes: blocks + memtable reservations; the fixed per-store charges apart.
  const uint64_t fixed = resources_->FixedUsage();
  const uint64_t cache = resources_->CacheUsage();
  o.Set("blockCacheBytes", Napi::Number::New(env, static_cast<double>(cache > fixed ? cache - fixed : 0)));
  o.Set("fixedBytes", Napi::Number::New(env, static_cast<double>(fixed)));
  o.Set("memtableBytes", Napi::Number::New(env, static_cast<double>(resources_->MemtableUsage())));
  return o;
}

}  // namespace shardflow::binding

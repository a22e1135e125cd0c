#include "util/errors.h"

#include "addon.h"

namespace shardflow::binding {

namespace {

const char* CodeOf(Status::Kind k) {
  switch (k) {
    case Status::Kind::kClosed: return "SF_ERR_STORE_CLOSED";
    case Status::Kind::kCorruption: return "SF_ERR_STORE_CORRUPTION";
    case Status::Kind::kIOError: return "SF_ERR_STORE_IO";
    case Status::Kind::kBusy: return "SF_ERR_STORE_BUSY";
    case Status::Kind::kUnknownMergeOperator: return "SF_ERR_STORE_UNKNOWN_MERGE_OPERATOR";
    case Status::Kind::kMergeOperatorMismatch: return "SF_ERR_STORE_MERGE_OPERATOR_MISMATCH";
    case Status::Kind::kInvalidArgument: return "SF_ERR_INVALID_ARGUMENT";
    default: return "SF_ERR_UNKNOWN";
  }
}

struct Slot {
  const char* key;
  Status::Kind kind;
};
constexpr Slot kSlots[] = {
    {"closed", Status::Kind::kClosed},
    {"corruption", Status::Kind::kCorruption},
    {"io", Status::Kind::kIOError},
    {"busy", Status::Kind::kBusy},
    {"unknownMergeOperator", Status::Kind::kUnknownMergeOperator},
    {"mergeOperatorMismatch", Status::Kind::kMergeOperatorMismatch},
    {"invalidArgument", Status::Kind::kInvalidArgument},
};

}  // namespace

Napi::Value MakeError(Napi::Env env, const Status& s) {
  Napi::EscapableHandleScope scope(env);
  Addon* addon = Addon::Get(env);
  size_t idx = static_cast<size_t>(s.kind());
  Napi::String msg = Napi::String::New(env, s.message());
  if (addon != nullptr && idx < addon->error_ctors.size() && !addon->error_ctors[idx].IsEmpty()) {
    Napi::Object opts = Napi::Object::New(env);
    opts.Set("status", msg);
    Napi::Object err = addon->error_ctors[idx].New({msg, opts});
    if (!env.IsExceptionPending() && !err.IsEmpty()) return scope.Escape(err);
    // The constructor threw: report that instead of losing it.
    return scope.Escape(env.GetAndClearPendingException().Value());
  }
  Napi::Error err = Napi::Error::New(env, s.message());
  err.Set("code", Napi::String::New(env, CodeOf(s.kind())));
  err.Set("status", msg);
  return scope.Escape(err.Value());
}

Napi::Value ThrowStatus(Napi::Env env, const Status& s) {
  Napi::Value err = MakeError(env, s);
  napi_throw(env, err);
  return env.Undefined();
}

Napi::Value RejectedPromise(Napi::Env env, const Status& s) {
  auto d = Napi::Promise::Deferred::New(env);
  d.Reject(MakeError(env, s));
  return d.Promise();
}

Napi::Value SetErrorClasses(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsObject()) {
    return ThrowStatus(env, Status::InvalidArgument("setErrorClasses expects an object"));
  }
  Napi::Object classes = info[0].As<Napi::Object>();
  Addon* addon = Addon::Get(env);
  for (const Slot& slot : kSlots) {
    Napi::Value v = classes.Get(slot.key);
    if (v.IsFunction()) {
      addon->error_ctors[static_cast<size_t>(slot.kind)] = Napi::Persistent(v.As<Napi::Function>());
    }
  }
  return env.Undefined();
}

}  // namespace shardflow::binding

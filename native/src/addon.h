// Per-environment state of the addon (main thread and each worker thread get their own):
// constructors of the JS-visible classes, the error classes handed over by JS
// (src/storage/native.ts calls setErrorClasses), and the stores that are open, which
// the environment cleanup hook closes. No bare globals: everything hangs off
// napi_set_instance_data.
#ifndef SHARDFLOW_ADDON_H_
#define SHARDFLOW_ADDON_H_

#include <napi.h>

#include <array>
#include <unordered_set>

#include "shardflow/status.h"

namespace shardflow::binding {

class StoreWrap;

struct Addon {
  Napi::FunctionReference store_ctor;
  Napi::FunctionReference snapshot_ctor;
  Napi::FunctionReference iterator_ctor;
  Napi::FunctionReference write_batch_ctor;
  Napi::FunctionReference resources_ctor;
  // Indexed by Status::Kind; empty until JS registers the classes.
  std::array<Napi::FunctionReference, 8> error_ctors;
  std::unordered_set<StoreWrap*> open_stores;

  static Addon* Get(Napi::Env env) { return env.GetInstanceData<Addon>(); }
};

}  // namespace shardflow::binding

#endif  // SHARDFLOW_ADDON_H_

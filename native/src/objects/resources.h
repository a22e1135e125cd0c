// ResourcesWrap: JS-visible handle on shardflow::Resources (one block cache + one
// write-buffer manager). `new Resources(memoryBudgetBytes)`; usage() reports bytes.
// Stores opened with it keep their own reference, so dropping this handle is safe.
#ifndef SHARDFLOW_OBJECTS_RESOURCES_H_
#define SHARDFLOW_OBJECTS_RESOURCES_H_

#include <napi.h>

#include <memory>

#include "shardflow/store.h"

namespace shardflow::binding {

class ResourcesWrap : public Napi::ObjectWrap<ResourcesWrap> {
 public:
  static Napi::Function Init(Napi::Env env);
  explicit ResourcesWrap(const Napi::CallbackInfo& info);
  // `value` must be a ResourcesWrap (checked) or undefined (-> null).
  static bool FromValue(Napi::Value value, std::shared_ptr<Resources>* out);

 private:
  Napi::Value Usage(const Napi::CallbackInfo& info);
  std::shared_ptr<Resources> resources_;
};

}  // namespace shardflow::binding

#endif  // SHARDFLOW_OBJECTS_RESOURCES_H_

// SnapshotWrap: JS-visible handle on a shardflow::Snapshot. release() drops this handle's
// reference; the RocksDB snapshot is released once no in-flight read or iterator uses it
// either, or when the store closes. JS thread only.
#ifndef SHARDFLOW_OBJECTS_SNAPSHOT_H_
#define SHARDFLOW_OBJECTS_SNAPSHOT_H_

#include <napi.h>

#include <memory>

#include "shardflow/store.h"

namespace shardflow::binding {

class SnapshotWrap : public Napi::ObjectWrap<SnapshotWrap> {
 public:
  static Napi::Function Init(Napi::Env env);
  explicit SnapshotWrap(const Napi::CallbackInfo& info) : Napi::ObjectWrap<SnapshotWrap>(info) {}
  static Napi::Object New(Napi::Env env, std::shared_ptr<Snapshot> snap);
  // Null after release(). `value` must be a SnapshotWrap (checked) or undefined.
  static bool FromValue(Napi::Value value, std::shared_ptr<Snapshot>* out);
  // A read's optional snapshot argument: OK with *out null for undefined, InvalidArgument
  // for anything but a SnapshotWrap, Closed for a released one.
  static Status Arg(Napi::Value value, std::shared_ptr<Snapshot>* out);
  const std::shared_ptr<Snapshot>& snapshot() const { return snap_; }

 private:
  Napi::Value Release(const Napi::CallbackInfo& info);
  std::shared_ptr<Snapshot> snap_;
};

}  // namespace shardflow::binding

#endif  // SHARDFLOW_OBJECTS_SNAPSHOT_H_

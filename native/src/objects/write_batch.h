// WriteBatchWrap: a rocksdb::WriteBatch built on the JS thread (sync calls, no copies of
// Uint8Array arguments beyond the batch's own buffer), bound to the store it was made
// for: `new WriteBatch(store)`. Column families are given by index. The batch records
// through ColumnFamilyRef (shardflow/write_batch.h), so it stays valid after the store
// closes; writing it then fails with StoreClosedError. JS thread only.
#ifndef SHARDFLOW_OBJECTS_WRITE_BATCH_H_
#define SHARDFLOW_OBJECTS_WRITE_BATCH_H_

#include <napi.h>

#include <memory>

#include <rocksdb/write_batch.h>

#include "shardflow/store.h"

namespace shardflow::binding {

class StoreWrap;

class WriteBatchWrap : public Napi::ObjectWrap<WriteBatchWrap> {
 public:
  static Napi::Function Init(Napi::Env env);
  explicit WriteBatchWrap(const Napi::CallbackInfo& info);
  // Null when `value` is not a WriteBatchWrap.
  static WriteBatchWrap* FromValue(Napi::Value value);
  const rocksdb::WriteBatch& batch() const { return batch_; }
  const Store* store() const { return store_.get(); }

 private:
  Napi::Value Put(const Napi::CallbackInfo& info);
  Napi::Value Merge(const Napi::CallbackInfo& info);
  Napi::Value Delete(const Napi::CallbackInfo& info);
  Napi::Value DeleteRange(const Napi::CallbackInfo& info);
  Napi::Value Clear(const Napi::CallbackInfo& info);
  Napi::Value Count(const Napi::CallbackInfo& info);
  Napi::Value ByteSize(const Napi::CallbackInfo& info);
  const ColumnFamilyRef* CfArg(const Napi::CallbackInfo& info);

  std::shared_ptr<Store> store_;
  rocksdb::WriteBatch batch_;
};

}  // namespace shardflow::binding

#endif  // SHARDFLOW_OBJECTS_WRITE_BATCH_H_

// The reads of an indexed WriteBatchWrap (write_batch.h): get and iterator, the batch on
// top of its store. Each read counts as in-flight work of the store (close() waits for it)
// and, until it settles, as a read of the batch (IndexedBatch::BeginRead: no change of the
// batch meanwhile).
#include "objects/iterator.h"
#include "objects/snapshot.h"
#include "objects/store.h"
#include "objects/worker.h"
#include "objects/write_batch.h"
#include "util/bytes.h"
#include "util/errors.h"

namespace shardflow::binding {

bool WriteBatchWrap::CheckReadable(Napi::Env env, Napi::Value cf_arg, int* cf, Status* error) {
  if (!indexed_) {
    *error = Status::InvalidArgument("only an indexed batch (store.indexedBatch()) reads");
  } else if (!owner_->is_open() || owner_->store() != store_) {
    *error = Status::Closed("store is closed");
  } else if (!cf_arg.IsNumber() || store_->Ref(*cf = cf_arg.As<Napi::Number>().Int32Value()) == nullptr) {
    *error = Status::InvalidArgument("unknown column family index");
  } else {
    return true;
  }
  return false;
}

// get(cf, key, snapshot?) -> Promise<Buffer | undefined>
Napi::Value WriteBatchWrap::Get(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int cf = 0;
  Status s;
  if (!CheckReadable(env, info.Length() > 0 ? info[0] : env.Undefined(), &cf, &s)) return RejectedPromise(env, s);
  BytesArg key;
  if (info.Length() < 2 || !key.Read(info[1])) return RejectedPromise(env, Status::InvalidArgument("key must be a string or Uint8Array"));
  std::shared_ptr<Snapshot> snap;
  s = SnapshotWrap::Arg(info.Length() > 2 ? info[2] : env.Undefined(), &snap);
  if (!s.ok()) return RejectedPromise(env, s);
  auto* worker = new GetWorker(env, owner_, cf, key.Copy(), std::move(snap), indexed_);
  return worker->Start();
}

// iterator(cf, { lower?, upper?, reverse?, keysOnly?, snapshot? }) -> Iterator
Napi::Value WriteBatchWrap::NewIterator(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int cf = 0;
  Status s;
  if (!CheckReadable(env, info.Length() > 0 ? info[0] : env.Undefined(), &cf, &s)) return ThrowStatus(env, s);
  return IteratorWrap::Make(env, owner_, cf, info.Length() > 1 ? info[1] : env.Undefined(), indexed_);
}

}  // namespace shardflow::binding

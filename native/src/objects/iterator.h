// IteratorWrap: JS-visible chunked iterator made by Store#iterator(). next(maxEntries,
// maxBytes) resolves to [keys, keyOffsets, values | undefined, valueOffsets | undefined,
// done]: entry i's key is keys[keyOffsets[i], keyOffsets[i+1]) (Buffer, Uint32Array).
// One chunk in flight at a time (a second next() rejects with StoreBusyError). close()
// is synchronous and idempotent; with a chunk in flight it takes effect when the chunk
// settles. JS thread only; chunks run on the pool and count as in-flight store work, and,
// while the iterator reads an indexed batch's own index, as reads of that batch
// (IndexedBatch::BeginRead: the batch refuses changes meanwhile).
#ifndef SHARDFLOW_OBJECTS_ITERATOR_H_
#define SHARDFLOW_OBJECTS_ITERATOR_H_

#include <napi.h>

#include <memory>

#include "shardflow/indexed_batch.h"
#include "shardflow/iterator.h"

namespace shardflow::binding {

class StoreWrap;
class ChunkWorker;

class IteratorWrap : public Napi::ObjectWrap<IteratorWrap> {
 public:
  static Napi::Function Init(Napi::Env env);
  explicit IteratorWrap(const Napi::CallbackInfo& info) : Napi::ObjectWrap<IteratorWrap>(info) {}
  // iterator(cf, { lower?, upper?, reverse?, keysOnly?, snapshot? }) of store.iterator() and
  // of an indexed batch's iterator() (`batch` non-null): parses the options, makes the
  // iterator, or throws (InvalidArgumentError, StoreClosedError) and returns undefined.
  static Napi::Value Make(Napi::Env env, StoreWrap* owner, int cf, Napi::Value options,
                          std::shared_ptr<IndexedBatch> batch);

 private:
  friend class ChunkWorker;
  Napi::Value Next(const Napi::CallbackInfo& info);
  Napi::Value Close(const Napi::CallbackInfo& info);
  void ChunkSettled();

  StoreWrap* owner_ = nullptr;
  Napi::ObjectReference owner_ref_;
  std::unique_ptr<Iterator> it_;
  bool busy_ = false;
  bool close_pending_ = false;
};

}  // namespace shardflow::binding

#endif  // SHARDFLOW_OBJECTS_ITERATOR_H_

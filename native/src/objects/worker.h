// Base of every async store operation: Run() executes on a libuv pool thread and must not
// touch JS (node-addon-api AsyncWorker contract); the promise settles on the JS thread.
// A worker counts as in-flight work of its store from construction to settlement, which
// is what close() waits for. It keeps the store's JS object (and so the native store)
// alive until then.
#ifndef SHARDFLOW_OBJECTS_WORKER_H_
#define SHARDFLOW_OBJECTS_WORKER_H_

#include <napi.h>

#include <memory>
#include <string>

#include "objects/store.h"
#include "shardflow/indexed_batch.h"
#include "shardflow/status.h"
#include "util/errors.h"

namespace shardflow::binding {

class StoreWorker : public Napi::AsyncWorker {
 public:
  // counted: false only for the close worker itself.
  StoreWorker(Napi::Env env, StoreWrap* owner, bool counted = true)
      : Napi::AsyncWorker(env, "shardflow:store"),
        owner_(owner),
        deferred_(Napi::Promise::Deferred::New(env)),
        owner_ref_(Napi::Persistent(owner->Value())),
        counted_(counted) {
    if (counted_) owner_->BeginOp();
  }

  // Queues the worker (which deletes itself after settling) and returns its promise.
  Napi::Promise Start() {
    Napi::Promise p = deferred_.Promise();
    Queue();
    return p;
  }

 protected:
  // Pool thread. Sets status_.
  virtual void Run() noexcept = 0;
  // JS thread, only when status_ is OK.
  virtual Napi::Value Result(Napi::Env env) { return env.Undefined(); }
  // JS thread, after the promise settled (close bookkeeping).
  virtual void Settled() {}

  Status status_;
  StoreWrap* owner_;

  void OnOK() override {
    Napi::Env env = Env();
    if (status_.ok()) {
      deferred_.Resolve(Result(env));
    } else {
      deferred_.Reject(MakeError(env, status_));
    }
    Finish();
  }
  void OnError(const Napi::Error& e) override {
    deferred_.Reject(e.Value());
    Finish();
  }

 private:
  void Execute() override { Run(); }
  void Finish() {
    Settled();
    if (counted_) owner_->EndOp();
  }

  Napi::Promise::Deferred deferred_;
  Napi::ObjectReference owner_ref_;
  bool counted_;
};

// A point read: store.get(cf, key, snapshot?), or an indexed batch's get (`batch` non-null:
// the batch on top of the store, and a read of the batch until it settles, see
// IndexedBatch::BeginRead). Resolves to a Buffer, or undefined when absent.
class GetWorker final : public StoreWorker {
 public:
  GetWorker(Napi::Env env, StoreWrap* owner, int cf, std::string key, std::shared_ptr<Snapshot> snap,
            std::shared_ptr<IndexedBatch> batch = nullptr)
      : StoreWorker(env, owner), store_(owner->store()), batch_(std::move(batch)), cf_(cf), key_(std::move(key)),
        snap_(std::move(snap)) {
    if (batch_) batch_->BeginRead();
  }

 protected:
  void Run() noexcept override {
    status_ = batch_ ? store_->GetFromBatch(cf_, snap_.get(), batch_.get(), key_, &value_, &found_)
                     : store_->Get(cf_, snap_.get(), key_, &value_, &found_);
  }
  Napi::Value Result(Napi::Env env) override {
    if (!found_) return env.Undefined();
    return Napi::Buffer<char>::Copy(env, value_.data(), value_.size());
  }
  void Settled() override {
    if (batch_) batch_->EndRead();
  }

 private:
  std::shared_ptr<Store> store_;
  std::shared_ptr<IndexedBatch> batch_;
  int cf_;
  std::string key_;
  std::shared_ptr<Snapshot> snap_;
  std::string value_;
  bool found_ = false;
};

}  // namespace shardflow::binding

#endif  // SHARDFLOW_OBJECTS_WORKER_H_

// Base of every async store operation: Run() executes on a libuv pool thread and must not
// touch JS (node-addon-api AsyncWorker contract); the promise settles on the JS thread.
// A worker counts as in-flight work of its store from construction to settlement, which
// is what close() waits for. It keeps the store's JS object (and so the native store)
// alive until then.
#ifndef SHARDFLOW_OBJECTS_WORKER_H_
#define SHARDFLOW_OBJECTS_WORKER_H_

#include <napi.h>

#include "objects/store.h"
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

}  // namespace shardflow::binding

#endif  // SHARDFLOW_OBJECTS_WORKER_H_

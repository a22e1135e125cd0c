// StoreWrap: the JS-visible native store (class `Store` of the addon). A thin shell over
// shardflow::Store: argument conversion, one AsyncWorker per operation, and the
// open/close state machine:
//
//   new --open()--> opening --ok--> open --close()--> closing --in-flight = 0--> closed
//                      \--fail--> closed
//
// close() stops new work at once (StoreClosedError), waits for in-flight work, then closes
// the database on a pool thread; calling it again returns a promise for the same close.
// Threading: JS thread only (the workers' Run() excepted). Lifetimes: workers, iterators
// and batches keep the JS object alive; the environment cleanup hook closes stores still
// open when the environment (main thread or worker thread) goes away.
#ifndef SHARDFLOW_OBJECTS_STORE_H_
#define SHARDFLOW_OBJECTS_STORE_H_

#include <napi.h>

#include <memory>
#include <vector>

#include "shardflow/store.h"

namespace shardflow::binding {

// Reads a JS merge operator declaration ({ name, fields?, defaultRule? }).
Status ParseMergeOperator(Napi::Object o, MergeOperatorSpec* spec);

class StoreWrap : public Napi::ObjectWrap<StoreWrap> {
 public:
  static Napi::Function Init(Napi::Env env);
  explicit StoreWrap(const Napi::CallbackInfo& info);
  ~StoreWrap() override;

  void BeginOp() { ++inflight_; }
  void EndOp();
  // Non-null only while open.
  const std::shared_ptr<Store>& store() const { return store_; }
  bool is_open() const { return state_ == State::kOpen; }
  // Environment teardown: close now if nothing is in flight.
  void CloseForTeardown();

 private:
  friend class OpenWorker;
  friend class CloseWorker;
  enum class State { kNew, kOpening, kOpen, kClosing, kClosed };

  Napi::Value Open(const Napi::CallbackInfo& info);
  Napi::Value Get(const Napi::CallbackInfo& info);
  Napi::Value MultiGet(const Napi::CallbackInfo& info);
  Napi::Value Put(const Napi::CallbackInfo& info);
  Napi::Value Merge(const Napi::CallbackInfo& info);
  Napi::Value Delete(const Napi::CallbackInfo& info);
  Napi::Value Write(const Napi::CallbackInfo& info);
  Napi::Value Flush(const Napi::CallbackInfo& info);
  Napi::Value CompactRange(const Napi::CallbackInfo& info);
  Napi::Value Checkpoint(const Napi::CallbackInfo& info);
  Napi::Value Property(const Napi::CallbackInfo& info);
  Napi::Value Stats(const Napi::CallbackInfo& info);
  Napi::Value NewSnapshot(const Napi::CallbackInfo& info);
  Napi::Value NewIterator(const Napi::CallbackInfo& info);
  Napi::Value Close(const Napi::CallbackInfo& info);

  // Checks state and the column family index argument; on failure returns a rejected
  // promise in *rejected.
  bool CheckOpenAndCf(const Napi::CallbackInfo& info, size_t cf_arg, int* cf, Napi::Value* rejected);
  void StartClose();
  void FinishClose(const Status& s);

  State state_ = State::kNew;
  int inflight_ = 0;
  std::shared_ptr<Store> store_;
  std::vector<Napi::Promise::Deferred> close_waiters_;
  Status close_status_;
};

}  // namespace shardflow::binding

#endif  // SHARDFLOW_OBJECTS_STORE_H_

#include "objects/iterator.h"

#include <cstring>

#include "addon.h"
#include "objects/snapshot.h"
#include "objects/store.h"
#include "objects/worker.h"
#include "util/bytes.h"
#include "util/errors.h"

namespace shardflow::binding {

class ChunkWorker final : public StoreWorker {
 public:
  ChunkWorker(Napi::Env env, IteratorWrap* iter, uint32_t max_entries, uint64_t max_bytes)
      : StoreWorker(env, iter->owner_),
        iter_(iter),
        iter_ref_(Napi::Persistent(iter->Value())),
        it_(iter->it_.get()),
        batch_(it_->reading_batch()),
        max_entries_(max_entries),
        max_bytes_(max_bytes) {
    if (batch_) batch_->BeginRead();
  }

 protected:
  void Run() noexcept override { status_ = it_->NextChunk(max_entries_, max_bytes_, &chunk_); }

  Napi::Value Result(Napi::Env env) override {
    Napi::Array out = Napi::Array::New(env, 5);
    out.Set(0u, Napi::Buffer<char>::Copy(env, chunk_.keys.data(), chunk_.keys.size()));
    out.Set(1u, Offsets(env, chunk_.key_offsets));
    if (chunk_.value_offsets.empty()) {
      out.Set(2u, env.Undefined());
      out.Set(3u, env.Undefined());
    } else {
      out.Set(2u, Napi::Buffer<char>::Copy(env, chunk_.values.data(), chunk_.values.size()));
      out.Set(3u, Offsets(env, chunk_.value_offsets));
    }
    out.Set(4u, Napi::Boolean::New(env, chunk_.done));
    return out;
  }

  void Settled() override {
    if (batch_) batch_->EndRead();
    iter_->ChunkSettled();
  }

 private:
  static Napi::Value Offsets(Napi::Env env, const std::vector<uint32_t>& v) {
    Napi::Uint32Array a = Napi::Uint32Array::New(env, v.size());
    if (!v.empty()) std::memcpy(a.Data(), v.data(), v.size() * sizeof(uint32_t));
    return a;
  }

  IteratorWrap* iter_;
  Napi::ObjectReference iter_ref_;
  Iterator* it_;
  std::shared_ptr<IndexedBatch> batch_;  // the batch whose own index this chunk reads, if any
  uint32_t max_entries_;
  uint64_t max_bytes_;
  Chunk chunk_;
};

Napi::Function IteratorWrap::Init(Napi::Env env) {
  return DefineClass(env, "Iterator",
                     {
                         InstanceMethod<&IteratorWrap::Next>("next"),
                         InstanceMethod<&IteratorWrap::Close>("close"),
                     });
}

namespace {
Status ParseOptions(Napi::Value v, IteratorOptions* options, std::shared_ptr<Snapshot>* snap) {
  if (!v.IsObject()) return Status::OK();
  Napi::Object o = v.As<Napi::Object>();
  for (const char* name : {"lower", "upper"}) {
    Napi::Value b = o.Get(name);
    if (b.IsUndefined() || b.IsNull()) continue;
    BytesArg bytes;
    if (!bytes.Read(b)) return Status::InvalidArgument("iterator bounds must be strings or Uint8Arrays");
    (std::strcmp(name, "lower") == 0 ? options->lower : options->upper) = bytes.Copy();
  }
  options->reverse = o.Get("reverse").ToBoolean().Value();
  options->keys_only = o.Get("keysOnly").ToBoolean().Value();
  return SnapshotWrap::Arg(o.Get("snapshot"), snap);
}
}  // namespace

Napi::Value IteratorWrap::Make(Napi::Env env, StoreWrap* owner, int cf, Napi::Value options,
                               std::shared_ptr<IndexedBatch> batch) {
  IteratorOptions parsed;
  std::shared_ptr<Snapshot> snap;
  Status s = ParseOptions(options, &parsed, &snap);
  std::unique_ptr<Iterator> it;
  if (s.ok()) s = owner->store()->NewIterator(cf, std::move(parsed), std::move(snap), std::move(batch), &it);
  if (!s.ok()) return ThrowStatus(env, s);
  Napi::Object obj = Addon::Get(env)->iterator_ctor.New({});
  if (obj.IsEmpty()) return obj;
  IteratorWrap* self = Napi::ObjectWrap<IteratorWrap>::Unwrap(obj);
  self->owner_ = owner;
  self->owner_ref_ = Napi::Persistent(owner->Value());
  self->it_ = std::move(it);
  return obj;
}

Napi::Value IteratorWrap::Next(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!it_ || owner_ == nullptr || !owner_->is_open()) {
    return RejectedPromise(env, Status::Closed(it_ ? "store is closed" : "iterator is closed"));
  }
  if (busy_) return RejectedPromise(env, Status::Busy("a chunk of this iterator is already in flight"));
  uint32_t max_entries = 1024;
  double max_bytes = 8 << 20;
  if (info.Length() >= 1 && info[0].IsNumber()) max_entries = info[0].As<Napi::Number>().Uint32Value();
  if (info.Length() >= 2 && info[1].IsNumber()) max_bytes = info[1].As<Napi::Number>().DoubleValue();
  if (max_entries == 0 || !(max_bytes >= 1)) {
    return RejectedPromise(env, Status::InvalidArgument("chunk size must be >= 1"));
  }
  busy_ = true;
  auto* worker = new ChunkWorker(env, this, max_entries, static_cast<uint64_t>(max_bytes));
  return worker->Start();
}

void IteratorWrap::ChunkSettled() {
  busy_ = false;
  if (close_pending_) {
    close_pending_ = false;
    it_.reset();
    owner_ref_.Reset();
  }
}

Napi::Value IteratorWrap::Close(const Napi::CallbackInfo& info) {
  if (busy_) {
    close_pending_ = true;
  } else {
    it_.reset();  // deletes the RocksDB iterator (file purges run in the background)
    owner_ref_.Reset();
  }
  return info.Env().Undefined();
}

}  // namespace shardflow::binding

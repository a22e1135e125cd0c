#include "objects/store.h"

#include <cstring>

#include "addon.h"
#include "objects/iterator.h"
#include "objects/resources.h"
#include "objects/snapshot.h"
#include "objects/worker.h"
#include "objects/write_batch.h"
#include "util/bytes.h"
#include "util/errors.h"

#include <rocksdb/write_batch.h>

namespace shardflow::binding {

// ---------------------------------------------------------------------------------------
// Config conversion (JS thread). The TS layer validated shapes; this re-checks types so
// that a direct caller gets InvalidArgument instead of garbage.

namespace {

bool ParseFieldRule(const std::string& s, FieldRule* out) {
  if (s == "sum") *out = FieldRule::kSum;
  else if (s == "max") *out = FieldRule::kMax;
  else if (s == "min") *out = FieldRule::kMin;
  else if (s == "lww") *out = FieldRule::kLww;
  else if (s == "set") *out = FieldRule::kSet;
  else return false;
  return true;
}

}  // namespace

Status ParseMergeOperator(Napi::Object o, MergeOperatorSpec* spec) {
  Napi::Value name = o.Get("name");
  if (!name.IsString()) return Status::InvalidArgument("mergeOperator.name must be a string");
  spec->name = name.As<Napi::String>().Utf8Value();
  Napi::Value fields = o.Get("fields");
  if (fields.IsObject() && !fields.IsArray()) {
    Napi::Object f = fields.As<Napi::Object>();
    Napi::Array keys = f.GetPropertyNames();
    for (uint32_t i = 0; i < keys.Length(); ++i) {
      Napi::Value k = keys.Get(i);
      Napi::Value r = f.Get(k);
      RecordField field;
      field.name = k.As<Napi::String>().Utf8Value();
      if (!r.IsString() || !ParseFieldRule(r.As<Napi::String>().Utf8Value(), &field.rule)) {
        return Status::InvalidArgument("record field " + field.name +
                                       ": rule must be sum, max, min, lww or set");
      }
      spec->fields.push_back(std::move(field));
    }
  }
  Napi::Value def = o.Get("defaultRule");
  if (def.IsString() && !ParseFieldRule(def.As<Napi::String>().Utf8Value(), &spec->default_rule)) {
    return Status::InvalidArgument("record defaultRule must be sum, max, min, lww or set");
  }
  return Status::OK();
}

namespace {

Status ParseCompactionFilter(Napi::Object o, CompactionFilterSpec* spec) {
  Napi::Value kind = o.Get("kind");
  if (!kind.IsString()) return Status::InvalidArgument("compactionFilter.kind must be a string");
  spec->kind = kind.As<Napi::String>().Utf8Value();
  if (o.Get("field").IsString()) spec->field = o.Get("field").As<Napi::String>().Utf8Value();
  if (o.Get("ttlMs").IsNumber()) spec->ttl_ms = o.Get("ttlMs").As<Napi::Number>().Int64Value();
  if (o.Get("graceMs").IsNumber()) spec->grace_ms = o.Get("graceMs").As<Napi::Number>().Int64Value();
  Napi::Value prefixes = o.Get("prefixes");
  if (prefixes.IsArray()) {
    Napi::Array a = prefixes.As<Napi::Array>();
    for (uint32_t i = 0; i < a.Length(); ++i) {
      BytesArg b;
      if (!b.Read(a.Get(i))) return Status::InvalidArgument("prefixes must be strings or Uint8Arrays");
      spec->prefixes.push_back(b.Copy());
    }
  }
  return Status::OK();
}

Status ParseConfig(Napi::Value v, StoreConfig* config) {
  if (!v.IsObject()) return Status::InvalidArgument("open expects an options object");
  Napi::Object o = v.As<Napi::Object>();
  if (!o.Get("path").IsString()) return Status::InvalidArgument("path must be a string");
  config->path = o.Get("path").As<Napi::String>().Utf8Value();
  Napi::Value cim = o.Get("createIfMissing");
  config->create_if_missing = cim.IsBoolean() ? cim.As<Napi::Boolean>().Value() : true;
  Napi::Value was = o.Get("walArchiveSeconds");
  if (!was.IsUndefined()) {
    if (!was.IsNumber() || was.As<Napi::Number>().DoubleValue() < 0) return Status::InvalidArgument("walArchiveSeconds must be a number >= 0");
    config->wal_archive_seconds = static_cast<uint64_t>(was.As<Napi::Number>().DoubleValue());
  }
  Napi::Value wc = o.Get("walCompression");
  if (!wc.IsUndefined()) {
    if (!wc.IsBoolean()) return Status::InvalidArgument("walCompression must be a boolean");
    config->wal_compression = wc.As<Napi::Boolean>().Value();
  }
  if (!ResourcesWrap::FromValue(o.Get("resources"), &config->resources)) {
    return Status::InvalidArgument("resources must come from SharedResources.create()");
  }
  Napi::Value cfs = o.Get("columnFamilies");
  if (!cfs.IsArray()) return Status::InvalidArgument("columnFamilies must be an array");
  Napi::Array a = cfs.As<Napi::Array>();
  for (uint32_t i = 0; i < a.Length(); ++i) {
    Napi::Value e = a.Get(i);
    if (!e.IsObject()) return Status::InvalidArgument("column family entries must be objects");
    Napi::Object c = e.As<Napi::Object>();
    ColumnFamilyConfig cf;
    if (!c.Get("name").IsString()) return Status::InvalidArgument("column family name must be a string");
    cf.name = c.Get("name").As<Napi::String>().Utf8Value();
    Napi::Value mo = c.Get("mergeOperator");
    if (mo.IsObject()) {
      MergeOperatorSpec spec;
      Status s = ParseMergeOperator(mo.As<Napi::Object>(), &spec);
      if (!s.ok()) return s;
      cf.merge_operator = std::move(spec);
    }
    Napi::Value cfl = c.Get("compactionFilter");
    if (cfl.IsObject()) {
      CompactionFilterSpec spec;
      Status s = ParseCompactionFilter(cfl.As<Napi::Object>(), &spec);
      if (!s.ok()) return s;
      cf.compaction_filter = std::move(spec);
    }
    if (c.Get("prefixLength").IsNumber()) cf.prefix_length = c.Get("prefixLength").As<Napi::Number>().Uint32Value();
    if (c.Get("memtableInsertHint").IsBoolean()) {
      cf.memtable_insert_hint = c.Get("memtableInsertHint").As<Napi::Boolean>().Value();
    }
    if (c.Get("memtableBytes").IsNumber()) {
      cf.memtable_bytes = static_cast<uint64_t>(c.Get("memtableBytes").As<Napi::Number>().Int64Value());
    }
    if (c.Get("bloomBitsPerKey").IsNumber()) {
      cf.bloom_bits_per_key = c.Get("bloomBitsPerKey").As<Napi::Number>().DoubleValue();
    }
    config->column_families.push_back(std::move(cf));
  }
  return Status::OK();
}

bool SyncArg(const Napi::CallbackInfo& info, size_t i) {
  return info.Length() > i && info[i].IsBoolean() && info[i].As<Napi::Boolean>().Value();
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Workers

class OpenWorker final : public StoreWorker {
 public:
  OpenWorker(Napi::Env env, StoreWrap* owner, StoreConfig config)
      : StoreWorker(env, owner), config_(std::move(config)) {}

 protected:
  void Run() noexcept override { status_ = Store::Open(config_, &store_); }
  Napi::Value Result(Napi::Env env) override {
    const std::vector<std::string>& names = owner_->store_->ColumnFamilyNames();
    Napi::Array a = Napi::Array::New(env, names.size());
    for (uint32_t i = 0; i < names.size(); ++i) a.Set(i, Napi::String::New(env, names[i]));
    return a;
  }
  void Settled() override {}

 private:
  StoreConfig config_;
  std::shared_ptr<Store> store_;

  // Runs before the promise settles: publish the store so Result() and later calls see it.
  void OnOK() override {
    if (status_.ok()) {
      owner_->store_ = store_;
      if (owner_->state_ == StoreWrap::State::kOpening) owner_->state_ = StoreWrap::State::kOpen;
      Addon::Get(Env())->open_stores.insert(owner_);
    } else if (owner_->state_ == StoreWrap::State::kOpening) {
      owner_->state_ = StoreWrap::State::kClosed;
    }
    StoreWorker::OnOK();
  }
};

class CloseWorker final : public StoreWorker {
 public:
  CloseWorker(Napi::Env env, StoreWrap* owner) : StoreWorker(env, owner, /*counted=*/false),
                                                 store_(owner->store_) {}

 protected:
  void Run() noexcept override { status_ = store_->Close(); }
  void Settled() override { owner_->FinishClose(status_); }

 private:
  std::shared_ptr<Store> store_;
};

namespace {

// Resolves to [data: Buffer, lengths: Int32Array] (-1 = missing); JS slices the buffer.
class MultiGetWorker final : public StoreWorker {
 public:
  MultiGetWorker(Napi::Env env, StoreWrap* owner, int cf, std::vector<std::string> keys,
                 std::shared_ptr<Snapshot> snap)
      : StoreWorker(env, owner), store_(owner->store()), cf_(cf), keys_(std::move(keys)), snap_(std::move(snap)) {}

 protected:
  void Run() noexcept override {
    status_ = store_->MultiGet(cf_, snap_.get(), keys_, &values_, &found_);
    if (!status_.ok()) return;
    size_t total = 0;
    for (size_t i = 0; i < values_.size(); ++i) total += found_[i] ? values_[i].size() : 0;
    data_.reserve(total);
    lengths_.resize(values_.size());
    for (size_t i = 0; i < values_.size(); ++i) {
      if (found_[i]) {
        if (values_[i].size() > INT32_MAX) {
          status_ = Status::InvalidArgument("value larger than 2 GiB");
          return;
        }
        data_.append(values_[i]);
        lengths_[i] = static_cast<int32_t>(values_[i].size());
      } else {
        lengths_[i] = -1;
      }
    }
  }
  Napi::Value Result(Napi::Env env) override {
    Napi::Array out = Napi::Array::New(env, 2);
    out.Set(0u, Napi::Buffer<char>::Copy(env, data_.data(), data_.size()));
    Napi::Int32Array lens = Napi::Int32Array::New(env, lengths_.size());
    if (!lengths_.empty()) std::memcpy(lens.Data(), lengths_.data(), lengths_.size() * sizeof(int32_t));
    out.Set(1u, lens);
    return out;
  }

 private:
  std::shared_ptr<Store> store_;
  int cf_;
  std::vector<std::string> keys_;
  std::shared_ptr<Snapshot> snap_;
  std::vector<std::string> values_;
  std::vector<bool> found_;
  std::string data_;
  std::vector<int32_t> lengths_;
};

class WriteOneWorker final : public StoreWorker {
 public:
  enum class Op { kPut, kMerge, kDelete };
  WriteOneWorker(Napi::Env env, StoreWrap* owner, Op op, int cf, std::string key, std::string value, bool sync)
      : StoreWorker(env, owner), store_(owner->store()), op_(op), cf_(cf), key_(std::move(key)),
        value_(std::move(value)), sync_(sync) {}

 protected:
  void Run() noexcept override {
    switch (op_) {
      case Op::kPut: status_ = store_->Put(cf_, key_, value_, sync_); break;
      case Op::kMerge: status_ = store_->Merge(cf_, key_, value_, sync_); break;
      case Op::kDelete: status_ = store_->Delete(cf_, key_, sync_); break;
    }
  }

 private:
  std::shared_ptr<Store> store_;
  Op op_;
  int cf_;
  std::string key_;
  std::string value_;
  bool sync_;
};

class WriteBatchWorker final : public StoreWorker {
 public:
  WriteBatchWorker(Napi::Env env, StoreWrap* owner, rocksdb::WriteBatch batch, bool sync)
      : StoreWorker(env, owner), store_(owner->store()), batch_(std::move(batch)), sync_(sync) {}

 protected:
  void Run() noexcept override { status_ = store_->Write(&batch_, sync_); }

 private:
  std::shared_ptr<Store> store_;
  rocksdb::WriteBatch batch_;  // taken from the JS batch, which is empty and reusable at once
  bool sync_;
};

class FlushWorker final : public StoreWorker {
 public:
  FlushWorker(Napi::Env env, StoreWrap* owner) : StoreWorker(env, owner), store_(owner->store()) {}

 protected:
  void Run() noexcept override { status_ = store_->Flush(); }

 private:
  std::shared_ptr<Store> store_;
};

class CompactWorker final : public StoreWorker {
 public:
  CompactWorker(Napi::Env env, StoreWrap* owner, int cf, std::optional<std::string> start,
                std::optional<std::string> end)
      : StoreWorker(env, owner), store_(owner->store()), cf_(cf), start_(std::move(start)), end_(std::move(end)) {}

 protected:
  void Run() noexcept override {
    status_ = store_->CompactRange(cf_, start_ ? &*start_ : nullptr, end_ ? &*end_ : nullptr);
  }

 private:
  std::shared_ptr<Store> store_;
  int cf_;
  std::optional<std::string> start_;
  std::optional<std::string> end_;
};

class CheckpointWorker final : public StoreWorker {
 public:
  CheckpointWorker(Napi::Env env, StoreWrap* owner, std::string dir, uint64_t wal_bytes_for_flush)
      : StoreWorker(env, owner), store_(owner->store()), dir_(std::move(dir)), wal_bytes_for_flush_(wal_bytes_for_flush) {}

 protected:
  void Run() noexcept override { status_ = store_->Checkpoint(dir_, wal_bytes_for_flush_); }

 private:
  std::shared_ptr<Store> store_;
  std::string dir_;
  uint64_t wal_bytes_for_flush_;
};

}  // namespace

// ---------------------------------------------------------------------------------------
// StoreWrap

Napi::Function StoreWrap::Init(Napi::Env env) {
  return DefineClass(env, "Store",
                     {
                         InstanceMethod<&StoreWrap::Open>("open"),
                         InstanceMethod<&StoreWrap::Get>("get"),
                         InstanceMethod<&StoreWrap::MultiGet>("multiGet"),
                         InstanceMethod<&StoreWrap::Put>("put"),
                         InstanceMethod<&StoreWrap::Merge>("merge"),
                         InstanceMethod<&StoreWrap::Delete>("delete"),
                         InstanceMethod<&StoreWrap::Write>("write"),
                         InstanceMethod<&StoreWrap::Flush>("flush"),
                         InstanceMethod<&StoreWrap::CompactRange>("compactRange"),
                         InstanceMethod<&StoreWrap::Checkpoint>("checkpoint"),
                         InstanceMethod<&StoreWrap::Property>("property"),
                         InstanceMethod<&StoreWrap::Stats>("stats"),
                         InstanceMethod<&StoreWrap::NewSnapshot>("snapshot"),
                         InstanceMethod<&StoreWrap::NewIterator>("iterator"),
                         InstanceMethod<&StoreWrap::Close>("close"),
                     });
}

StoreWrap::StoreWrap(const Napi::CallbackInfo& info) : Napi::ObjectWrap<StoreWrap>(info) {}

StoreWrap::~StoreWrap() {
  // Garbage-collected while open (nothing in flight, or we would still be referenced):
  // the shared_ptr closes the database when the last holder lets go.
  Addon* addon = Addon::Get(Env());
  if (addon != nullptr) addon->open_stores.erase(this);
}

void StoreWrap::EndOp() {
  --inflight_;
  if (state_ == State::kClosing && inflight_ == 0) StartClose();
}

void StoreWrap::StartClose() {
  if (!store_) {
    FinishClose(Status::OK());
    return;
  }
  auto* worker = new CloseWorker(Env(), this);
  worker->Start();  // the waiters' promises settle in FinishClose
}

void StoreWrap::FinishClose(const Status& s) {
  state_ = State::kClosed;
  close_status_ = s;
  store_.reset();
  Addon* addon = Addon::Get(Env());
  if (addon != nullptr) addon->open_stores.erase(this);
  std::vector<Napi::Promise::Deferred> waiters = std::move(close_waiters_);
  close_waiters_.clear();
  for (auto& d : waiters) {
    if (s.ok()) {
      d.Resolve(Env().Undefined());
    } else {
      d.Reject(MakeError(Env(), s));
    }
  }
}

void StoreWrap::CloseForTeardown() {
  if (store_ && inflight_ == 0) store_->Close();
  // With work in flight the database stays open; the WAL keeps what was acknowledged.
}

bool StoreWrap::CheckOpenAndCf(const Napi::CallbackInfo& info, size_t cf_arg, int* cf, Napi::Value* rejected) {
  Napi::Env env = info.Env();
  if (state_ != State::kOpen) {
    *rejected = RejectedPromise(env, Status::Closed("store is closed"));
    return false;
  }
  if (info.Length() <= cf_arg || !info[cf_arg].IsNumber()) {
    *rejected = RejectedPromise(env, Status::InvalidArgument("column family index must be a number"));
    return false;
  }
  *cf = info[cf_arg].As<Napi::Number>().Int32Value();
  if (*cf < 0 || static_cast<size_t>(*cf) >= store_->ColumnFamilyNames().size()) {
    *rejected = RejectedPromise(env, Status::InvalidArgument("unknown column family index"));
    return false;
  }
  return true;
}

Napi::Value StoreWrap::Open(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (state_ != State::kNew) return RejectedPromise(env, Status::InvalidArgument("open() may be called once"));
  StoreConfig config;
  Status s = ParseConfig(info.Length() > 0 ? info[0] : env.Undefined(), &config);
  if (!s.ok()) return RejectedPromise(env, s);
  state_ = State::kOpening;
  auto* worker = new OpenWorker(env, this, std::move(config));
  return worker->Start();
}

Napi::Value StoreWrap::Get(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int cf;
  Napi::Value rejected;
  if (!CheckOpenAndCf(info, 0, &cf, &rejected)) return rejected;
  BytesArg key;
  std::shared_ptr<Snapshot> snap;
  if (info.Length() < 2 || !key.Read(info[1])) return RejectedPromise(env, Status::InvalidArgument("key must be a string or Uint8Array"));
  Status s = SnapshotWrap::Arg(info.Length() > 2 ? info[2] : env.Undefined(), &snap);
  if (!s.ok()) return RejectedPromise(env, s);
  auto* worker = new GetWorker(env, this, cf, key.Copy(), std::move(snap));
  return worker->Start();
}

Napi::Value StoreWrap::MultiGet(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int cf;
  Napi::Value rejected;
  if (!CheckOpenAndCf(info, 0, &cf, &rejected)) return rejected;
  if (info.Length() < 2 || !info[1].IsArray()) return RejectedPromise(env, Status::InvalidArgument("keys must be an array"));
  Napi::Array a = info[1].As<Napi::Array>();
  std::vector<std::string> keys(a.Length());
  for (uint32_t i = 0; i < a.Length(); ++i) {
    BytesArg k;
    if (!k.Read(a.Get(i))) return RejectedPromise(env, Status::InvalidArgument("keys must be strings or Uint8Arrays"));
    keys[i] = k.Copy();
  }
  std::shared_ptr<Snapshot> snap;
  Status s = SnapshotWrap::Arg(info.Length() > 2 ? info[2] : env.Undefined(), &snap);
  if (!s.ok()) return RejectedPromise(env, s);
  auto* worker = new MultiGetWorker(env, this, cf, std::move(keys), std::move(snap));
  return worker->Start();
}

namespace {
Napi::Value StartWriteOne(const Napi::CallbackInfo& info, StoreWrap* self, WriteOneWorker::Op op, int cf) {
  Napi::Env env = info.Env();
  BytesArg key, value;
  if (info.Length() < 2 || !key.Read(info[1])) return RejectedPromise(env, Status::InvalidArgument("key must be a string or Uint8Array"));
  size_t sync_arg = 2;
  if (op != WriteOneWorker::Op::kDelete) {
    if (info.Length() < 3 || !value.Read(info[2])) return RejectedPromise(env, Status::InvalidArgument("value must be a Uint8Array"));
    sync_arg = 3;
  }
  auto* worker = new WriteOneWorker(env, self, op, cf, key.Copy(), value.Copy(), SyncArg(info, sync_arg));
  return worker->Start();
}
}  // namespace

Napi::Value StoreWrap::Put(const Napi::CallbackInfo& info) {
  int cf;
  Napi::Value rejected;
  if (!CheckOpenAndCf(info, 0, &cf, &rejected)) return rejected;
  return StartWriteOne(info, this, WriteOneWorker::Op::kPut, cf);
}

Napi::Value StoreWrap::Merge(const Napi::CallbackInfo& info) {
  int cf;
  Napi::Value rejected;
  if (!CheckOpenAndCf(info, 0, &cf, &rejected)) return rejected;
  return StartWriteOne(info, this, WriteOneWorker::Op::kMerge, cf);
}

Napi::Value StoreWrap::Delete(const Napi::CallbackInfo& info) {
  int cf;
  Napi::Value rejected;
  if (!CheckOpenAndCf(info, 0, &cf, &rejected)) return rejected;
  return StartWriteOne(info, this, WriteOneWorker::Op::kDelete, cf);
}

Napi::Value StoreWrap::Write(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (state_ != State::kOpen) return RejectedPromise(env, Status::Closed("store is closed"));
  WriteBatchWrap* batch = WriteBatchWrap::FromValue(info.Length() > 0 ? info[0] : env.Undefined());
  if (batch == nullptr) return RejectedPromise(env, Status::InvalidArgument("write expects a WriteBatch"));
  if (batch->store() != store_.get()) {
    return RejectedPromise(env, Status::InvalidArgument("the batch was made by another store"));
  }
  const bool sync = SyncArg(info, 1);
  rocksdb::WriteBatch taken;
  Status s = batch->Take(env, &taken);
  if (!s.ok()) return RejectedPromise(env, s);
  auto* worker = new WriteBatchWorker(env, this, std::move(taken), sync);
  return worker->Start();
}

Napi::Value StoreWrap::Flush(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (state_ != State::kOpen) return RejectedPromise(env, Status::Closed("store is closed"));
  auto* worker = new FlushWorker(env, this);
  return worker->Start();
}

Napi::Value StoreWrap::CompactRange(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int cf;
  Napi::Value rejected;
  if (!CheckOpenAndCf(info, 0, &cf, &rejected)) return rejected;
  std::optional<std::string> bounds[2];
  for (size_t i = 0; i < 2; ++i) {
    if (info.Length() > i + 1 && !info[i + 1].IsUndefined() && !info[i + 1].IsNull()) {
      BytesArg b;
      if (!b.Read(info[i + 1])) return RejectedPromise(env, Status::InvalidArgument("range bounds must be strings or Uint8Arrays"));
      bounds[i] = b.Copy();
    }
  }
  auto* worker = new CompactWorker(env, this, cf, std::move(bounds[0]), std::move(bounds[1]));
  return worker->Start();
}

Napi::Value StoreWrap::Checkpoint(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (state_ != State::kOpen) return RejectedPromise(env, Status::Closed("store is closed"));
  if (info.Length() < 1 || !info[0].IsString()) return RejectedPromise(env, Status::InvalidArgument("checkpoint expects a directory path"));
  // Optional second argument: the live WAL bytes from which memtables are flushed first
  // (a number >= 0; Infinity: never). Absent: 0, always flush.
  uint64_t wal_bytes_for_flush = 0;
  if (info.Length() >= 2 && !info[1].IsUndefined()) {
    if (!info[1].IsNumber()) return RejectedPromise(env, Status::InvalidArgument("checkpoint's walBytesForFlush must be a number"));
    double d = info[1].As<Napi::Number>().DoubleValue();
    if (!(d >= 0)) return RejectedPromise(env, Status::InvalidArgument("checkpoint's walBytesForFlush must be >= 0"));
    wal_bytes_for_flush = d >= 18446744073709551615.0 ? UINT64_MAX : static_cast<uint64_t>(d);
  }
  auto* worker = new CheckpointWorker(env, this, info[0].As<Napi::String>().Utf8Value(), wal_bytes_for_flush);
  return worker->Start();
}

Napi::Value StoreWrap::Property(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (state_ != State::kOpen) return ThrowStatus(env, Status::Closed("store is closed"));
  if (info.Length() < 1 || !info[0].IsString()) return ThrowStatus(env, Status::InvalidArgument("property name must be a string"));
  int cf = -1;
  if (info.Length() > 1 && info[1].IsNumber()) cf = info[1].As<Napi::Number>().Int32Value();
  if (cf >= static_cast<int>(store_->ColumnFamilyNames().size())) {
    return ThrowStatus(env, Status::InvalidArgument("unknown column family index"));
  }
  std::string out;
  if (!store_->Property(info[0].As<Napi::String>().Utf8Value(), cf, &out)) return env.Undefined();
  return Napi::String::New(env, out);
}

Napi::Value StoreWrap::Stats(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (state_ != State::kOpen) return ThrowStatus(env, Status::Closed("store is closed"));
  StoreStats stats = store_->Stats();
  Napi::Object o = Napi::Object::New(env);
  for (const auto& [k, v] : stats.values) o.Set(k, Napi::Number::New(env, static_cast<double>(v)));
  Napi::Object cfs = Napi::Object::New(env);
  for (const ColumnFamilyStats& c : stats.column_families) {
    Napi::Object co = Napi::Object::New(env);
    for (const auto& [k, v] : c.values) co.Set(k, Napi::Number::New(env, static_cast<double>(v)));
    cfs.Set(c.name, co);
  }
  o.Set("columnFamilies", cfs);
  return o;
}

Napi::Value StoreWrap::NewSnapshot(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (state_ != State::kOpen) return ThrowStatus(env, Status::Closed("store is closed"));
  std::shared_ptr<Snapshot> snap;
  Status s = store_->NewSnapshot(&snap);
  if (!s.ok()) return ThrowStatus(env, s);
  return SnapshotWrap::New(env, std::move(snap));
}

// iterator(cf, { lower?, upper?, reverse?, keysOnly?, snapshot? }) -> Iterator
Napi::Value StoreWrap::NewIterator(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (state_ != State::kOpen) return ThrowStatus(env, Status::Closed("store is closed"));
  if (info.Length() < 1 || !info[0].IsNumber()) return ThrowStatus(env, Status::InvalidArgument("column family index must be a number"));
  return IteratorWrap::Make(env, this, info[0].As<Napi::Number>().Int32Value(),
                           info.Length() > 1 ? info[1] : env.Undefined(), nullptr);
}

Napi::Value StoreWrap::Close(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto d = Napi::Promise::Deferred::New(env);
  switch (state_) {
    case State::kNew:
      state_ = State::kClosed;
      d.Resolve(env.Undefined());
      return d.Promise();
    case State::kClosed:
      if (close_status_.ok()) {
        d.Resolve(env.Undefined());
      } else {
        d.Reject(MakeError(env, close_status_));
      }
      return d.Promise();
    case State::kOpening:
    case State::kOpen:
      state_ = State::kClosing;
      close_waiters_.push_back(d);
      if (inflight_ == 0) StartClose();
      return d.Promise();
    case State::kClosing:
      close_waiters_.push_back(d);
      return d.Promise();
  }
  return d.Promise();
}

}  // namespace shardflow::binding

#include "objects/merge_probe.h"

#include <deque>

#include <rocksdb/merge_operator.h>

#include "objects/store.h"
#include "shardflow/merge_operators.h"
#include "util/bytes.h"
#include "util/errors.h"

namespace shardflow::binding {

Napi::Value EvaluateMerge(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 4 || !info[0].IsObject() || !info[2].IsArray() || !info[3].IsString()) {
    return ThrowStatus(env, Status::InvalidArgument("evaluateMerge(spec, existing, operands, mode)"));
  }
  MergeOperatorSpec spec;
  Status s = ParseMergeOperator(info[0].As<Napi::Object>(), &spec);
  auto faults = std::make_shared<MergeFaults>();
  std::shared_ptr<rocksdb::MergeOperator> op;
  if (s.ok()) s = CreateMergeOperator(spec, faults, &op);
  if (!s.ok()) return ThrowStatus(env, s);

  BytesArg existing;
  bool has_existing = !info[1].IsUndefined() && !info[1].IsNull();
  if (has_existing && !existing.Read(info[1])) {
    return ThrowStatus(env, Status::InvalidArgument("existing must be a Uint8Array or undefined"));
  }
  Napi::Array a = info[2].As<Napi::Array>();
  std::vector<BytesArg> args(a.Length());
  std::vector<rocksdb::Slice> operands;
  for (uint32_t i = 0; i < a.Length(); ++i) {
    if (!args[i].Read(a.Get(i))) return ThrowStatus(env, Status::InvalidArgument("operands must be Uint8Arrays"));
    operands.emplace_back(args[i].View().data(), args[i].View().size());
  }
  std::string mode = info[3].As<Napi::String>().Utf8Value();
  std::string out;
  bool ok = false;
  rocksdb::Slice key("probe");
  if (mode == "full") {
    rocksdb::Slice base(existing.View().data(), existing.View().size());
    rocksdb::Slice existing_operand(static_cast<const char*>(nullptr), 0);
    rocksdb::MergeOperator::MergeOperationInput in(key, has_existing ? &base : nullptr, operands, nullptr);
    rocksdb::MergeOperator::MergeOperationOutput result(out, existing_operand);
    ok = op->FullMergeV2(in, &result);
    // An operator may answer with one of its inputs instead of a copy.
    if (ok && existing_operand.data() != nullptr) out.assign(existing_operand.data(), existing_operand.size());
  } else if (mode == "partial") {
    std::deque<rocksdb::Slice> list(operands.begin(), operands.end());
    ok = op->PartialMergeMulti(key, list, &out, nullptr);
  } else {
    return ThrowStatus(env, Status::InvalidArgument("mode must be \"full\" or \"partial\""));
  }
  if (!ok) return ThrowStatus(env, Status::Corruption("merge operator " + spec.name + " failed"));
  Napi::Object result = Napi::Object::New(env);
  result.Set("value", Napi::Buffer<char>::Copy(env, out.data(), out.size()));
  result.Set("faults", Napi::Number::New(env, static_cast<double>(faults->Get())));
  return result;
}

}  // namespace shardflow::binding

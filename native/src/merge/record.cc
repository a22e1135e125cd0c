// shardflow.record.v1: field-wise merge of msgpack records.
//
// A value is a msgpack map string -> value; an operand is a map holding some fields. Each
// field merges by the rule declared for it (MergeOperatorSpec::fields, others use
// default_rule):
//
//   sum   numbers add: int + int stays int64 (a float64 on overflow), any float -> float64
//   max   numeric maximum            min   numeric minimum
//   lww   the later operand's value wins (write order), any type, nil included
//   set   the value is an array used as a set (element equality is msgpack equality),
//         kept sorted by the elements' msgpack bytes so that every merge order gives the
//         same bytes. An operand holds an array (elements to add) or a map
//         {add: [...], remove: [...]} (adds applied first, then removes)
//
// Full merge: base (or {}) <- operands in order; set fields become arrays.
// Partial merge: operands combine into one operand; sum/max/min/lww combine as above
// (each is associative), set fields become {add, remove} with add and remove disjoint, so
// a remove is kept as a tombstone until a full merge meets the base.
// Identity: {} (an operand with no fields).
// Malformed: an operand that is not a msgpack map is skipped and counted; a field whose
// value does not fit its rule (e.g. a string under sum) is skipped and counted, the rest
// of the operand still applies; a malformed base counts one fault and is treated as {}.
#include <algorithm>
#include <map>

#include "merge/operators.h"
#include "util/msgpack.h"

namespace shardflow::merge {
namespace {

using util::msgpack::Value;
using Type = Value::Type;

struct SetDelta {
  std::vector<Value> add;
  std::vector<Value> remove;
};

bool Contains(const std::vector<Value>& v, const Value& x) {
  for (const Value& e : v) {
    if (e == x) return true;
  }
  return false;
}

void Erase(std::vector<Value>* v, const Value& x) {
  for (auto it = v->begin(); it != v->end(); ++it) {
    if (*it == x) {
      v->erase(it);
      return;
    }
  }
}

// d <- d then (add x)
void DeltaAdd(SetDelta* d, const Value& x) {
  Erase(&d->remove, x);
  if (!Contains(d->add, x)) d->add.push_back(x);
}
// d <- d then (remove x)
void DeltaRemove(SetDelta* d, const Value& x) {
  Erase(&d->add, x);
  if (!Contains(d->remove, x)) d->remove.push_back(x);
}

// Folds an operand's set field into `d`. False when malformed (d untouched).
bool FoldSetOperand(const Value& v, SetDelta* d) {
  if (v.type == Type::kArray) {
    for (const Value& x : v.array) DeltaAdd(d, x);
    return true;
  }
  if (v.type != Type::kMap) return false;
  const Value* add = v.Find("add");
  const Value* remove = v.Find("remove");
  if ((add != nullptr && add->type != Type::kArray) || (remove != nullptr && remove->type != Type::kArray)) {
    return false;
  }
  for (const auto& [k, unused] : v.map) {
    if (k != "add" && k != "remove") return false;
  }
  if (add != nullptr) {
    for (const Value& x : add->array) DeltaAdd(d, x);
  }
  if (remove != nullptr) {
    for (const Value& x : remove->array) DeltaRemove(d, x);
  }
  return true;
}

Value DeltaValue(SetDelta d) {
  Value out;
  if (d.remove.empty()) {
    out.type = Type::kArray;
    out.array = std::move(d.add);
    return out;
  }
  out.type = Type::kMap;
  Value add, remove;
  add.type = remove.type = Type::kArray;
  add.array = std::move(d.add);
  remove.array = std::move(d.remove);
  out.map.emplace_back("add", std::move(add));
  out.map.emplace_back("remove", std::move(remove));
  return out;
}

Value Sum(const Value& a, const Value& b) {
  Value out;
  if (a.type == Type::kInt && b.type == Type::kInt) {
    int64_t r;
    if (!__builtin_add_overflow(a.i, b.i, &r)) {
      out.type = Type::kInt;
      out.i = r;
      return out;
    }
  }
  out.type = Type::kFloat;
  out.f = a.AsDouble() + b.AsDouble();
  return out;
}

// True when a > b numerically.
bool Greater(const Value& a, const Value& b) {
  if (a.type == Type::kInt && b.type == Type::kInt) return a.i > b.i;
  return a.AsDouble() > b.AsDouble();
}

class RecordOperator final : public rocksdb::MergeOperator {
 public:
  RecordOperator(const MergeOperatorSpec& spec, std::shared_ptr<MergeFaults> faults)
      : default_rule_(spec.default_rule), faults_(std::move(faults)) {
    for (const RecordField& f : spec.fields) rules_[f.name] = f.rule;
  }

  const char* Name() const override { return "shardflow.record.v1"; }

  // IN existing_value: base record (may be null); IN operand_list: oldest first;
  // OUT new_value: the merged record. Always returns true.
  bool FullMergeV2(const MergeOperationInput& merge_in,
                   MergeOperationOutput* merge_out) const noexcept override {
    Value record;
    record.type = Type::kMap;
    if (merge_in.existing_value != nullptr) {
      Value base;
      if (Parse(*merge_in.existing_value, &base)) {
        record = std::move(base);
      } else {
        faults_->Add();
      }
    }
    for (const rocksdb::Slice& s : merge_in.operand_list) {
      Value op;
      if (!Parse(s, &op)) {
        faults_->Add();
        continue;
      }
      for (auto& [name, v] : op.map) ApplyFull(&record, name, v);
    }
    for (auto& [name, v] : record.map) {
      if (v.type == Type::kArray && RuleOf(name) == FieldRule::kSet) SortSet(&v);
    }
    merge_out->new_value.clear();
    util::msgpack::Encode(record, &merge_out->new_value);
    return true;
  }

  // IN operand_list: oldest first; OUT new_value: one equivalent operand.
  bool PartialMergeMulti(const rocksdb::Slice& /*key*/, const std::deque<rocksdb::Slice>& operand_list,
                         std::string* new_value, rocksdb::Logger* /*logger*/) const noexcept override {
    Value acc;
    acc.type = Type::kMap;
    std::map<std::string, SetDelta, std::less<>> sets;  // set fields, in delta form
    for (const rocksdb::Slice& s : operand_list) {
      Value op;
      if (!Parse(s, &op)) {
        faults_->Add();
        continue;
      }
      for (auto& [name, v] : op.map) {
        FieldRule rule = RuleOf(name);
        if (rule == FieldRule::kSet) {
          if (!FoldSetOperand(v, &sets[name])) faults_->Add();  // all or nothing
          if (acc.Find(name) == nullptr) acc.map.emplace_back(name, Value());  // keep field order
          continue;
        }
        Combine(&acc, name, v, rule);
      }
    }
    for (auto& [name, d] : sets) *acc.Find(name) = DeltaValue(std::move(d));
    new_value->clear();
    util::msgpack::Encode(acc, new_value);
    return true;
  }

  bool PartialMerge(const rocksdb::Slice& key, const rocksdb::Slice& left, const rocksdb::Slice& right,
                    std::string* new_value, rocksdb::Logger* logger) const noexcept override {
    return PartialMergeMulti(key, std::deque<rocksdb::Slice>{left, right}, new_value, logger);
  }

 private:
  static bool Parse(const rocksdb::Slice& s, Value* out) {
    return util::msgpack::Parse(std::string_view(s.data(), s.size()), out) && out->type == Type::kMap;
  }

  // Sorts a set's elements by their msgpack bytes (a canonical order).
  static void SortSet(Value* v) {
    std::vector<std::pair<std::string, size_t>> keyed(v->array.size());
    for (size_t i = 0; i < v->array.size(); ++i) {
      util::msgpack::Encode(v->array[i], &keyed[i].first);
      keyed[i].second = i;
    }
    std::sort(keyed.begin(), keyed.end());
    std::vector<Value> sorted;
    sorted.reserve(keyed.size());
    for (auto& [bytes, i] : keyed) sorted.push_back(std::move(v->array[i]));
    v->array = std::move(sorted);
  }

  FieldRule RuleOf(std::string_view name) const {
    auto it = rules_.find(name);
    return it == rules_.end() ? default_rule_ : it->second;
  }

  // Non-set rules, full and partial alike: acc[name] <- combine(acc[name], v).
  void Combine(Value* acc, const std::string& name, const Value& v, FieldRule rule) const {
    if (rule != FieldRule::kLww && !v.IsNumber()) {
      faults_->Add();
      return;
    }
    Value* cur = acc->Find(name);
    if (cur == nullptr) {
      acc->map.emplace_back(name, v);
      return;
    }
    if (rule != FieldRule::kLww && !cur->IsNumber()) {
      faults_->Add();  // the base field does not fit its rule: the operand replaces it
      *cur = v;
      return;
    }
    switch (rule) {
      case FieldRule::kSum: *cur = Sum(*cur, v); break;
      case FieldRule::kMax: if (Greater(v, *cur)) *cur = v; break;
      case FieldRule::kMin: if (Greater(*cur, v)) *cur = v; break;
      case FieldRule::kLww: *cur = v; break;
      case FieldRule::kSet: break;  // handled by the callers
    }
  }

  void ApplyFull(Value* record, const std::string& name, const Value& v) const {
    FieldRule rule = RuleOf(name);
    if (rule != FieldRule::kSet) {
      Combine(record, name, v, rule);
      return;
    }
    SetDelta d;
    if (!FoldSetOperand(v, &d)) {
      faults_->Add();
      return;
    }
    Value* cur = record->Find(name);
    if (cur == nullptr) {
      Value empty;
      empty.type = Type::kArray;
      record->map.emplace_back(name, std::move(empty));
      cur = &record->map.back().second;
    } else if (cur->type != Type::kArray) {
      faults_->Add();
      cur->type = Type::kArray;
      cur->array.clear();
    }
    for (Value& x : d.add) {
      if (!Contains(cur->array, x)) cur->array.push_back(std::move(x));
    }
    for (const Value& x : d.remove) Erase(&cur->array, x);
  }

  std::map<std::string, FieldRule, std::less<>> rules_;
  FieldRule default_rule_;
  std::shared_ptr<MergeFaults> faults_;
};

}  // namespace

std::shared_ptr<rocksdb::MergeOperator> NewRecord(const MergeOperatorSpec& spec,
                                                  std::shared_ptr<MergeFaults> faults) {
  return std::make_shared<RecordOperator>(spec, std::move(faults));
}

}  // namespace shardflow::merge

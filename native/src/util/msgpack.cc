// MessagePack reader/writer (util/msgpack.h).
#include "util/msgpack.h"

#include <bit>
#include <cstring>

namespace shardflow::util::msgpack {

namespace {

constexpr int kMaxDepth = 64;

class Reader {
 public:
  explicit Reader(std::string_view d) : p_(d.data()), end_(d.data() + d.size()) {}
  bool AtEnd() const { return p_ == end_; }

  bool Read(Value* v, int depth) {
    if (depth > kMaxDepth) return false;
    uint8_t t;
    if (!U8(&t)) return false;
    if (t <= 0x7f) return Int(v, t);
    if (t >= 0xe0) return Int(v, static_cast<int8_t>(t));
    if ((t & 0xf0) == 0x80) return Map(v, t & 0x0f, depth);
    if ((t & 0xf0) == 0x90) return Array(v, t & 0x0f, depth);
    if ((t & 0xe0) == 0xa0) return Bytes(v, Value::Type::kStr, t & 0x1f);
    switch (t) {
      case 0xc0: v->type = Value::Type::kNil; return true;
      case 0xc2: v->type = Value::Type::kBool; v->b = false; return true;
      case 0xc3: v->type = Value::Type::kBool; v->b = true; return true;
      case 0xc4: { uint64_t n; return BE(1, &n) && Bytes(v, Value::Type::kBin, n); }
      case 0xc5: { uint64_t n; return BE(2, &n) && Bytes(v, Value::Type::kBin, n); }
      case 0xc6: { uint64_t n; return BE(4, &n) && Bytes(v, Value::Type::kBin, n); }
      case 0xc7: { uint64_t n; return BE(1, &n) && Ext(v, n); }
      case 0xc8: { uint64_t n; return BE(2, &n) && Ext(v, n); }
      case 0xc9: { uint64_t n; return BE(4, &n) && Ext(v, n); }
      case 0xca: { uint64_t n; if (!BE(4, &n)) return false;
                   v->type = Value::Type::kFloat;
                   v->f = std::bit_cast<float>(static_cast<uint32_t>(n)); return true; }
      case 0xcb: { uint64_t n; if (!BE(8, &n)) return false;
                   v->type = Value::Type::kFloat; v->f = std::bit_cast<double>(n); return true; }
      case 0xcc: { uint64_t n; return BE(1, &n) && Int(v, static_cast<int64_t>(n)); }
      case 0xcd: { uint64_t n; return BE(2, &n) && Int(v, static_cast<int64_t>(n)); }
      case 0xce: { uint64_t n; return BE(4, &n) && Int(v, static_cast<int64_t>(n)); }
      case 0xcf: { uint64_t n; if (!BE(8, &n)) return false;
                   if (n > static_cast<uint64_t>(INT64_MAX)) { v->type = Value::Type::kUInt; v->u = n; return true; }
                   return Int(v, static_cast<int64_t>(n)); }
      case 0xd0: { uint64_t n; return BE(1, &n) && Int(v, static_cast<int8_t>(n)); }
      case 0xd1: { uint64_t n; return BE(2, &n) && Int(v, static_cast<int16_t>(n)); }
      case 0xd2: { uint64_t n; return BE(4, &n) && Int(v, static_cast<int32_t>(n)); }
      case 0xd3: { uint64_t n; return BE(8, &n) && Int(v, static_cast<int64_t>(n)); }
      case 0xd4: return Ext(v, 1);
      case 0xd5: return Ext(v, 2);
      case 0xd6: return Ext(v, 4);
      case 0xd7: return Ext(v, 8);
      case 0xd8: return Ext(v, 16);
      case 0xd9: { uint64_t n; return BE(1, &n) && Bytes(v, Value::Type::kStr, n); }
      case 0xda: { uint64_t n; return BE(2, &n) && Bytes(v, Value::Type::kStr, n); }
      case 0xdb: { uint64_t n; return BE(4, &n) && Bytes(v, Value::Type::kStr, n); }
      case 0xdc: { uint64_t n; return BE(2, &n) && Array(v, n, depth); }
      case 0xdd: { uint64_t n; return BE(4, &n) && Array(v, n, depth); }
      case 0xde: { uint64_t n; return BE(2, &n) && Map(v, n, depth); }
      case 0xdf: { uint64_t n; return BE(4, &n) && Map(v, n, depth); }
      default: return false;  // 0xc1 is never used
    }
  }

 private:
  bool U8(uint8_t* out) {
    if (p_ == end_) return false;
    *out = static_cast<uint8_t>(*p_++);
    return true;
  }
  bool BE(int n, uint64_t* out) {
    if (end_ - p_ < n) return false;
    uint64_t v = 0;
    for (int k = 0; k < n; ++k) v = (v << 8) | static_cast<uint8_t>(p_[k]);
    p_ += n;
    *out = v;
    return true;
  }
  static bool Int(Value* v, int64_t n) {
    v->type = Value::Type::kInt;
    v->i = n;
    return true;
  }
  bool Bytes(Value* v, Value::Type type, uint64_t n) {
    if (static_cast<uint64_t>(end_ - p_) < n) return false;
    v->type = type;
    v->s.assign(p_, n);
    p_ += n;
    return true;
  }
  bool Ext(Value* v, uint64_t n) {
    uint8_t t;
    if (!U8(&t)) return false;
    v->ext_type = static_cast<int8_t>(t);
    return Bytes(v, Value::Type::kExt, n);
  }
  bool Array(Value* v, uint64_t n, int depth) {
    if (static_cast<uint64_t>(end_ - p_) < n) return false;  // each element >= 1 byte
    v->type = Value::Type::kArray;
    v->array.resize(n);
    for (uint64_t k = 0; k < n; ++k) {
      if (!Read(&v->array[k], depth + 1)) return false;
    }
    return true;
  }
  bool Map(Value* v, uint64_t n, int depth) {
    if (static_cast<uint64_t>(end_ - p_) < 2 * n) return false;
    v->type = Value::Type::kMap;
    v->map.resize(n);
    for (uint64_t k = 0; k < n; ++k) {
      Value key;
      if (!Read(&key, depth + 1) || key.type != Value::Type::kStr) return false;
      v->map[k].first = std::move(key.s);
      if (!Read(&v->map[k].second, depth + 1)) return false;
    }
    return true;
  }

  const char* p_;
  const char* end_;
};

void PutBE(std::string* out, uint8_t tag, uint64_t v, int n) {
  out->push_back(static_cast<char>(tag));
  for (int k = n - 1; k >= 0; --k) out->push_back(static_cast<char>((v >> (8 * k)) & 0xff));
}

void PutLength(std::string* out, uint64_t n, uint8_t fix_tag, uint64_t fix_max, uint8_t t8,
               uint8_t t16, uint8_t t32) {
  if (n <= fix_max) {
    out->push_back(static_cast<char>(fix_tag | n));
  } else if (t8 != 0 && n <= 0xff) {
    PutBE(out, t8, n, 1);
  } else if (n <= 0xffff) {
    PutBE(out, t16, n, 2);
  } else {
    PutBE(out, t32, n, 4);
  }
}

}  // namespace

const Value* Value::Find(std::string_view key) const noexcept {
  for (const auto& [k, v] : map) {
    if (k == key) return &v;
  }
  return nullptr;
}

Value* Value::Find(std::string_view key) noexcept {
  for (auto& [k, v] : map) {
    if (k == key) return &v;
  }
  return nullptr;
}

bool operator==(const Value& a, const Value& b) noexcept {
  if (a.IsNumber() && b.IsNumber()) {
    if (a.type == Value::Type::kInt && b.type == Value::Type::kInt) return a.i == b.i;
    if (a.type == Value::Type::kUInt && b.type == Value::Type::kUInt) return a.u == b.u;
    return a.AsDouble() == b.AsDouble();
  }
  if (a.type != b.type) return false;
  switch (a.type) {
    case Value::Type::kNil: return true;
    case Value::Type::kBool: return a.b == b.b;
    case Value::Type::kStr:
    case Value::Type::kBin: return a.s == b.s;
    case Value::Type::kExt: return a.ext_type == b.ext_type && a.s == b.s;
    case Value::Type::kArray: return a.array == b.array;
    case Value::Type::kMap: return a.map == b.map;
    default: return false;
  }
}

bool Parse(std::string_view data, Value* out) noexcept {
  Reader r(data);
  return r.Read(out, 0) && r.AtEnd();
}

void Encode(const Value& v, std::string* out) noexcept {
  switch (v.type) {
    case Value::Type::kNil: out->push_back(static_cast<char>(0xc0)); return;
    case Value::Type::kBool: out->push_back(static_cast<char>(v.b ? 0xc3 : 0xc2)); return;
    case Value::Type::kInt: {
      int64_t n = v.i;
      if (n >= 0) {
        if (n <= 0x7f) out->push_back(static_cast<char>(n));
        else if (n <= 0xff) PutBE(out, 0xcc, n, 1);
        else if (n <= 0xffff) PutBE(out, 0xcd, n, 2);
        else if (n <= 0xffffffffLL) PutBE(out, 0xce, n, 4);
        else PutBE(out, 0xcf, static_cast<uint64_t>(n), 8);
      } else {
        if (n >= -32) out->push_back(static_cast<char>(static_cast<int8_t>(n)));
        else if (n >= INT8_MIN) PutBE(out, 0xd0, static_cast<uint8_t>(n), 1);
        else if (n >= INT16_MIN) PutBE(out, 0xd1, static_cast<uint16_t>(n), 2);
        else if (n >= INT32_MIN) PutBE(out, 0xd2, static_cast<uint32_t>(n), 4);
        else PutBE(out, 0xd3, static_cast<uint64_t>(n), 8);
      }
      return;
    }
    case Value::Type::kUInt: PutBE(out, 0xcf, v.u, 8); return;
    case Value::Type::kFloat: PutBE(out, 0xcb, std::bit_cast<uint64_t>(v.f), 8); return;
    case Value::Type::kStr:
      PutLength(out, v.s.size(), 0xa0, 31, 0xd9, 0xda, 0xdb);
      out->append(v.s);
      return;
    case Value::Type::kBin:
      if (v.s.size() <= 0xff) PutBE(out, 0xc4, v.s.size(), 1);
      else if (v.s.size() <= 0xffff) PutBE(out, 0xc5, v.s.size(), 2);
      else PutBE(out, 0xc6, v.s.size(), 4);
      out->append(v.s);
      return;
    case Value::Type::kExt: {
      size_t n = v.s.size();
      if (n == 1) out->push_back(static_cast<char>(0xd4));
      else if (n == 2) out->push_back(static_cast<char>(0xd5));
      else if (n == 4) out->push_back(static_cast<char>(0xd6));
      else if (n == 8) out->push_back(static_cast<char>(0xd7));
      else if (n == 16) out->push_back(static_cast<char>(0xd8));
      else if (n <= 0xff) PutBE(out, 0xc7, n, 1);
      else if (n <= 0xffff) PutBE(out, 0xc8, n, 2);
      else PutBE(out, 0xc9, n, 4);
      out->push_back(static_cast<char>(v.ext_type));
      out->append(v.s);
      return;
    }
    case Value::Type::kArray:
      PutLength(out, v.array.size(), 0x90, 15, 0, 0xdc, 0xdd);
      for (const Value& e : v.array) Encode(e, out);
      return;
    case Value::Type::kMap:
      PutLength(out, v.map.size(), 0x80, 15, 0, 0xde, 0xdf);
      for (const auto& [k, e] : v.map) {
        PutLength(out, k.size(), 0xa0, 31, 0xd9, 0xda, 0xdb);
        out->append(k);
        Encode(e, out);
      }
      return;
  }
}

}  // namespace shardflow::util::msgpack

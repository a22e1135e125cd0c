// Reading keys and values from JS: a Uint8Array (Buffer included) is viewed in place, a
// string is UTF-8 encoded into owned storage. View() is valid while the JS value is alive
// and unmodified (same call on the JS thread); Copy() for work that leaves the thread.
#ifndef SHARDFLOW_UTIL_BYTES_H_
#define SHARDFLOW_UTIL_BYTES_H_

#include <napi.h>

#include <string>
#include <string_view>

namespace shardflow::binding {

class BytesArg {
 public:
  // False (and nothing thrown) when `v` is neither a string nor a Uint8Array.
  bool Read(Napi::Value v) {
    if (v.IsString()) {
      owned_ = v.As<Napi::String>().Utf8Value();
      view_ = owned_;
      return true;
    }
    if (v.IsTypedArray()) {
      Napi::TypedArray ta = v.As<Napi::TypedArray>();
      if (ta.TypedArrayType() != napi_uint8_array) return false;
      Napi::Uint8Array u8 = v.As<Napi::Uint8Array>();
      view_ = std::string_view(reinterpret_cast<const char*>(u8.Data()), u8.ByteLength());
      return true;
    }
    return false;
  }
  std::string_view View() const { return view_; }
  std::string Copy() const { return std::string(view_); }

 private:
  std::string owned_;
  std::string_view view_;
};

}  // namespace shardflow::binding

#endif  // SHARDFLOW_UTIL_BYTES_H_

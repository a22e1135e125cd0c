// Little-endian load/store of 64-bit numbers from unaligned bytes (on-disk formats are
// little-endian on every platform).
#ifndef SHARDFLOW_UTIL_LITTLE_ENDIAN_H_
#define SHARDFLOW_UTIL_LITTLE_ENDIAN_H_

#include <bit>
#include <cstdint>
#include <cstring>

namespace shardflow::util {

inline uint64_t LoadU64LE(const char* p) noexcept {
  uint64_t v;
  std::memcpy(&v, p, 8);
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
  return v;
}

inline void StoreU64LE(char* p, uint64_t v) noexcept {
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
  std::memcpy(p, &v, 8);
}

inline int64_t LoadI64LE(const char* p) noexcept { return static_cast<int64_t>(LoadU64LE(p)); }
inline void StoreI64LE(char* p, int64_t v) noexcept { StoreU64LE(p, static_cast<uint64_t>(v)); }
inline double LoadF64LE(const char* p) noexcept { return std::bit_cast<double>(LoadU64LE(p)); }
inline void StoreF64LE(char* p, double v) noexcept { StoreU64LE(p, std::bit_cast<uint64_t>(v)); }

}  // namespace shardflow::util

#endif  // SHARDFLOW_UTIL_LITTLE_ENDIAN_H_

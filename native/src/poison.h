// The pattern written where a failed transfer would have put data: easy to
// spot in a dump and never a plausible chain state.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace kvtier {

constexpr uint16_t kPoisonWord = 0xDEAD;

// Fills `bytes` (even) with little-endian 0xDEAD words, doubling the filled
// prefix with memcpy.
inline void fillPoison(uint8_t* dst, uint64_t bytes) {
  if (bytes < 2) return;
  dst[0] = static_cast<uint8_t>(kPoisonWord & 0xff);
  dst[1] = static_cast<uint8_t>(kPoisonWord >> 8);
  uint64_t filled = 2;
  while (filled < bytes) {
    const uint64_t n = std::min(filled, bytes - filled);
    std::memcpy(dst + filled, dst, n);
    filled += n;
  }
}

}  // namespace kvtier

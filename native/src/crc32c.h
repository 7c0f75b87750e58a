// CRC-32C (Castagnoli, the iSCSI polynomial) computed while copying, so a
// block moved between the CPU tier and a remote value is read once: the copy
// and its checksum are one pass. SSE4.2's crc32 instruction where the CPU has
// it (checked at run time), ARMv8's where the compiler targets it, a table
// otherwise; all give the same values.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvtier {

// A running CRC-32C: start from kCrc32cStart, feed pieces in order, finish
// with crc32cFinish.
constexpr uint32_t kCrc32cStart = 0xffffffffu;
inline uint32_t crc32cFinish(uint32_t state) { return state ^ 0xffffffffu; }

// How a copy writes its destination: kCached for bytes read again soon (a
// value about to be sent), kStreaming for bytes that are not (a CPU-tier
// block): non-temporal stores on x86, which skip reading the destination's
// cache lines first.
enum class CopyStores { kCached, kStreaming };

// Copies n bytes from src to dst (which must not overlap) and returns the
// state updated with them.
uint32_t crc32cCopy(uint8_t* dst, const uint8_t* src, size_t n, uint32_t state,
                    CopyStores stores = CopyStores::kCached);

// The state updated with n bytes at src (no copy).
uint32_t crc32cUpdate(const uint8_t* src, size_t n, uint32_t state);

}  // namespace kvtier

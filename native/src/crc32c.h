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

// Copies n bytes from src to dst (which must not overlap) and returns the
// state updated with them.
uint32_t crc32cCopy(uint8_t* dst, const uint8_t* src, size_t n, uint32_t state);

// The state updated with n bytes at src (no copy).
uint32_t crc32cUpdate(const uint8_t* src, size_t n, uint32_t state);

}  // namespace kvtier

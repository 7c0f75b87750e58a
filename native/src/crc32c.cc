#include "crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <nmmintrin.h>
#define KVTIER_CRC32C_X86 1
#elif defined(__aarch64__) && defined(__ARM_FEATURE_CRC32)
#include <arm_acle.h>
#define KVTIER_CRC32C_ARM 1
#endif

namespace kvtier {
namespace {

constexpr uint32_t kPolynomial = 0x82f63b78u;  // reflected Castagnoli

// Slicing-by-8 tables: table[k][b] is the CRC of byte b followed by k zero bytes.
using Tables = std::array<std::array<uint32_t, 256>, 8>;

Tables makeTables() {
  Tables t{};
  for (uint32_t b = 0; b < 256; b++) {
    uint32_t c = b;
    for (int k = 0; k < 8; k++) c = (c & 1) ? kPolynomial ^ (c >> 1) : c >> 1;
    t[0][b] = c;
  }
  for (uint32_t b = 0; b < 256; b++) {
    for (size_t k = 1; k < 8; k++) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xff];
  }
  return t;
}

const Tables& tables() {
  static const Tables t = makeTables();
  return t;
}

uint32_t tableWord(uint32_t state, uint64_t word) {
  const Tables& t = tables();
  const uint64_t x = word ^ state;
  return t[7][x & 0xff] ^ t[6][(x >> 8) & 0xff] ^ t[5][(x >> 16) & 0xff] ^ t[4][(x >> 24) & 0xff] ^
         t[3][(x >> 32) & 0xff] ^ t[2][(x >> 40) & 0xff] ^ t[1][(x >> 48) & 0xff] ^ t[0][x >> 56];
}

uint32_t tableByte(uint32_t state, uint8_t byte) { return (state >> 8) ^ tables()[0][(state ^ byte) & 0xff]; }

inline uint64_t load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

// The words are read as little-endian, as the table step assumes.
constexpr bool kLittleEndian = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;

template <bool kCopy>
uint32_t portable(uint8_t* dst, const uint8_t* src, size_t n, uint32_t state) {
  size_t i = 0;
  if (kLittleEndian) {
    for (; i + 8 <= n; i += 8) {
      const uint64_t v = load64(src + i);
      if (kCopy) std::memcpy(dst + i, &v, 8);
      state = tableWord(state, v);
    }
  }
  for (; i < n; i++) {
    if (kCopy) dst[i] = src[i];
    state = tableByte(state, src[i]);
  }
  return state;
}

#if defined(KVTIER_CRC32C_X86)
// x * y modulo the polynomial, in the reflected representation (bit 31 is x^0).
uint32_t multiplyModP(uint32_t x, uint32_t y) {
  uint32_t product = 0;
  for (uint32_t bit = 1u << 31; bit != 0; bit >>= 1) {
    if (x & bit) product ^= y;
    y = (y & 1) ? (y >> 1) ^ kPolynomial : y >> 1;
  }
  return product;
}

// Appending n zero bytes to a message multiplies its CRC state by x^(8n):
// a linear map of the state, kept as one table per state byte.
struct ZeroShift {
  std::array<std::array<uint32_t, 256>, 4> byByte{};

  explicit ZeroShift(size_t bytes) {
    uint32_t factor = 1u << 31;  // x^0
    uint32_t square = 1u << 30;  // x^1, squared up to x^(2^k)
    for (uint64_t bits = static_cast<uint64_t>(bytes) * 8; bits != 0; bits >>= 1) {
      if (bits & 1) factor = multiplyModP(factor, square);
      square = multiplyModP(square, square);
    }
    for (uint32_t k = 0; k < 4; k++) {
      for (uint32_t b = 0; b < 256; b++) byByte[k][b] = multiplyModP(factor, b << (8 * k));
    }
  }

  uint32_t operator()(uint32_t state) const {
    return byByte[0][state & 0xff] ^ byByte[1][(state >> 8) & 0xff] ^ byByte[2][(state >> 16) & 0xff] ^
           byByte[3][state >> 24];
  }
};

// The crc32 instruction takes 3 cycles but can start every cycle: three
// stripes of kStripe bytes are checksummed side by side and joined by
// shifting the earlier ones' states over the bytes after them.
constexpr size_t kStripe = 4096;

const ZeroShift& shiftOneStripe() {
  static const ZeroShift shift(kStripe);
  return shift;
}

const ZeroShift& shiftTwoStripes() {
  static const ZeroShift shift(2 * kStripe);
  return shift;
}

// Stores 8 bytes, non-temporally when streaming (x86-64 only).
template <bool kStream>
inline void store64(uint8_t* p, uint64_t v) {
#if defined(__x86_64__)
  if (kStream) {
    _mm_stream_si64(reinterpret_cast<long long*>(p), static_cast<long long>(v));
    return;
  }
#endif
  std::memcpy(p, &v, 8);
}

template <bool kCopy, bool kStream = false>
__attribute__((target("sse4.2"))) uint32_t hardware(uint8_t* dst, const uint8_t* src, size_t n, uint32_t state) {
  size_t i = 0;
#if defined(__x86_64__)
  if (n >= 3 * kStripe) {
    const ZeroShift& one = shiftOneStripe();
    const ZeroShift& two = shiftTwoStripes();
    for (; i + 3 * kStripe <= n; i += 3 * kStripe) {
      uint64_t a = state, b = 0, c = 0;
      const uint8_t* s = src + i;
      uint8_t* d = kCopy ? dst + i : nullptr;
      for (size_t j = 0; j < kStripe; j += 8) {
        const uint64_t va = load64(s + j);
        const uint64_t vb = load64(s + kStripe + j);
        const uint64_t vc = load64(s + 2 * kStripe + j);
        if (kCopy) {
          store64<kStream>(d + j, va);
          store64<kStream>(d + kStripe + j, vb);
          store64<kStream>(d + 2 * kStripe + j, vc);
        }
        a = _mm_crc32_u64(a, va);
        b = _mm_crc32_u64(b, vb);
        c = _mm_crc32_u64(c, vc);
      }
      state = two(static_cast<uint32_t>(a)) ^ one(static_cast<uint32_t>(b)) ^ static_cast<uint32_t>(c);
    }
  }
  uint64_t wide = state;
  for (; i + 8 <= n; i += 8) {
    const uint64_t v = load64(src + i);
    if (kCopy) store64<kStream>(dst + i, v);
    wide = _mm_crc32_u64(wide, v);
  }
  state = static_cast<uint32_t>(wide);
  // Non-temporal stores are weakly ordered: fence them before the caller goes on.
  if (kStream) _mm_sfence();
#endif
  for (; i < n; i++) {
    if (kCopy) dst[i] = src[i];
    state = _mm_crc32_u8(state, src[i]);
  }
  return state;
}

bool hasHardware() {
  static const bool has = __builtin_cpu_supports("sse4.2");
  return has;
}
#elif defined(KVTIER_CRC32C_ARM)
template <bool kCopy>
uint32_t hardware(uint8_t* dst, const uint8_t* src, size_t n, uint32_t state) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const uint64_t v = load64(src + i);
    if (kCopy) std::memcpy(dst + i, &v, 8);
    state = __crc32cd(state, v);
  }
  for (; i < n; i++) {
    if (kCopy) dst[i] = src[i];
    state = __crc32cb(state, src[i]);
  }
  return state;
}

bool hasHardware() { return true; }
#else
template <bool kCopy>
uint32_t hardware(uint8_t* dst, const uint8_t* src, size_t n, uint32_t state) {
  return portable<kCopy>(dst, src, n, state);
}

bool hasHardware() { return false; }
#endif

}  // namespace

uint32_t crc32cCopy(uint8_t* dst, const uint8_t* src, size_t n, uint32_t state, CopyStores stores) {
  if (!hasHardware()) return portable<true>(dst, src, n, state);
#if defined(KVTIER_CRC32C_X86)
  if (stores == CopyStores::kStreaming) return hardware<true, true>(dst, src, n, state);
#else
  (void)stores;
#endif
  return hardware<true>(dst, src, n, state);
}

uint32_t crc32cUpdate(const uint8_t* src, size_t n, uint32_t state) {
  return hasHardware() ? hardware<false>(nullptr, src, n, state) : portable<false>(nullptr, src, n, state);
}

}  // namespace kvtier

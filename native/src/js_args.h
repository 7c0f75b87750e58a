// Reading JS arguments with checks whose messages name the argument and the
// offending value. Every failure throws std::invalid_argument, which the
// addon surfaces as a JS Error.
#pragma once

#include <napi.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kvtier::js {

constexpr uint64_t kMaxSafeInteger = (1ull << 53) - 1;
constexpr uint64_t kMaxInt32 = 0x7fffffff;

bool isPresent(const Napi::Value& value);
Napi::Object readObject(const Napi::Value& value, const std::string& name);
std::string readString(const Napi::Value& value, const std::string& name);
bool readBool(const Napi::Value& value, const std::string& name, bool fallback);
double readNumber(const Napi::Value& value, const std::string& name, double min, double max);
// An integer in [min, max].
int64_t readInteger(const Napi::Value& value, const std::string& name, int64_t min, int64_t max);
uint64_t readUnsigned(const Napi::Value& value, const std::string& name, uint64_t max);

struct Int32View {
  const int32_t* data;
  size_t length;
};
// Must be an Int32Array (the TS layer converts and range-checks plain arrays).
Int32View readInt32Array(const Napi::Value& value, const std::string& name);
std::vector<int32_t> copyInt32Array(const Napi::Value& value, const std::string& name);

struct ByteView {
  const uint8_t* data;
  size_t length;
};
// A Uint8Array (Buffers included).
ByteView readBytes(const Napi::Value& value, const std::string& name);

struct MutableByteView {
  uint8_t* data;
  size_t length;
};
// A Uint8Array (Buffers included) the addon writes into.
MutableByteView readMutableBytes(const Napi::Value& value, const std::string& name);

// An array of non-negative integer ids; absent means none.
std::vector<int64_t> readIdList(const Napi::Value& value, const std::string& name);

}  // namespace kvtier::js

#include "js_args.h"

#include <cmath>
#include <sstream>
#include <stdexcept>

namespace kvtier::js {

namespace {

[[noreturn]] void fail(const std::string& message) { throw std::invalid_argument(message); }

std::string typeName(const Napi::Value& value) {
  switch (value.Type()) {
    case napi_undefined: return "undefined";
    case napi_null: return "null";
    case napi_boolean: return "a boolean";
    case napi_number: return "a number";
    case napi_string: return "a string";
    case napi_symbol: return "a symbol";
    case napi_object: return value.IsArray() ? "an array" : value.IsTypedArray() ? "a typed array" : "an object";
    case napi_function: return "a function";
    case napi_bigint: return "a bigint";
    default: return "an external";
  }
}

std::string formatNumber(double v) {
  if (std::isfinite(v) && std::floor(v) == v && std::fabs(v) < 1e18) {
    return std::to_string(static_cast<long long>(v));
  }
  std::ostringstream out;
  out.precision(17);
  out << v;
  return out.str();
}

}  // namespace

bool isPresent(const Napi::Value& value) { return !value.IsUndefined() && !value.IsNull(); }

Napi::Object readObject(const Napi::Value& value, const std::string& name) {
  if (!value.IsObject()) fail(name + " must be an object (got " + typeName(value) + ")");
  return value.As<Napi::Object>();
}

std::string readString(const Napi::Value& value, const std::string& name) {
  if (!value.IsString()) fail(name + " must be a string (got " + typeName(value) + ")");
  return value.As<Napi::String>().Utf8Value();
}

bool readBool(const Napi::Value& value, const std::string& name, bool fallback) {
  if (!isPresent(value)) return fallback;
  if (!value.IsBoolean()) fail(name + " must be a boolean (got " + typeName(value) + ")");
  return value.As<Napi::Boolean>().Value();
}

double readNumber(const Napi::Value& value, const std::string& name, double min, double max) {
  if (!value.IsNumber()) fail(name + " must be a number (got " + typeName(value) + ")");
  const double v = value.As<Napi::Number>().DoubleValue();
  if (!(v >= min && v <= max)) {
    fail(name + " = " + formatNumber(v) + " is out of range [" + formatNumber(min) + ", " + formatNumber(max) + "]");
  }
  return v;
}

int64_t readInteger(const Napi::Value& value, const std::string& name, int64_t min, int64_t max) {
  if (!value.IsNumber()) fail(name + " must be an integer (got " + typeName(value) + ")");
  const double v = value.As<Napi::Number>().DoubleValue();
  if (!std::isfinite(v) || std::floor(v) != v || v < static_cast<double>(min) || v > static_cast<double>(max)) {
    fail(name + " = " + formatNumber(v) + " must be an integer in [" + std::to_string(min) + ", " +
         std::to_string(max) + "]");
  }
  return static_cast<int64_t>(v);
}

uint64_t readUnsigned(const Napi::Value& value, const std::string& name, uint64_t max) {
  return static_cast<uint64_t>(readInteger(value, name, 0, static_cast<int64_t>(max)));
}

Int32View readInt32Array(const Napi::Value& value, const std::string& name) {
  if (!value.IsTypedArray() || value.As<Napi::TypedArray>().TypedArrayType() != napi_int32_array) {
    fail(name + " must be an Int32Array (got " + typeName(value) + ")");
  }
  Napi::Int32Array array = value.As<Napi::Int32Array>();
  return Int32View{array.Data(), array.ElementLength()};
}

std::vector<int32_t> copyInt32Array(const Napi::Value& value, const std::string& name) {
  const Int32View view = readInt32Array(value, name);
  return std::vector<int32_t>(view.data, view.data + view.length);
}

ByteView readBytes(const Napi::Value& value, const std::string& name) {
  if (!value.IsTypedArray() || value.As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array) {
    fail(name + " must be a Uint8Array or Buffer (got " + typeName(value) + ")");
  }
  Napi::Uint8Array array = value.As<Napi::Uint8Array>();
  return ByteView{array.Data(), array.ElementLength()};
}

MutableByteView readMutableBytes(const Napi::Value& value, const std::string& name) {
  if (!value.IsTypedArray() || value.As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array) {
    fail(name + " must be a Uint8Array or Buffer (got " + typeName(value) + ")");
  }
  Napi::Uint8Array array = value.As<Napi::Uint8Array>();
  return MutableByteView{array.Data(), array.ElementLength()};
}

std::vector<int64_t> readIdList(const Napi::Value& value, const std::string& name) {
  std::vector<int64_t> ids;
  if (!isPresent(value)) return ids;
  if (!value.IsArray()) fail(name + " must be an array of job ids (got " + typeName(value) + ")");
  Napi::Array array = value.As<Napi::Array>();
  const uint32_t n = array.Length();
  ids.reserve(n);
  for (uint32_t i = 0; i < n; i++) {
    ids.push_back(readInteger(array.Get(i), name + "[" + std::to_string(i) + "]", 0,
                              static_cast<int64_t>(kMaxSafeInteger)));
  }
  return ids;
}

}  // namespace kvtier::js

// Errors the addon creates itself (promise rejections) carry the same code
// the TypeScript layer uses.
#pragma once

#include <napi.h>

#include <string>

namespace kvtier {

inline Napi::Error deviceError(Napi::Env env, const std::string& message) {
  Napi::Error error = Napi::Error::New(env, message);
  error.Set("code", Napi::String::New(env, "ERR_KVTIER_DEVICE"));
  return error;
}

}  // namespace kvtier

// Module entry: one instance per JS environment (main thread or worker), no
// process-wide mutable state.
#include <napi.h>

#include "copy_method.h"
#include "device_wrap.h"
#include "js_args.h"
#ifdef KVTIER_WITH_CUDA
#include "cuda_backend.h"
#endif

namespace kvtier {

class KvtierAddon final : public Napi::Addon<KvtierAddon> {
 public:
  KvtierAddon(Napi::Env env, Napi::Object exports) {
#ifdef KVTIER_WITH_CUDA
    const bool withCuda = true;
#else
    const bool withCuda = false;
#endif
    DefineAddon(exports, {
                             InstanceValue("Device", DeviceWrap::defineClass(env), napi_enumerable),
                             InstanceValue("withCuda", Napi::Boolean::New(env, withCuda), napi_enumerable),
                             InstanceMethod<&KvtierAddon::cudaDeviceCount>("cudaDeviceCount", napi_enumerable),
                             InstanceMethod<&KvtierAddon::cudaDeviceProperties>("cudaDeviceProperties",
                                                                                napi_enumerable),
                             InstanceMethod<&KvtierAddon::chooseCopyMethod>("chooseCopyMethod", napi_enumerable),
                         });
  }

 private:
  // The CUDA backend's per-job rule (copy_method.h), for tests and benches:
  // (requested, copyBytes, copyRegions, besideCompute) -> 'kernel' | 'dma'.
  Napi::Value chooseCopyMethod(const Napi::CallbackInfo& info) {
    const CopyMethod requested = parseCopyMethod(js::readString(info[0], "chooseCopyMethod: requested"));
    const uint64_t bytes = js::readUnsigned(info[1], "chooseCopyMethod: copyBytes", js::kMaxSafeInteger);
    const uint64_t regions = js::readUnsigned(info[2], "chooseCopyMethod: copyRegions", js::kMaxSafeInteger);
    const bool beside = js::readBool(info[3], "chooseCopyMethod: besideCompute", false);
    return Napi::String::New(info.Env(), copyMethodName(kvtier::chooseCopyMethod(requested, bytes, regions, beside)));
  }

  Napi::Value cudaDeviceCount(const Napi::CallbackInfo& info) {
#ifdef KVTIER_WITH_CUDA
    return Napi::Number::New(info.Env(), cudaDeviceCountOrZero());
#else
    return Napi::Number::New(info.Env(), 0);
#endif
  }

  Napi::Value cudaDeviceProperties(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
#ifdef KVTIER_WITH_CUDA
    if (!info[0].IsNumber()) throw Napi::TypeError::New(env, "cudaDeviceProperties: deviceIndex must be a number");
    const CudaDeviceProperties p = kvtier::cudaDeviceProperties(info[0].As<Napi::Number>().Int32Value());
    Napi::Object o = Napi::Object::New(env);
    o.Set("name", p.name);
    o.Set("totalMemoryBytes", static_cast<double>(p.totalMemoryBytes));
    o.Set("computeCapability", std::to_string(p.computeMajor) + "." + std::to_string(p.computeMinor));
    o.Set("driverVersion", p.driverVersion);
    o.Set("runtimeVersion", p.runtimeVersion);
    return o;
#else
    throw Napi::Error::New(env, "cudaDeviceProperties: this addon was built without CUDA");
#endif
  }
};

}  // namespace kvtier

using kvtier::KvtierAddon;
NODE_API_ADDON(KvtierAddon)

// Construction, teardown and liveness of the JS-facing Device.

#include "device_wrap.h"

#include <stdexcept>
#include <string>

#include "device_errors.h"
#include "device_options.h"
#include "host_backend.h"
#include "js_args.h"
#ifdef KVTIER_WITH_CUDA
#include "cuda_backend.h"
#endif

namespace kvtier {

namespace {

std::unique_ptr<Backend> createBackend(const DeviceConfig& config, const DeviceGeometry& geometry,
                                       CompletionSink& sink) {
  if (config.backend == "host") return createHostBackend(geometry, config.hostLink, sink);
#ifdef KVTIER_WITH_CUDA
  return createCudaBackend(config, geometry, sink);
#else
  throw std::invalid_argument("backend = 'cuda' is not available: this addon was built without CUDA");
#endif
}

}  // namespace

void onNotify(Napi::Env env, Napi::Function, NotifyTarget* target, void*) {
  // env is null when queued calls are dropped during teardown.
  if (env == nullptr || target == nullptr || target->device == nullptr) return;
  target->device->clearNotifyFlag();
  try {
    target->device->drain(env);
  } catch (const std::exception&) {
    // Settling a promise only fails while the environment is terminating
    // (a worker being stopped): nobody is left to observe it, and an error
    // thrown back into Node here would abort the process.
  }
}

Napi::Function DeviceWrap::defineClass(Napi::Env env) {
  return DefineClass(env, "Device",
                     {
                         InstanceMethod<&DeviceWrap::whenOpen>("whenOpen"),
                         InstanceMethod<&DeviceWrap::info>("info"),
                         InstanceMethod<&DeviceWrap::submitTransfer>("submitTransfer"),
                         InstanceMethod<&DeviceWrap::pollFinished>("pollFinished"),
                         InstanceMethod<&DeviceWrap::waitJobs>("waitJobs"),
                         InstanceMethod<&DeviceWrap::pendingJobs>("pendingJobs"),
                         InstanceMethod<&DeviceWrap::forward>("forward"),
                         InstanceMethod<&DeviceWrap::lastForwardDeviceMs>("lastForwardDeviceMs"),
                         InstanceMethod<&DeviceWrap::lastForwardDeviceSpan>("lastForwardDeviceSpan"),
                         InstanceMethod<&DeviceWrap::setFaults>("setFaults"),
                         InstanceMethod<&DeviceWrap::faultCounters>("faultCounters"),
                         InstanceMethod<&DeviceWrap::synchronize>("synchronize"),
                         InstanceMethod<&DeviceWrap::timeContiguousCopy>("timeContiguousCopy"),
                         InstanceMethod<&DeviceWrap::readGpuBlock>("readGpuBlock"),
                         InstanceMethod<&DeviceWrap::writeGpuBlock>("writeGpuBlock"),
                         InstanceMethod<&DeviceWrap::readCpuBlock>("readCpuBlock"),
                         InstanceMethod<&DeviceWrap::writeCpuBlock>("writeCpuBlock"),
                         InstanceMethod<&DeviceWrap::readCpuBlockInto>("readCpuBlockInto"),
                         InstanceMethod<&DeviceWrap::writeCpuBlockFrom>("writeCpuBlockFrom"),
                         InstanceMethod<&DeviceWrap::close>("close"),
                     });
}

DeviceWrap::DeviceWrap(const Napi::CallbackInfo& info) : Napi::ObjectWrap<DeviceWrap>(info) {
  Napi::Env env = info.Env();
  const Napi::Object options = js::readObject(info[0], "options");
  config_ = readDeviceConfig(options);
  geometry_ = makeDeviceGeometry(config_);
  const Napi::Value progress = options.Get("onAllocProgress");
  if (js::isPresent(progress)) {
    if (!progress.IsFunction()) throw std::invalid_argument("onAllocProgress must be a function");
    onAllocProgress_ = Napi::Persistent(progress.As<Napi::Function>());
  }
  backend_ = createBackend(config_, geometry_, *this);

  // Nothing below throws: from here on the device owns threads and hooks.
  target_ = new NotifyTarget{this};
  notifier_ = Notifier::New(env, "kvtier-device", 0, 1, target_,
                            [](Napi::Env, void*, NotifyTarget* target) { delete target; });
  // Registered after the thread-safe function, so on env teardown it runs
  // first (hooks run in reverse order) and stops our threads while the
  // thread-safe function still exists.
  env_ = env;
  napi_add_env_cleanup_hook(env, onEnvTeardown, this);
  teardownHookActive_ = true;
  opener_ = std::thread([this] {
    Completion opened;
    opened.kind = CompletionKind::Opened;
    try {
      backend_->open(abortOpen_);
    } catch (const std::exception& e) {
      opened.error = e.what();
    } catch (...) {
      opened.error = "unknown error while opening the device";
    }
    post(std::move(opened));
  });
}

DeviceWrap::~DeviceWrap() {
  try {
    shutdown(Napi::Env(env_), false);
  } catch (...) {
    // A finalizer must not throw; shutdown has freed what it could.
  }
}

void DeviceWrap::onEnvTeardown(void* arg) {
  auto* device = static_cast<DeviceWrap*>(arg);
  device->teardownHookActive_ = false;  // it is being consumed
  try {
    device->shutdown(Napi::Env(device->env_), false);
  } catch (...) {
  }
}

// Keeps the event loop alive only while the device owes a completion, so an
// idle worker can exit.
void DeviceWrap::updateLiveness(Napi::Env env) {
  if (notifierReleased_) return;
  const bool busy = state_ == State::Opening || !inFlight_.empty() || forwardDeferred_.has_value() ||
                    !tokenWaiters_.empty();
  if (busy == notifierReferenced_) return;
  if (busy) {
    notifier_.Ref(env);
  } else {
    notifier_.Unref(env);
  }
  notifierReferenced_ = busy;
}

void DeviceWrap::shutdown(Napi::Env env, bool settle) {
  if (state_ == State::Closed) return;
  abortOpen_.store(true);
  if (opener_.joinable()) opener_.join();
  if (backend_) backend_->shutdown();
  {
    std::lock_guard<std::mutex> lock(completionsMutex_);
    completions_.clear();
  }
  state_ = State::Closed;
  if (settle) {
    for (auto& w : openWaiters_) w.Reject(deviceError(env, "whenOpen: device is closed").Value());
    std::unordered_set<JobWaiter*> rejected;
    for (auto& [id, waiters] : waitersByJob_) {
      for (const auto& w : waiters) {
        if (rejected.insert(w.get()).second) w->deferred.Reject(deviceError(env, "waitJobs: device is closed").Value());
      }
    }
    if (forwardDeferred_) forwardDeferred_->Reject(deviceError(env, "forward: device is closed").Value());
    for (auto& [token, d] : tokenWaiters_) d.Reject(deviceError(env, "device is closed").Value());
  }
  openWaiters_.clear();
  waitersByJob_.clear();
  forwardDeferred_.reset();
  tokenWaiters_.clear();
  inFlight_.clear();
  unpolled_.clear();
  if (!notifierReleased_) {
    // Queued notifications may still arrive; they find no device.
    target_->device = nullptr;
    notifier_.Release();
    notifierReleased_ = true;
  }
  if (teardownHookActive_) {
    napi_remove_env_cleanup_hook(env, onEnvTeardown, this);
    teardownHookActive_ = false;
  }
}

void DeviceWrap::requireOpen(const char* operation) const {
  const std::string op(operation);
  switch (state_) {
    case State::Open: return;
    case State::Opening: throw std::runtime_error(op + ": device is still opening");
    case State::Failed: throw std::runtime_error(op + ": device failed to open: " + openError_);
    case State::Closed: throw std::runtime_error(op + ": device is closed");
  }
}

Napi::Value DeviceWrap::whenOpen(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Promise::Deferred deferred = Napi::Promise::Deferred::New(env);
  switch (state_) {
    case State::Open: deferred.Resolve(env.Undefined()); break;
    case State::Opening: openWaiters_.push_back(deferred); break;
    case State::Failed: deferred.Reject(deviceError(env, "device failed to open: " + openError_).Value()); break;
    case State::Closed: deferred.Reject(deviceError(env, "whenOpen: device is closed").Value()); break;
  }
  return deferred.Promise();
}

Napi::Value DeviceWrap::info(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  requireOpen("info");
  Napi::Object o = Napi::Object::New(env);
  o.Set("backend", config_.backend);
  o.Set("deviceName", backend_->deviceName());
  o.Set("bytesPerGpuBlock", static_cast<double>(geometry_.bytesPerGpuBlock));
  o.Set("bytesPerCpuBlock", static_cast<double>(geometry_.bytesPerCpuBlock));
  o.Set("gpuBytes", static_cast<double>(geometry_.gpuBytes));
  o.Set("cpuBytes", static_cast<double>(geometry_.cpuBytes));
  o.Set("cpuChunks", static_cast<double>(geometry_.cpu.numChunks));
  return o;
}

Napi::Value DeviceWrap::close(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  shutdown(env, true);
  return env.Undefined();
}

}  // namespace kvtier

// The JS-facing Device: argument checking, job bookkeeping and promise
// settlement on the JS thread, over a backend that runs the work on its own
// threads and reports back through a thread-safe function.
#pragma once

#include <napi.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "backend.h"
#include "fault_injector.h"
#include "id_interval_set.h"
#include "kv_geometry.h"

namespace kvtier {

class DeviceWrap;

// The thread-safe function's context. It outlives the DeviceWrap when the
// wrapper is collected with notifications still queued: `device` is then null.
struct NotifyTarget {
  DeviceWrap* device = nullptr;
};

void onNotify(Napi::Env env, Napi::Function callback, NotifyTarget* target, void* data);

class DeviceWrap final : public Napi::ObjectWrap<DeviceWrap>, private CompletionSink {
 public:
  static Napi::Function defineClass(Napi::Env env);

  explicit DeviceWrap(const Napi::CallbackInfo& info);
  ~DeviceWrap() override;

  // JS thread: settles everything the backend has finished.
  void drain(Napi::Env env);
  void clearNotifyFlag() { notifyScheduled_.store(false); }

 private:
  enum class State { Opening, Open, Failed, Closed };

  struct InFlightJob {
    Direction direction;
    bool ok;
    std::vector<int32_t> failedGpuBlockIds;
    std::vector<int32_t> loadGpuBlockIds;  // reported as failed if the device errors
    uint64_t bytes;
  };

  struct FinishedJob {
    int64_t jobId;
    Direction direction;
    bool ok;
    std::vector<int32_t> failedGpuBlockIds;
    uint64_t bytes;
    double elapsedMs;
    double startMs;        // since the device's time origin; negative: not timed
    double submitMs;       // host time the submit began, on startMs's axis; negative: not measured
    double enqueueMs;      // host enqueue time inside the span; negative: not measured
    std::string error;     // the device's failure, if it could not run the job
    std::string copyPath;  // how the bytes moved
  };

  // One waitJobs call: resolves when `remaining` of its in-flight jobs reach 0.
  struct JobWaiter {
    size_t remaining;
    Napi::Promise::Deferred deferred;
  };

  // JS methods.
  Napi::Value whenOpen(const Napi::CallbackInfo& info);
  Napi::Value info(const Napi::CallbackInfo& info);
  Napi::Value submitTransfer(const Napi::CallbackInfo& info);
  Napi::Value pollFinished(const Napi::CallbackInfo& info);
  Napi::Value waitJobs(const Napi::CallbackInfo& info);
  Napi::Value pendingJobs(const Napi::CallbackInfo& info);
  Napi::Value forward(const Napi::CallbackInfo& info);
  // The last forward that succeeded, as the device timed it (ms); null before one.
  Napi::Value lastForwardDeviceMs(const Napi::CallbackInfo& info);
  // The same forward as a span on the device's time axis: { startMs, elapsedMs, submitMs, enqueueMs }; null before one.
  Napi::Value lastForwardDeviceSpan(const Napi::CallbackInfo& info);
  Napi::Value setFaults(const Napi::CallbackInfo& info);
  Napi::Value faultCounters(const Napi::CallbackInfo& info);
  Napi::Value synchronize(const Napi::CallbackInfo& info);
  Napi::Value timeContiguousCopy(const Napi::CallbackInfo& info);
  Napi::Value readGpuBlock(const Napi::CallbackInfo& info);
  Napi::Value writeGpuBlock(const Napi::CallbackInfo& info);
  Napi::Value readCpuBlock(const Napi::CallbackInfo& info);
  Napi::Value writeCpuBlock(const Napi::CallbackInfo& info);
  // Copies between a CPU block and a caller's buffer at an offset, returning
  // the CRC-32C of the block's bytes (device_block_checksum.cc).
  Napi::Value readCpuBlockInto(const Napi::CallbackInfo& info);
  Napi::Value writeCpuBlockFrom(const Napi::CallbackInfo& info);
  Napi::Value close(const Napi::CallbackInfo& info);

  // CompletionSink: any thread.
  void post(Completion&& completion) override;

  void requireOpen(const char* operation) const;
  // Splits `after` into jobs still in flight (returned) and finished ones;
  // an id that was never submitted is an error naming `name`.
  std::vector<int64_t> liveJobs(const std::vector<int64_t>& ids, const std::string& name) const;
  uint32_t readBlockId(const Napi::Value& value, const char* operation, uint64_t limit, const char* limitName) const;
  // The offset argument of readCpuBlockInto/writeCpuBlockFrom, checked so that
  // a whole CPU block fits in a buffer of `length` bytes from it.
  uint64_t readBlockOffset(const Napi::Value& value, const char* operation, const char* bufferName, size_t length) const;
  // Calls visit(segment, imageOffset) for every segment of CPU block `id` in
  // the order of its block image: `segment` points into the tier's pinned
  // chunk, `imageOffset` is where those bytes sit in a flat copy of the block.
  template <typename Visit>
  void forEachCpuSegment(uint32_t id, Visit&& visit) const {
    const CpuTierGeometry& cpu = geometry_.cpu;
    uint64_t imageOffset = 0;
    for (uint64_t j = 0; j < cpu.offloadFactor; j++) {
      for (uint32_t s = 0; s < cpu.segments; s++) {
        const CpuTierGeometry::Location at = cpu.locate(id * cpu.offloadFactor + j, s);
        visit(backend_->cpuChunk(at.chunk) + at.offset, imageOffset);
        imageOffset += cpu.segmentBytes;
      }
    }
  }

  void handleOpened(Napi::Env env, const Completion& c);
  void handleProgress(Napi::Env env, const Completion& c);
  void handleJob(Napi::Env env, const Completion& c);
  void handleForward(Napi::Env env, const Completion& c);
  void handleToken(Napi::Env env, const Completion& c);
  void updateLiveness(Napi::Env env);

  // Stops the opener and the backend, frees memory and lets go of the
  // thread-safe function. `settle` rejects pending promises (only when JS
  // can run: not from finalizers or env teardown).
  void shutdown(Napi::Env env, bool settle);
  static void onEnvTeardown(void* device);

  DeviceConfig config_;
  DeviceGeometry geometry_{};
  std::unique_ptr<Backend> backend_;
  State state_ = State::Opening;
  std::string openError_;

  std::thread opener_;
  std::atomic<bool> abortOpen_{false};
  Napi::FunctionReference onAllocProgress_;
  std::string progressError_;
  std::vector<Napi::Promise::Deferred> openWaiters_;

  using Notifier = Napi::TypedThreadSafeFunction<NotifyTarget, void, onNotify>;
  Notifier notifier_;
  NotifyTarget* target_ = nullptr;
  bool notifierReferenced_ = true;
  bool notifierReleased_ = false;
  napi_env env_ = nullptr;
  bool teardownHookActive_ = false;

  std::mutex completionsMutex_;
  std::vector<Completion> completions_;
  std::atomic<bool> notifyScheduled_{false};

  std::unordered_map<int64_t, InFlightJob> inFlight_;
  IdIntervalSet finished_;
  std::vector<FinishedJob> unpolled_;
  std::unordered_map<int64_t, std::vector<std::shared_ptr<JobWaiter>>> waitersByJob_;
  std::optional<Napi::Promise::Deferred> forwardDeferred_;
  double lastForwardMs_ = -1;  // -1: no forward has finished yet
  double lastForwardStartMs_ = -1;  // negative: not timed
  double lastForwardSubmitMs_ = -1;  // negative: not measured
  double lastForwardEnqueueMs_ = -1;  // negative: not measured
  std::unordered_map<int64_t, Napi::Promise::Deferred> tokenWaiters_;
  int64_t nextToken_ = 0;
  FaultInjector faults_;
};

}  // namespace kvtier

// Transfer jobs and everything that waits on the streams: submission with
// fault decisions, results, waits, synchronize and the timed contiguous copy.

#include <algorithm>
#include <stdexcept>
#include <string>
#include <unordered_set>

#include "device_errors.h"
#include "device_options.h"
#include "device_wrap.h"
#include "js_args.h"

namespace kvtier {

namespace {

Napi::Array toJsArray(Napi::Env env, const std::vector<int32_t>& values) {
  Napi::Array array = Napi::Array::New(env, values.size());
  for (size_t i = 0; i < values.size(); i++) array.Set(static_cast<uint32_t>(i), Napi::Number::New(env, values[i]));
  return array;
}

}  // namespace

std::vector<int64_t> DeviceWrap::liveJobs(const std::vector<int64_t>& ids, const std::string& name) const {
  std::vector<int64_t> live;
  for (size_t i = 0; i < ids.size(); i++) {
    if (inFlight_.count(ids[i]) != 0) {
      live.push_back(ids[i]);
    } else if (!finished_.contains(ids[i])) {
      throw std::invalid_argument(name + "[" + std::to_string(i) + "] = " + std::to_string(ids[i]) +
                                  " names a job that was never submitted");
    }
  }
  return live;
}

Napi::Value DeviceWrap::submitTransfer(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  requireOpen("submitTransfer");
  drain(env);
  const Napi::Object job = js::readObject(info[0], "submitTransfer: job");
  const int64_t jobId = js::readInteger(job.Get("jobId"), "submitTransfer: jobId", 0,
                                        static_cast<int64_t>(js::kMaxSafeInteger));
  const Direction direction = readDirection(job.Get("direction"), "submitTransfer: direction");
  const js::Int32View gpu = js::readInt32Array(job.Get("gpuBlockIds"), "submitTransfer: gpuBlockIds");
  const js::Int32View cpu = js::readInt32Array(job.Get("cpuBlockIds"), "submitTransfer: cpuBlockIds");
  const Napi::Value first = job.Get("firstSubBlock");
  const uint32_t firstSubBlock =
      js::isPresent(first)
          ? static_cast<uint32_t>(js::readUnsigned(first, "submitTransfer: firstSubBlock", js::kMaxInt32))
          : 0;
  const bool orderAfterCompute = js::readBool(job.Get("orderAfterCompute"), "submitTransfer: orderAfterCompute", true);
  const std::vector<int64_t> after = js::readIdList(job.Get("after"), "submitTransfer: after");

  if (inFlight_.count(jobId) != 0) {
    throw std::invalid_argument("submitTransfer: jobId = " + std::to_string(jobId) + " is already in flight");
  }
  std::vector<int64_t> live = liveJobs(after, "submitTransfer: after");
  const TransferRequest request{direction, gpu.data, gpu.length, cpu.data, cpu.length, firstSubBlock};
  validateTransfer(geometry_, request);

  // Faults are drawn here, in submission order, so runs are reproducible.
  std::vector<uint8_t> poisoned;
  std::vector<int32_t> failedGpuBlockIds;
  bool storeFails = false;
  if (direction == Direction::CpuToGpu) {
    failedGpuBlockIds = faults_.decideLoad(gpu.data, gpu.length, poisoned);
  } else {
    storeFails = faults_.decideStore();
    // A failed store leaves poison in its CPU blocks rather than data.
    if (storeFails) poisoned.assign(gpu.length, 1);
  }
  TransferWork work;
  work.jobId = jobId;
  work.direction = direction;
  work.plan = planTransfer(geometry_, request, poisoned);
  work.orderAfterCompute = orderAfterCompute;
  work.after = std::move(live);
  work.delayMs = faults_.delayForJob();
  work.injectedError = faults_.decideDeviceError(jobId);
  const uint64_t bytes = work.plan.copiedBytes;
  backend_->submitTransfer(std::move(work));

  InFlightJob record{direction, !storeFails && failedGpuBlockIds.empty(), std::move(failedGpuBlockIds), {}, bytes};
  if (direction == Direction::CpuToGpu) record.loadGpuBlockIds.assign(gpu.data, gpu.data + gpu.length);
  inFlight_.emplace(jobId, std::move(record));
  finished_.erase(jobId);
  updateLiveness(env);
  return env.Undefined();
}

Napi::Value DeviceWrap::pollFinished(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  requireOpen("pollFinished");
  drain(env);
  Napi::Array results = Napi::Array::New(env, unpolled_.size());
  for (size_t i = 0; i < unpolled_.size(); i++) {
    const FinishedJob& job = unpolled_[i];
    Napi::Object o = Napi::Object::New(env);
    o.Set("jobId", static_cast<double>(job.jobId));
    o.Set("direction", directionName(job.direction));
    o.Set("ok", job.ok);
    o.Set("failedGpuBlockIds", toJsArray(env, job.failedGpuBlockIds));
    o.Set("bytes", static_cast<double>(job.bytes));
    o.Set("elapsedMs", job.elapsedMs);
    o.Set("startMs", job.startMs);
    o.Set("submitMs", job.submitMs);
    o.Set("enqueueMs", job.enqueueMs);
    if (!job.error.empty()) o.Set("error", job.error);
    if (!job.copyPath.empty()) o.Set("copyPath", job.copyPath);
    results.Set(static_cast<uint32_t>(i), o);
  }
  unpolled_.clear();
  return results;
}

Napi::Value DeviceWrap::waitJobs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  requireOpen("waitJobs");
  drain(env);
  const std::vector<int64_t> ids = js::readIdList(info[0], "waitJobs: jobIds");
  Napi::Promise::Deferred deferred = Napi::Promise::Deferred::New(env);
  std::unordered_set<int64_t> pending;
  for (size_t i = 0; i < ids.size(); i++) {
    if (inFlight_.count(ids[i]) != 0) {
      pending.insert(ids[i]);
    } else if (!finished_.contains(ids[i])) {
      deferred.Reject(deviceError(env, "waitJobs: jobIds[" + std::to_string(i) + "] = " + std::to_string(ids[i]) +
                                           " names a job that was never submitted")
                          .Value());
      return deferred.Promise();
    }
  }
  if (pending.empty()) {
    deferred.Resolve(env.Undefined());
    return deferred.Promise();
  }
  auto waiter = std::make_shared<JobWaiter>(JobWaiter{pending.size(), deferred});
  for (int64_t id : pending) waitersByJob_[id].push_back(waiter);
  return deferred.Promise();
}

Napi::Value DeviceWrap::pendingJobs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  requireOpen("pendingJobs");
  drain(env);
  return Napi::Number::New(env, static_cast<double>(inFlight_.size()));
}

Napi::Value DeviceWrap::synchronize(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  requireOpen("synchronize");
  const int64_t token = nextToken_++;
  backend_->submitSync(token);
  Napi::Promise::Deferred deferred = Napi::Promise::Deferred::New(env);
  tokenWaiters_.emplace(token, deferred);
  updateLiveness(env);
  return deferred.Promise();
}

Napi::Value DeviceWrap::timeContiguousCopy(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  requireOpen("timeContiguousCopy");
  const Direction direction = readDirection(info[0], "timeContiguousCopy: direction");
  if (geometry_.cpu.numChunks == 0) {
    throw std::invalid_argument("timeContiguousCopy: the device has no CPU tier (numCpuBlocks = 0)");
  }
  const uint64_t limit = std::min(geometry_.gpuBytes, geometry_.cpu.chunkBytes(0));
  const uint64_t bytes = js::readUnsigned(info[1], "timeContiguousCopy: bytes", limit);
  if (bytes == 0) throw std::invalid_argument("timeContiguousCopy: bytes = 0 must be positive");
  const int64_t token = nextToken_++;
  backend_->submitTimedCopy(token, direction, bytes);
  Napi::Promise::Deferred deferred = Napi::Promise::Deferred::New(env);
  tokenWaiters_.emplace(token, deferred);
  updateLiveness(env);
  return deferred.Promise();
}

Napi::Value DeviceWrap::setFaults(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  requireOpen("setFaults");
  faults_.configure(readFaultSettings(info[0], geometry_.kv.numGpuBlocks));
  return env.Undefined();
}

Napi::Value DeviceWrap::faultCounters(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  requireOpen("faultCounters");
  const FaultCounters& c = faults_.counters();
  Napi::Object o = Napi::Object::New(env);
  o.Set("loadBlocksFailed", static_cast<double>(c.loadBlocksFailed));
  o.Set("storesFailed", static_cast<double>(c.storesFailed));
  o.Set("jobsDelayed", static_cast<double>(c.jobsDelayed));
  o.Set("jobsFailedOnDevice", static_cast<double>(c.jobsFailedOnDevice));
  return o;
}

}  // namespace kvtier

// Settling, on the JS thread, what the backend threads reported.

#include <cstring>
#include <string>

#include "device_errors.h"
#include "device_wrap.h"

namespace kvtier {

void DeviceWrap::post(Completion&& completion) {
  {
    std::lock_guard<std::mutex> lock(completionsMutex_);
    completions_.push_back(std::move(completion));
  }
  // One notification covers everything queued until the JS thread drains.
  if (!notifyScheduled_.exchange(true)) notifier_.NonBlockingCall();
}

void DeviceWrap::drain(Napi::Env env) {
  if (state_ == State::Closed) return;
  std::vector<Completion> batch;
  {
    std::lock_guard<std::mutex> lock(completionsMutex_);
    batch.swap(completions_);
  }
  for (const Completion& c : batch) {
    // A progress callback may close the device.
    if (state_ == State::Closed) return;
    switch (c.kind) {
      case CompletionKind::Opened: handleOpened(env, c); break;
      case CompletionKind::AllocProgress: handleProgress(env, c); break;
      case CompletionKind::Job: handleJob(env, c); break;
      case CompletionKind::Forward: handleForward(env, c); break;
      case CompletionKind::Sync:
      case CompletionKind::TimedCopy: handleToken(env, c); break;
    }
  }
  updateLiveness(env);
}

void DeviceWrap::handleOpened(Napi::Env env, const Completion& c) {
  if (opener_.joinable()) opener_.join();
  const std::string error = !c.error.empty() ? c.error : progressError_;
  std::vector<Napi::Promise::Deferred> waiters;
  waiters.swap(openWaiters_);
  if (error.empty()) {
    state_ = State::Open;
    for (auto& w : waiters) w.Resolve(env.Undefined());
  } else {
    state_ = State::Failed;
    openError_ = error;
    backend_->shutdown();
    for (auto& w : waiters) w.Reject(deviceError(env, "device failed to open: " + error).Value());
  }
}

void DeviceWrap::handleProgress(Napi::Env env, const Completion& c) {
  if (onAllocProgress_.IsEmpty() || !progressError_.empty()) return;
  try {
    onAllocProgress_.Call({Napi::Number::New(env, static_cast<double>(c.allocatedBytes)),
                           Napi::Number::New(env, static_cast<double>(c.totalBytes))});
  } catch (const Napi::Error& e) {
    progressError_ = std::string("onAllocProgress threw: ") + e.Message();
  }
}

void DeviceWrap::handleJob(Napi::Env env, const Completion& c) {
  auto it = inFlight_.find(c.id);
  if (it == inFlight_.end()) return;
  InFlightJob job = std::move(it->second);
  inFlight_.erase(it);
  FinishedJob done{c.id, job.direction, job.ok, std::move(job.failedGpuBlockIds), job.bytes, c.elapsedMs, c.startMs,
                   c.submitMs, c.enqueueMs, c.error, c.copyPath};
  if (!c.error.empty()) {
    // The device could not run it: nothing it wrote can be trusted.
    done.ok = false;
    done.bytes = 0;
    if (job.direction == Direction::CpuToGpu) done.failedGpuBlockIds = std::move(job.loadGpuBlockIds);
  }
  finished_.insert(c.id);
  backend_->releaseJob(c.id);
  unpolled_.push_back(std::move(done));
  auto waiting = waitersByJob_.find(c.id);
  if (waiting == waitersByJob_.end()) return;
  std::vector<std::shared_ptr<JobWaiter>> waiters = std::move(waiting->second);
  waitersByJob_.erase(waiting);
  for (const auto& waiter : waiters) {
    if (--waiter->remaining == 0) waiter->deferred.Resolve(env.Undefined());
  }
}

void DeviceWrap::handleForward(Napi::Env env, const Completion& c) {
  if (!forwardDeferred_) return;
  Napi::Promise::Deferred deferred = *forwardDeferred_;
  forwardDeferred_.reset();
  if (!c.error.empty()) {
    deferred.Reject(deviceError(env, "forward failed on the device: " + c.error).Value());
    return;
  }
  lastForwardMs_ = c.elapsedMs;
  lastForwardStartMs_ = c.startMs;
  lastForwardSubmitMs_ = c.submitMs;
  lastForwardEnqueueMs_ = c.enqueueMs;
  Napi::Uint32Array digests = Napi::Uint32Array::New(env, c.digests.size());
  if (!c.digests.empty()) std::memcpy(digests.Data(), c.digests.data(), c.digests.size() * sizeof(uint32_t));
  deferred.Resolve(digests);
}

void DeviceWrap::handleToken(Napi::Env env, const Completion& c) {
  auto it = tokenWaiters_.find(c.id);
  if (it == tokenWaiters_.end()) return;
  Napi::Promise::Deferred deferred = it->second;
  tokenWaiters_.erase(it);
  if (!c.error.empty()) {
    deferred.Reject(deviceError(env, c.error).Value());
  } else if (c.kind == CompletionKind::TimedCopy) {
    deferred.Resolve(Napi::Number::New(env, c.elapsedMs));
  } else {
    deferred.Resolve(env.Undefined());
  }
}

}  // namespace kvtier

#include "cuda_check.cuh"
#include "cuda_poller.cuh"

namespace kvtier {

void PollEntry::destroyOwnedEvents() {
  if (!ownsEvents) return;
  for (cudaEvent_t e : waitFor) cudaEventDestroy(e);
  if (timingStart != nullptr) cudaEventDestroy(timingStart);
  waitFor.clear();
  timingStart = nullptr;
}

bool SharedCompletion::arrive(Completion& done) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (error_.empty()) error_ = done.error;
  if (--remaining_ > 0) return false;
  done.error = error_;
  return true;
}

void CudaPoller::start(cudaEvent_t origin) {
  origin_ = origin;
  thread_ = std::thread([this] { run(); });
}

void CudaPoller::push(PollEntry entry) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.push_back(std::move(entry));
  }
  queued_.notify_one();
}

void CudaPoller::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  queued_.notify_one();
  if (thread_.joinable()) thread_.join();
  for (PollEntry& entry : entries_) entry.destroyOwnedEvents();
  entries_.clear();
}

void CudaPoller::run() {
  cudaSetDevice(device_);
  for (;;) {
    PollEntry entry;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      queued_.wait(lock, [&] { return stopping_ || !entries_.empty(); });
      if (stopping_) return;
      entry = std::move(entries_.front());
      entries_.pop_front();
    }
    Completion done;
    done.kind = entry.kind;
    done.id = entry.id;
    done.copyPath = entry.copyPath;
    done.submitMs = entry.submitMs;
    done.enqueueMs = entry.enqueueMs;
    cudaError_t error = cudaSuccess;
    for (cudaEvent_t e : entry.waitFor) {
      const cudaError_t status = cudaEventSynchronize(e);
      if (error == cudaSuccess) error = status;
    }
    if (entry.syncStream != nullptr) {
      const cudaError_t status = cudaStreamSynchronize(entry.syncStream);
      if (error == cudaSuccess) error = status;
    }
    if (!entry.error.empty()) {
      done.error = entry.error;
      if (error != cudaSuccess) done.error += "; then " + cudaMessage("device work", error);
    } else if (error != cudaSuccess) {
      done.error = cudaMessage("device work", error);
    } else {
      if (entry.timingStart != nullptr && !entry.waitFor.empty()) {
        // The work itself succeeded: a span that cannot be timed leaves
        // elapsedMs at 0 and startMs negative (callers treat both as
        // unmeasured), not a failure.
        float ms = 0;
        if (cudaEventElapsedTime(&ms, entry.timingStart, entry.waitFor.back()) == cudaSuccess) {
          done.elapsedMs = ms;
          // Events of different streams of one device share its clock.
          float sinceOrigin = 0;
          if (origin_ != nullptr && cudaEventElapsedTime(&sinceOrigin, origin_, entry.timingStart) == cudaSuccess) {
            done.startMs = sinceOrigin;
          } else {
            cudaGetLastError();
          }
        } else {
          cudaGetLastError();
        }
      }
      if (entry.finish) entry.finish(done);
    }
    entry.destroyOwnedEvents();
    if (entry.shared && !entry.shared->arrive(done)) continue;
    sink_.post(std::move(done));
  }
}

}  // namespace kvtier

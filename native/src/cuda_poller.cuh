// Completion threads of the CUDA backend: one per stream, each waiting in
// order for its work's events and posting the completions, as a host stream
// thread does for its own tasks.
#pragma once

#include <cuda_runtime.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backend.h"

namespace kvtier {

// One completion split over several pollers (a synchronize: one part per
// stream). Each poller reports in order, so once the last part is through,
// everything queued before it on every stream has been reported too.
class SharedCompletion {
 public:
  explicit SharedCompletion(int parts) : remaining_(parts) {}
  // Records one part's outcome; true for the last part, whose completion
  // then carries the first error any part saw.
  bool arrive(Completion& done);

 private:
  std::mutex mutex_;
  int remaining_;
  std::string error_;
};

// Work whose completion a CudaPoller reports once its events have completed.
struct PollEntry {
  CompletionKind kind = CompletionKind::Job;
  int64_t id = 0;
  std::vector<cudaEvent_t> waitFor;  // the last one ends the timed span
  cudaEvent_t timingStart = nullptr;
  bool ownsEvents = false;  // destroy waitFor and timingStart afterwards
  std::function<void(Completion&)> finish;
  std::shared_ptr<SharedCompletion> shared;  // set: only the last part posts
  // Set when the work failed while it was being enqueued: the completion
  // carries it once whatever was queued has run.
  std::string error;
  // Set when the end event could not be recorded: wait for the whole stream.
  cudaStream_t syncStream = nullptr;
  std::string copyPath;  // jobs: how the bytes moved
  // Host side of the span (Completion::submitMs, enqueueMs); negative: not measured.
  double submitMs = -1;
  double enqueueMs = -1;

  void destroyOwnedEvents();
};

class CudaPoller {
 public:
  CudaPoller(int device, CompletionSink& sink) : device_(device), sink_(sink) {}
  CudaPoller(const CudaPoller&) = delete;
  CudaPoller& operator=(const CudaPoller&) = delete;
  ~CudaPoller() { stop(); }

  // `origin`: the event every timed span's startMs is measured from (recorded
  // and completed before this call; timing enabled); null leaves startMs unset.
  void start(cudaEvent_t origin);
  void push(PollEntry entry);
  // Call after the streams are synchronized. Entries still queued are dropped
  // without a completion.
  void stop();

 private:
  void run();

  int device_;
  CompletionSink& sink_;
  cudaEvent_t origin_ = nullptr;
  std::mutex mutex_;
  std::condition_variable queued_;
  std::deque<PollEntry> entries_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace kvtier

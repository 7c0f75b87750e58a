// Completion threads of the CUDA backend: one per stream, each waiting in
// order for its work's events and posting the completions, as a host stream
// thread does for its own tasks.
#pragma once

#include <cuda_runtime.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "backend.h"

namespace kvtier {

// Work whose completion a CudaPoller reports once its events have completed.
struct PollEntry {
  CompletionKind kind = CompletionKind::Job;
  int64_t id = 0;
  std::vector<cudaEvent_t> waitFor;  // the last one ends the timed span
  cudaEvent_t timingStart = nullptr;
  bool ownsEvents = false;  // destroy waitFor and timingStart afterwards
  std::function<void(Completion&)> finish;

  void destroyOwnedEvents();
};

class CudaPoller {
 public:
  CudaPoller(int device, CompletionSink& sink) : device_(device), sink_(sink) {}
  CudaPoller(const CudaPoller&) = delete;
  CudaPoller& operator=(const CudaPoller&) = delete;
  ~CudaPoller() { stop(); }

  void start();
  void push(PollEntry entry);
  // Call after the streams are synchronized. Entries still queued are dropped
  // without a completion.
  void stop();

 private:
  void run();

  int device_;
  CompletionSink& sink_;
  std::mutex mutex_;
  std::condition_variable queued_;
  std::deque<PollEntry> entries_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace kvtier

// The interface both backends implement. The device wrapper calls it from the
// JS thread only; backends report finished work through a CompletionSink from
// their own threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "forward_batch.h"
#include "kv_geometry.h"
#include "transfer_plan.h"

namespace kvtier {

enum class CompletionKind { Opened, AllocProgress, Job, Forward, Sync, TimedCopy };

struct Completion {
  CompletionKind kind = CompletionKind::Job;
  int64_t id = 0;  // job id, or the token of a sync / timed copy
  double elapsedMs = 0;
  // Device time from the origin the backend took when it opened to the
  // span's start (ms): the CUDA backend's origin event, the host backend's
  // steady clock at open. Negative: the span was not timed (the work failed
  // on the device, or the events could not be compared).
  double startMs = -1;
  // The host's side of a job's or forward's span. submitMs: host steady-clock
  // time at which the backend's submit call began, on the axis of startMs
  // (since the host time at which the device's origin completed). enqueueMs:
  // host time the submit spent enqueueing the work's own device work after
  // its start mark, which lies inside the device span when the stream was
  // idle. Negative: not measured.
  double submitMs = -1;
  double enqueueMs = -1;
  std::string error;  // non-empty: the device failed to run it
  std::string copyPath;  // jobs: how the bytes moved (kernel, dma-batch, dma-per-region, memcpy, ...)
  std::vector<uint32_t> digests;
  uint64_t allocatedBytes = 0;
  uint64_t totalBytes = 0;
};

class CompletionSink {
 public:
  virtual ~CompletionSink() = default;
  // Called from any thread.
  virtual void post(Completion&& completion) = 0;
};

struct TransferWork {
  int64_t jobId = 0;
  Direction direction = Direction::GpuToCpu;
  TransferPlan plan;
  // Stores: wait for the compute submitted so far.
  bool orderAfterCompute = true;
  // In-flight jobs this one waits for.
  std::vector<int64_t> after;
  double delayMs = 0;
  // Non-empty: the device reports this failure for the job (fault injection),
  // after its delay, as it would a copy that failed on the device.
  std::string injectedError;
};

struct ForwardWork {
  ForwardBatchData batch;
  std::vector<int64_t> after;  // in-flight jobs
  uint64_t computeNs = 0;      // emulated busy time, before the writes
  uint32_t modelSeed = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string deviceName() const = 0;

  // Allocates the GPU buffer and the CPU tier (posting AllocProgress after
  // each chunk) and starts the streams. Runs on its own thread; throws
  // std::runtime_error. Stops early when `abort` becomes true.
  virtual void open(const std::atomic<bool>& abort) = 0;

  // Either throws with nothing of the job queued (it was never submitted), or
  // queues it and posts exactly one Job completion for it later: ok, or with
  // the device's error text if any part of it failed, even while enqueuing.
  virtual void submitTransfer(TransferWork&& work) = 0;
  // The job's completion has been consumed; its completion marks can go.
  virtual void releaseJob(int64_t jobId) = 0;
  virtual void submitForward(ForwardWork&& work) = 0;
  // Posts a Sync completion once every stream has run what was queued before.
  virtual void submitSync(int64_t token) = 0;
  // One contiguous copy of `bytes` on that direction's copy stream, timed on
  // the stream: a store copies the start of the GPU buffer to the start of
  // CPU chunk 0; a load copies the end of chunk 0 to the end of the GPU
  // buffer, so one of each can run at once on disjoint bytes.
  virtual void submitTimedCopy(int64_t token, Direction direction, uint64_t bytes) = 0;

  // Synchronous, stream-unordered access for tests and benches.
  virtual void readGpu(uint64_t offset, void* dst, uint64_t bytes) = 0;
  virtual void writeGpu(uint64_t offset, const void* src, uint64_t bytes) = 0;
  virtual uint8_t* cpuChunk(uint32_t chunk) = 0;

  // Stops the streams (queued work is abandoned) and frees all memory.
  // Idempotent; no completion is posted afterwards.
  virtual void shutdown() = 0;
};

}  // namespace kvtier

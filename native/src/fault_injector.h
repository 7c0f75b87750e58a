// Fault injection in the transfer path. Every decision is drawn on the
// submitting thread in submission order from a seeded generator, so a run is
// reproducible given the seed and the sequence of jobs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

namespace kvtier {

struct FaultSettings {
  std::vector<int32_t> loadFailBlocks;
  double loadFailProbability = 0;
  int64_t loadFailLimit = -1;  // -1: unlimited
  double storeFailProbability = 0;
  double delayMs = 0;
  // Each job waits a further uniform [0, delayJitterMs) on top of delayMs.
  double delayJitterMs = 0;
  // Probability that a job fails on the device as a whole (its completion
  // carries an error, as a copy the GPU could not run does).
  double jobErrorProbability = 0;
  uint64_t seed = 0;
};

struct FaultCounters {
  uint64_t loadBlocksFailed = 0;
  uint64_t storesFailed = 0;
  uint64_t jobsDelayed = 0;
  uint64_t jobsFailedOnDevice = 0;
};

class FaultInjector {
 public:
  FaultInjector();

  // Replaces the settings, restarts the generator from the seed and the
  // failure budget from loadFailLimit. Counters keep accumulating.
  void configure(const FaultSettings& settings);

  // Decides which GPU blocks of a load fail: sets poisoned[i] (resized to n)
  // and returns the failed GPU block ids in job order.
  std::vector<int32_t> decideLoad(const int32_t* gpuIds, size_t n, std::vector<uint8_t>& poisoned);

  // Whether a store fails as a whole.
  bool decideStore();

  // The delay (ms) this job waits on its stream before it starts.
  double delayForJob();

  // Non-empty: the error the device reports for this job.
  std::string decideDeviceError(int64_t jobId);

  const FaultCounters& counters() const { return counters_; }

 private:
  double nextUniform();

  FaultSettings settings_;
  std::unordered_set<int32_t> failBlocks_;
  uint64_t rngState_ = 0;
  int64_t failuresLeft_ = -1;
  FaultCounters counters_;
};

}  // namespace kvtier

// A set of job ids kept as disjoint [start, end) intervals. Job ids are
// assigned in increasing order, so a long run's finished ids collapse into a
// handful of intervals instead of one entry per job.
#pragma once

#include <cstdint>
#include <cstddef>
#include <map>

namespace kvtier {

class IdIntervalSet {
 public:
  void insert(int64_t id);
  void erase(int64_t id);
  bool contains(int64_t id) const;
  size_t intervalCount() const { return intervals_.size(); }

 private:
  std::map<int64_t, int64_t> intervals_;  // start -> end (exclusive)
};

}  // namespace kvtier

#include "id_interval_set.h"

#include <iterator>

namespace kvtier {

bool IdIntervalSet::contains(int64_t id) const {
  auto it = intervals_.upper_bound(id);
  if (it == intervals_.begin()) return false;
  --it;
  return id < it->second;
}

void IdIntervalSet::insert(int64_t id) {
  if (contains(id)) return;
  int64_t start = id;
  int64_t end = id + 1;
  // Merge with the interval ending at id and the one starting at id + 1.
  auto next = intervals_.find(end);
  if (next != intervals_.end()) {
    end = next->second;
    intervals_.erase(next);
  }
  auto after = intervals_.upper_bound(id);
  if (after != intervals_.begin()) {
    auto before = std::prev(after);
    if (before->second == id) {
      before->second = end;
      return;
    }
  }
  intervals_[start] = end;
}

void IdIntervalSet::erase(int64_t id) {
  auto it = intervals_.upper_bound(id);
  if (it == intervals_.begin()) return;
  --it;
  const int64_t start = it->first;
  const int64_t end = it->second;
  if (id >= end) return;
  intervals_.erase(it);
  if (start < id) intervals_[start] = id;
  if (id + 1 < end) intervals_[id + 1] = end;
}

}  // namespace kvtier

// Host steady-clock spans in milliseconds, the unit completions carry
// (elapsedMs; startMs and submitMs on a backend's time axis from its open).
#pragma once

#include <chrono>

namespace kvtier {

inline double millisecondsBetween(std::chrono::steady_clock::time_point from, std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

inline double millisecondsSince(std::chrono::steady_clock::time_point from) {
  return millisecondsBetween(from, std::chrono::steady_clock::now());
}

}  // namespace kvtier

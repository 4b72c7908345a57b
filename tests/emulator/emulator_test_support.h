// What the emulator's tests share: device arrays straight from cudaMalloc (so that their fresh contents are
// the emulator's, not zeros), copies to and from the host that fail the test on a CUDA error, and a scope
// that restores the emulator's settings a test changes.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "emulator/emulator.h"

namespace nanoforge::emulator_test {

template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t count) : count_(count) {
    EXPECT_EQ(cudaMalloc(&data_, count * sizeof(T)), cudaSuccess);
  }
  ~DeviceArray() { cudaFree(data_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* get() const { return static_cast<T*>(data_); }
  size_t bytes() const { return count_ * sizeof(T); }

  void upload(const std::vector<T>& values) {
    ASSERT_EQ(values.size(), count_);
    ASSERT_EQ(cudaMemcpy(data_, values.data(), bytes(), cudaMemcpyHostToDevice), cudaSuccess);
  }
  std::vector<T> download() const {
    std::vector<T> values(count_);
    EXPECT_EQ(cudaMemcpy(values.data(), data_, bytes(), cudaMemcpyDeviceToHost), cudaSuccess);
    return values;
  }
  void zero() { EXPECT_EQ(cudaMemset(data_, 0, bytes()), cudaSuccess); }

 private:
  void* data_ = nullptr;
  size_t count_;
};

// The emulator's settings for one scope.
class ScopedSettings {
 public:
  ScopedSettings() : saved_(emulator::settings()) {}
  ~ScopedSettings() { emulator::settings() = saved_; }
  emulator::Settings& operator*() { return emulator::settings(); }
  emulator::Settings* operator->() { return &emulator::settings(); }

 private:
  emulator::Settings saved_;
};

inline uint32_t bits_of(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

}  // namespace nanoforge::emulator_test

// The emulator's streams are lazy: work runs only when something CUDA orders after it is waited for. So a
// stream that reads what another stream writes, without an event between them, reads it before it is written
// (as a GPU may), an event orders them, the legacy default stream waits for blocking streams but a
// non-blocking stream waits for nothing, and events time and report what has run.
#include <gtest/gtest.h>

#include <vector>

#include "tests/emulator/emulator_test_kernels.h"
#include "tests/emulator/emulator_test_support.h"

namespace nanoforge::emulator_test {
namespace {

constexpr int64_t kCount = 1000;

class EmulatorStreams : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(cudaStreamCreateWithFlags(&writer_, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&reader_, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaStreamCreate(&blocking_), cudaSuccess);
    ASSERT_EQ(cudaEventCreate(&event_), cudaSuccess);
  }
  void TearDown() override {
    cudaEventDestroy(event_);
    cudaStreamDestroy(writer_);
    cudaStreamDestroy(reader_);
    cudaStreamDestroy(blocking_);
  }

  cudaStream_t writer_ = nullptr, reader_ = nullptr, blocking_ = nullptr;
  cudaEvent_t event_ = nullptr;
  DeviceArray<float> source_{kCount}, copy_{kCount};
};

TEST_F(EmulatorStreams, AStreamThatDoesNotWaitForAnotherReadsBeforeItWrites) {
  fill(source_.get(), kCount, 1.0f, writer_);
  ASSERT_EQ(cudaMemcpyAsync(copy_.get(), source_.get(), source_.bytes(), cudaMemcpyDeviceToDevice, reader_),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(reader_), cudaSuccess);
  EXPECT_EQ(bits_of(copy_.download()[0]), 0xFFFFFFFFu) << "the fill ran before anything waited for it";
  ASSERT_EQ(cudaStreamSynchronize(writer_), cudaSuccess);
  EXPECT_EQ(source_.download()[kCount - 1], 1.0f);
}

TEST_F(EmulatorStreams, AnEventOrdersTwoStreams) {
  fill(source_.get(), kCount, 2.0f, writer_);
  ASSERT_EQ(cudaEventRecord(event_, writer_), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(reader_, event_, 0), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(copy_.get(), source_.get(), source_.bytes(), cudaMemcpyDeviceToDevice, reader_),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(reader_), cudaSuccess);
  EXPECT_EQ(copy_.download(), std::vector<float>(kCount, 2.0f));
}

TEST_F(EmulatorStreams, TheLegacyStreamWaitsForBlockingStreamsOnly) {
  fill(source_.get(), kCount, 3.0f, blocking_);
  EXPECT_EQ(source_.download()[0], 3.0f);  // cudaMemcpy on the legacy stream follows the blocking stream
  fill(source_.get(), kCount, 4.0f, writer_);
  EXPECT_EQ(source_.download()[0], 3.0f);  // but not the non-blocking one
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(source_.download()[0], 4.0f);
}

TEST_F(EmulatorStreams, ANonBlockingStreamDoesNotWaitForTheLegacyStream) {
  fill(source_.get(), kCount, 5.0f, nullptr);
  ASSERT_EQ(cudaMemcpyAsync(copy_.get(), source_.get(), source_.bytes(), cudaMemcpyDeviceToDevice, reader_),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(reader_), cudaSuccess);
  EXPECT_EQ(bits_of(copy_.download()[0]), 0xFFFFFFFFu);
}

TEST_F(EmulatorStreams, EventsCompleteWithTheirStreamAndTime) {
  cudaEvent_t start = nullptr;
  ASSERT_EQ(cudaEventCreate(&start), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(start, writer_), cudaSuccess);
  fill(source_.get(), kCount, 6.0f, writer_);
  ASSERT_EQ(cudaEventRecord(event_, writer_), cudaSuccess);
  ASSERT_EQ(cudaEventQuery(event_), cudaSuccess);  // nothing keeps the fill from running when asked
  float milliseconds = -1;
  ASSERT_EQ(cudaEventElapsedTime(&milliseconds, start, event_), cudaSuccess);
  EXPECT_GE(milliseconds, 0.0f);
  cudaEvent_t untimed = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(untimed, writer_), cudaSuccess);
  EXPECT_EQ(cudaEventElapsedTime(&milliseconds, start, untimed), cudaErrorInvalidResourceHandle);
  cudaGetLastError();
  cudaEventDestroy(untimed);
  cudaEventDestroy(start);
}

}  // namespace
}  // namespace nanoforge::emulator_test

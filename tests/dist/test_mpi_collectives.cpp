// The MPI engine under mpirun (2 and 4 ranks, see CMakeLists.txt): every collective with every reduction,
// f32 / f64 / i32, sizes 1, 7 and 1e6 + 3, the in-place forms, several collectives queued and waited for in
// reverse order, kAverage = sum / world_size, the barrier, and two communicators side by side. Values are
// small integers and halves, so every sum is exact and results are compared exactly.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <numeric>
#include <thread>
#include <vector>

#include "dist/create_communicator.h"

namespace nanoforge {
namespace {

// Short enough that a desynchronised test fails instead of hanging ctest; long for 4 oversubscribed ranks.
constexpr DistOptions kOptions{.timeout_seconds = 30};
constexpr int64_t kSizes[] = {1, 7, 1000003};

class MpiCollectives : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<Communicator>> comm = create_communicator(Device::kCpu, kOptions);
    ASSERT_TRUE(comm.ok()) << comm.status();
    comm_ = std::move(comm).value().release();
  }
  static void TearDownTestSuite() {
    delete comm_;
    comm_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(comm_, nullptr); }

  static Communicator& comm() { return *comm_; }
  static int rank() { return comm_->rank(); }
  static int world() { return comm_->world_size(); }
  // The sum over ranks r of (r + 1).
  static double rank_sum() { return world() * (world() + 1) / 2.0; }

  static Communicator* comm_;
};

Communicator* MpiCollectives::comm_ = nullptr;

template <class T>
DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return DType::kF32;
  if constexpr (std::is_same_v<T, double>) return DType::kF64;
  return DType::kI32;
}

template <class T>
TensorView view(std::vector<T>& values) {
  return TensorView(values.data(), {static_cast<int64_t>(values.size())}, dtype_of<T>(), Device::kCpu);
}

template <class T>
TensorView view(std::vector<T>& values, int64_t offset, int64_t count) {
  return TensorView(values.data() + offset, {count}, dtype_of<T>(), Device::kCpu);
}

// Element i of rank r's input: (r + 1) * scale + i % 5, so the sum over ranks is
// rank_sum * scale + world * (i % 5).
template <class T>
std::vector<T> rank_values(int rank, int64_t n, T scale) {
  std::vector<T> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    values[static_cast<size_t>(i)] = static_cast<T>((rank + 1) * scale + static_cast<T>(i % 5));
  return values;
}

template <class T>
void check_all_reduce(Communicator& comm, ReduceOp op, T scale) {
  const int world = comm.world_size();
  const double rank_sum = world * (world + 1) / 2.0;
  for (const int64_t n : kSizes) {
    std::vector<T> buffer = rank_values<T>(comm.rank(), n, scale);
    ASSERT_TRUE(comm.all_reduce(view(buffer), op).wait().ok());
    for (int64_t i = 0; i < n; ++i) {
      double expected = rank_sum * static_cast<double>(scale) + world * static_cast<double>(i % 5);
      if (op == ReduceOp::kAverage) expected /= world;
      ASSERT_EQ(buffer[static_cast<size_t>(i)], static_cast<T>(expected)) << "n=" << n << " i=" << i;
    }
  }
}

TEST_F(MpiCollectives, Engine) {
  EXPECT_EQ(comm().engine_name(), "mpi");
  EXPECT_EQ(rank(), std::atoi(std::getenv("OMPI_COMM_WORLD_RANK")));
  EXPECT_EQ(world(), std::atoi(std::getenv("OMPI_COMM_WORLD_SIZE")));
  EXPECT_EQ(comm().local_rank(), std::atoi(std::getenv("OMPI_COMM_WORLD_LOCAL_RANK")));
  EXPECT_GE(world(), 2);
}

TEST_F(MpiCollectives, AllReduceSumF32) {
  check_all_reduce<float>(comm(), ReduceOp::kSum, 0.5f);
}
TEST_F(MpiCollectives, AllReduceAverageF32) {
  check_all_reduce<float>(comm(), ReduceOp::kAverage, 1.0f);
}
TEST_F(MpiCollectives, AllReduceSumF64) {
  check_all_reduce<double>(comm(), ReduceOp::kSum, 0.25);
}
TEST_F(MpiCollectives, AllReduceAverageF64) {
  check_all_reduce<double>(comm(), ReduceOp::kAverage, 0.5);
}
TEST_F(MpiCollectives, AllReduceSumI32) {
  check_all_reduce<int32_t>(comm(), ReduceOp::kSum, 3);
}

// kAverage is exactly the sum scaled by 1 / world_size (what the trainer relies on for gradients).
TEST_F(MpiCollectives, AverageIsSumOverWorldSize) {
  std::vector<float> summed(1001);
  for (size_t i = 0; i < summed.size(); ++i)
    summed[i] = 0.1f * static_cast<float>(i) + 0.37f * static_cast<float>(rank());
  std::vector<float> averaged = summed;
  ASSERT_TRUE(comm().all_reduce(view(summed), ReduceOp::kSum).wait().ok());
  ASSERT_TRUE(comm().all_reduce(view(averaged), ReduceOp::kAverage).wait().ok());
  for (size_t i = 0; i < summed.size(); ++i)
    ASSERT_EQ(averaged[i], summed[i] * static_cast<float>(1.0 / world())) << i;
}

template <class T>
void check_reduce_scatter(Communicator& comm, ReduceOp op, bool in_place) {
  const int world = comm.world_size();
  const int rank = comm.rank();
  const double rank_sum = world * (world + 1) / 2.0;
  for (const int64_t chunk : {int64_t{1}, int64_t{7}, int64_t{250001}}) {
    std::vector<T> input = rank_values<T>(rank, chunk * world, T(1));
    std::vector<T> separate(static_cast<size_t>(chunk), T(-1));
    const TensorView output = in_place ? view(input, rank * chunk, chunk) : view(separate);
    ASSERT_TRUE(comm.reduce_scatter(view(input), output, op).wait().ok());
    const T* result = output.as<T>();
    for (int64_t k = 0; k < chunk; ++k) {
      double expected = rank_sum + world * static_cast<double>((rank * chunk + k) % 5);
      if (op == ReduceOp::kAverage) expected /= world;
      ASSERT_EQ(result[k], static_cast<T>(expected)) << "chunk=" << chunk << " k=" << k;
    }
  }
}

TEST_F(MpiCollectives, ReduceScatterSumF32) {
  check_reduce_scatter<float>(comm(), ReduceOp::kSum, false);
}
TEST_F(MpiCollectives, ReduceScatterAverageF32) {
  check_reduce_scatter<float>(comm(), ReduceOp::kAverage, false);
}
TEST_F(MpiCollectives, ReduceScatterAverageF64) {
  check_reduce_scatter<double>(comm(), ReduceOp::kAverage, false);
}
TEST_F(MpiCollectives, ReduceScatterSumI32) {
  check_reduce_scatter<int32_t>(comm(), ReduceOp::kSum, false);
}
// NCCL's in-place form: the output is this rank's chunk of the input.
TEST_F(MpiCollectives, ReduceScatterInPlace) {
  check_reduce_scatter<float>(comm(), ReduceOp::kAverage, true);
}

template <class T>
void check_all_gather(Communicator& comm, bool in_place) {
  const int world = comm.world_size();
  for (const int64_t chunk : kSizes) {
    std::vector<T> output(static_cast<size_t>(chunk * world), T(-1));
    std::vector<T> separate = rank_values<T>(comm.rank(), chunk, T(10));
    TensorView input = view(separate);
    if (in_place) {
      std::copy(separate.begin(), separate.end(), output.begin() + comm.rank() * chunk);
      input = view(output, comm.rank() * chunk, chunk);
    }
    ASSERT_TRUE(comm.all_gather(input, view(output)).wait().ok());
    for (int r = 0; r < world; ++r) {
      const std::vector<T> expected = rank_values<T>(r, chunk, T(10));
      for (int64_t k = 0; k < chunk; ++k)
        ASSERT_EQ(output[static_cast<size_t>(r * chunk + k)], expected[static_cast<size_t>(k)])
            << "chunk=" << chunk << " from rank " << r;
    }
  }
}

TEST_F(MpiCollectives, AllGatherF32) {
  check_all_gather<float>(comm(), false);
}
TEST_F(MpiCollectives, AllGatherF64) {
  check_all_gather<double>(comm(), false);
}
TEST_F(MpiCollectives, AllGatherI32) {
  check_all_gather<int32_t>(comm(), false);
}
TEST_F(MpiCollectives, AllGatherInPlace) {
  check_all_gather<float>(comm(), true);
}

TEST_F(MpiCollectives, BroadcastFromEveryRoot) {
  for (int root = 0; root < world(); ++root) {
    for (const int64_t n : kSizes) {
      std::vector<float> buffer = rank_values<float>(rank(), n, 100.0f);
      ASSERT_TRUE(comm().broadcast(view(buffer), root).wait().ok());
      ASSERT_EQ(buffer, rank_values<float>(root, n, 100.0f)) << "root " << root << " n=" << n;
    }
  }
}

// Collectives run in the order they were queued; waiting for them in reverse order changes nothing.
// Two of them touch the same buffer, so their order shows in the result.
TEST_F(MpiCollectives, QueuedCollectivesRunInOrderWhateverTheWaitOrder) {
  const int64_t n = 100003;
  std::vector<float> shared = rank_values<float>(rank(), n, 1.0f);
  std::vector<float> summed = rank_values<float>(rank(), 7, 2.0f);
  std::vector<double> averaged = rank_values<double>(rank(), n, 4.0);
  std::vector<float> gathered(static_cast<size_t>(3 * world()));
  std::vector<float> gather_input = rank_values<float>(rank(), 3, 1.0f);
  std::vector<CommWork> works;
  works.push_back(comm().all_reduce(view(shared), ReduceOp::kSum));  // shared = sum
  works.push_back(comm().all_reduce(view(summed), ReduceOp::kSum));
  works.push_back(comm().all_reduce(view(averaged), ReduceOp::kAverage));
  works.push_back(comm().all_gather(view(gather_input), view(gathered)));
  works.push_back(comm().all_reduce(view(shared), ReduceOp::kAverage));  // the sum is the same everywhere
  works.push_back(comm().broadcast(view(shared), world() - 1));
  for (auto it = works.rbegin(); it != works.rend(); ++it)
    ASSERT_TRUE(it->wait().ok());
  for (const CommWork& work : works)
    EXPECT_TRUE(work.done());
  for (int64_t i = 0; i < n; ++i) {
    const double sum = rank_sum() + world() * static_cast<double>(i % 5);
    ASSERT_EQ(shared[static_cast<size_t>(i)], static_cast<float>(sum)) << i;
    ASSERT_EQ(averaged[static_cast<size_t>(i)],
              (rank_sum() * 4 + world() * static_cast<double>(i % 5)) / world());
  }
  for (int64_t i = 0; i < 7; ++i)
    ASSERT_EQ(summed[static_cast<size_t>(i)], static_cast<float>(rank_sum() * 2 + world() * (i % 5)));
  for (int r = 0; r < world(); ++r)
    for (int k = 0; k < 3; ++k)
      ASSERT_EQ(gathered[static_cast<size_t>(3 * r + k)], static_cast<float>(r + 1 + k % 5));
}

// The compute thread keeps running while a collective is queued: queueing returns at once.
TEST_F(MpiCollectives, QueueingDoesNotBlock) {
  std::vector<float> buffer(1 << 20, 1.0f);
  if (rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the others wait for rank 0
  const auto start = std::chrono::steady_clock::now();
  CommWork work = comm().all_reduce(view(buffer), ReduceOp::kSum);
  const double queue_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (rank() != 0) {
    EXPECT_FALSE(work.done());  // rank 0 is still asleep
  }
  EXPECT_LT(queue_seconds, 0.05);
  ASSERT_TRUE(work.wait().ok());
  EXPECT_EQ(buffer[12345], static_cast<float>(world()));
}

TEST_F(MpiCollectives, BarrierWaitsForTheLastRank) {
  const auto sleep = std::chrono::milliseconds(400);
  if (rank() == world() - 1) std::this_thread::sleep_for(sleep);
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(comm().barrier().ok());
  const auto waited = std::chrono::steady_clock::now() - start;
  if (rank() != world() - 1) {
    EXPECT_GT(waited, sleep / 2);
  }
}

// A second communicator (its own MPI communicators and thread) works beside the first.
TEST_F(MpiCollectives, TwoCommunicators) {
  absl::StatusOr<std::unique_ptr<Communicator>> other = create_communicator(Device::kCpu, kOptions);
  ASSERT_TRUE(other.ok()) << other.status();
  std::vector<float> a(1000, static_cast<float>(rank()));
  std::vector<float> b(1000, 1.0f);
  CommWork work_a = comm().all_reduce(view(a), ReduceOp::kSum);
  CommWork work_b = (*other)->all_reduce(view(b), ReduceOp::kSum);
  ASSERT_TRUE(work_b.wait().ok());
  ASSERT_TRUE(work_a.wait().ok());
  EXPECT_EQ(a[999], static_cast<float>(world() * (world() - 1) / 2));
  EXPECT_EQ(b[0], static_cast<float>(world()));
}

}  // namespace
}  // namespace nanoforge

// main() of the tests that run under mpirun: every rank runs the same tests in the same order (collectives
// must match); rank 0 prints GoogleTest's report, the other ranks print only their failures, prefixed with
// their rank, so a 4-rank run reads like a 1-rank one.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

class FailuresOnly : public ::testing::EmptyTestEventListener {
 public:
  explicit FailuresOnly(std::string rank) : rank_(std::move(rank)) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::printf("[rank %s] %s:%d: Failure\n%s\n", rank_.c_str(),
                result.file_name() ? result.file_name() : "?", result.line_number(), result.summary());
    std::fflush(stdout);
  }

 private:
  std::string rank_;
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  if (rank != nullptr && std::string(rank) != "0") {
    ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailuresOnly(rank));
  }
  return RUN_ALL_TESTS();
}

// The loader's prefetch thread: it shuts down cleanly whatever it is doing (just started, blocked on a full
// ring, mid-stream, after an error, across restores), a data error reaches the consumer at the batch it
// spoils and stays, a slow consumer never waits once the ring is full, and batches live in the ring's fixed
// buffers.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "data/loader/loader.h"
#include "data/shards/open_shard.h"
#include "data/shards/shard_hdf5.h"
#include "h5/file.h"
#include "tests/data/shards/shard_test_files.h"

namespace nanoforge {
namespace {

using testing::TempDir;

class LoaderPrefetchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    paths_ = testing::write_synthetic_shards(dir_, {testing::random_lengths(300, 1, 100, 9)});
    auto set = ShardSet::open(paths_, {});
    ASSERT_TRUE(set.ok()) << set.status();
    data_ = *set;
  }
  LoaderOptions options(int64_t batch_rows = 4) const {
    LoaderOptions o;
    o.batch_rows = batch_rows;
    o.sequence_length = 32;
    o.doc_buffer_size = 20;
    o.ring_batches = 3;
    return o;
  }

  TempDir dir_;
  std::vector<std::string> paths_;
  std::shared_ptr<const ShardSet> data_;
};

TEST_F(LoaderPrefetchTest, ShutsDownCleanlyInEveryPhase) {
  for (int i = 0; i < 50; ++i) {  // right after start
    auto loader = Loader::create(data_, options());
    ASSERT_TRUE(loader.ok());
  }
  {  // blocked on a full ring
    auto loader = Loader::create(data_, options());
    ASSERT_TRUE(loader.ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  {  // holding a batch, mid-stream
    auto loader = Loader::create(data_, options());
    ASSERT_TRUE(loader.ok());
    for (int i = 0; i < 10; ++i)
      ASSERT_TRUE((*loader)->next().ok());
  }
  {  // restored repeatedly while running
    auto loader = Loader::create(data_, options());
    ASSERT_TRUE(loader.ok());
    for (int i = 0; i < 20; ++i) {
      ASSERT_TRUE((*loader)->next().ok());
      ASSERT_TRUE((*loader)->rewind().ok());
    }
  }
}

TEST_F(LoaderPrefetchTest, SlowConsumerNeverWaitsOnceTheRingIsFull) {
  auto loader = Loader::create(data_, options());
  ASSERT_TRUE(loader.ok());
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE((*loader)->next().ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a "training step"
  }
  const LoaderWaitStats stats = (*loader)->wait_stats();
  EXPECT_EQ(stats.batches, 8);
  EXPECT_EQ(stats.waited_batches, 0) << "waited " << stats.total_wait_seconds << " s in all";
}

TEST_F(LoaderPrefetchTest, BatchesLiveInTheRingsFixedBuffers) {
  auto loader = Loader::create(data_, options());
  ASSERT_TRUE(loader.ok());
  const auto buffers = (*loader)->ring_buffers();
  ASSERT_EQ(buffers.size(), 3u);
  for (int i = 0; i < 12; ++i) {
    auto batch = (*loader)->next();
    ASSERT_TRUE(batch.ok());
    bool found = false;
    for (const auto& buffer : buffers)
      found |= buffer.data() == batch->tokens.data();
    EXPECT_TRUE(found) << "batch " << i << " is not in a ring buffer";
  }
}

// A shard opened without the full check, with one token outside the vocabulary: the batch that would hold it
// is an error naming the file, and so is every later call.
TEST_F(LoaderPrefetchTest, DataErrorReachesTheConsumerAndStays) {
  int64_t token_offset = 0;
  {
    auto file = H5File::open_read(paths_[0]);
    ASSERT_TRUE(file.ok());
    token_offset = file->dataset_layout(kShardTokensDataset)->file_offset;
  }
  auto shard = open_token_shard(paths_[0], {});
  ASSERT_TRUE(shard.ok());
  {
    std::fstream stream(paths_[0], std::ios::in | std::ios::out | std::ios::binary);
    const uint16_t bad = 60000;
    for (int64_t d = 0; d < shard->doc_count(); d += 7) {  // the second token of every 7th document
      if (shard->doc_length(d) < 2) continue;
      stream.seekp(token_offset + 2 * (shard->doc_begin(d) + 1));
      stream.write(reinterpret_cast<const char*>(&bad), 2);
    }
  }
  ShardOpenOptions lazy;
  lazy.verify_tokens = false;
  auto set = ShardSet::open(paths_, lazy);
  ASSERT_TRUE(set.ok()) << set.status();
  auto loader = Loader::create(*set, options());
  ASSERT_TRUE(loader.ok());
  absl::Status error;
  for (int i = 0; i < 1000 && error.ok(); ++i)
    error = (*loader)->next().status();
  ASSERT_FALSE(error.ok()) << "the corrupt tokens were never reported";
  EXPECT_EQ(error.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(error.message().find(paths_[0]), std::string::npos) << error;
  EXPECT_NE(error.message().find("token 60000"), std::string::npos) << error;
  EXPECT_EQ((*loader)->next().status(), error);
  EXPECT_EQ((*loader)->next().status(), error);
}

}  // namespace
}  // namespace nanoforge

// The loader's invariants, each a test named after it: its rows are nanochat's packing of the shuffled
// document stream (checked token by token against a reference), the same seed gives the same batches and
// another seed others, resume is exact, N ranks = 1 rank (global row g belongs to rank g mod W), also after
// restoring a state into another world size, all ranks hold the same state, the state survives bytes, a
// state for other data or settings is refused, and the validation loader repeats itself after rewind.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <memory>

#include "data/loader/loader.h"
#include "data/loader/loader_doc_order.h"
#include "tests/data/loader/reference_packer.h"
#include "tests/data/shards/shard_test_files.h"

namespace nanoforge {
namespace {

using testing::TempDir;
using Rows = std::vector<std::vector<int32_t>>;

constexpr int64_t kSeq = 64;
constexpr int64_t kBuffer = 16;

// Three shards of short documents (1..60 tokens), so a few dozen batches cross several epochs.
class LoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    lengths_ = {testing::random_lengths(40, 1, 60, 1), testing::random_lengths(55, 1, 60, 2),
                testing::random_lengths(30, 1, 60, 3)};
    paths_ = testing::write_synthetic_shards(dir_, lengths_);
    ShardOpenOptions options;
    options.expect.tokenizer_hash = testing::kTestTokenizerHash;
    auto set = ShardSet::open(paths_, options);
    ASSERT_TRUE(set.ok()) << set.status();
    data_ = *set;
  }

  LoaderOptions options(int64_t batch_rows, int64_t world_size = 1, int64_t rank = 0,
                        uint64_t seed = 5) const {
    LoaderOptions o;
    o.batch_rows = batch_rows;
    o.sequence_length = kSeq;
    o.world_size = world_size;
    o.rank = rank;
    o.seed = seed;
    o.doc_buffer_size = kBuffer;
    return o;
  }

  std::unique_ptr<Loader> make(const LoaderOptions& o, const LoaderState* resume = nullptr) const {
    auto loader = Loader::create(data_, o, resume);
    EXPECT_TRUE(loader.ok()) << loader.status();
    return loader.ok() ? std::move(*loader) : nullptr;
  }

  // The next `batches` batches' rows, in order; checks the batch's shape and its input/target views.
  static Rows take(Loader& loader, int64_t batches) {
    Rows rows;
    for (int64_t i = 0; i < batches; ++i) {
      auto batch = loader.next();
      EXPECT_TRUE(batch.ok()) << batch.status();
      if (!batch.ok()) return rows;
      EXPECT_EQ(batch->tokens.size(), static_cast<size_t>(batch->batch_rows * (kSeq + 1)));
      for (int64_t b = 0; b < batch->batch_rows; ++b) {
        const auto row = batch->row(b);
        EXPECT_EQ(batch->inputs(b).size(), static_cast<size_t>(kSeq));
        EXPECT_EQ(batch->inputs(b)[0], row[0]);
        EXPECT_EQ(batch->targets(b)[kSeq - 1], row[kSeq]);
        rows.emplace_back(row.begin(), row.end());
      }
    }
    return rows;
  }

  // Rows of ranks 0..W-1 (each `batches` batches of B rows) put back in global row order.
  Rows interleave(int64_t world_size, int64_t batch_rows, int64_t batches,
                  const LoaderState* resume = nullptr) {
    std::vector<Rows> per_rank;
    for (int64_t r = 0; r < world_size; ++r) {
      auto loader = make(options(batch_rows, world_size, r), resume);
      per_rank.push_back(take(*loader, batches));
    }
    Rows global;
    for (int64_t k = 0; k < batches; ++k) {
      for (int64_t j = 0; j < batch_rows; ++j) {
        for (int64_t r = 0; r < world_size; ++r)
          global.push_back(per_rank[r][k * batch_rows + j]);
      }
    }
    return global;
  }

  TempDir dir_;
  std::vector<std::vector<int64_t>> lengths_;
  std::vector<std::string> paths_;
  std::shared_ptr<const ShardSet> data_;
};

// Row tokens rebuilt from scratch: the shuffled order, nanochat's loop on lengths, synthetic document tokens.
TEST_F(LoaderTest, RowsAreNanochatsPackingOfTheShuffledStream) {
  std::vector<int64_t> all_lengths;
  for (const auto& shard : lengths_)
    all_lengths.insert(all_lengths.end(), shard.begin(), shard.end());
  const DocOrder order(static_cast<int64_t>(all_lengths.size()), 5, true);
  const int64_t batches = 40, batch_rows = 4;
  const auto plan = testing::reference_bestfit_rows(
      [&](int64_t position) { return all_lengths[static_cast<size_t>(order.doc_at(position))]; }, kSeq + 1,
      kBuffer, batches * batch_rows);
  Rows expected;
  for (const auto& segments : plan) {
    std::vector<int32_t> row;
    for (const PackedSegment& segment : segments) {
      const int64_t doc = order.doc_at(segment.position);
      const auto tokens = testing::synthetic_document(doc, all_lengths[static_cast<size_t>(doc)]);
      row.insert(row.end(), tokens.begin(), tokens.begin() + segment.length);
    }
    expected.push_back(std::move(row));
  }
  auto loader = make(options(batch_rows));
  const Rows rows = take(*loader, batches);
  ASSERT_EQ(rows.size(), expected.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    ASSERT_EQ(rows[r], expected[r]) << "row " << r;
    ASSERT_EQ(rows[r][0], testing::kTestBos) << "every row starts with BOS";
  }
  const LoaderState state = loader->state();
  EXPECT_GE(state.epoch(), 2) << "the test should cross epochs";
  EXPECT_EQ(state.stats.rows, batches * batch_rows);
  EXPECT_EQ(state.stats.tokens_packed, batches * batch_rows * (kSeq + 1));
}

TEST_F(LoaderTest, SameSeedSameBatchesOtherSeedOtherBatches) {
  auto a = make(options(4, 1, 0, 11));
  auto b = make(options(4, 1, 0, 11));
  auto c = make(options(4, 1, 0, 12));
  const Rows rows_a = take(*a, 20), rows_b = take(*b, 20), rows_c = take(*c, 20);
  EXPECT_EQ(rows_a, rows_b);
  EXPECT_NE(rows_a, rows_c);
}

TEST_F(LoaderTest, ResumeIsExact) {
  auto original = make(options(4));
  take(*original, 7);
  const std::vector<uint8_t> saved = original->state().to_bytes();
  const Rows continued = take(*original, 30);
  auto state = LoaderState::from_bytes(saved);
  ASSERT_TRUE(state.ok()) << state.status();
  auto resumed = make(options(4), &*state);
  EXPECT_EQ(resumed->state(), *state) << "before any batch, the state is the one resumed from";
  EXPECT_EQ(take(*resumed, 30), continued);
  EXPECT_EQ(resumed->state(), original->state());
}

TEST_F(LoaderTest, RestoreInPlaceAndRewind) {
  auto loader = make(options(4));
  const Rows first = take(*loader, 5);
  const LoaderState middle = loader->state();
  const Rows second = take(*loader, 5);
  ASSERT_TRUE(loader->restore(middle).ok());
  EXPECT_EQ(take(*loader, 5), second);
  ASSERT_TRUE(loader->rewind().ok());
  EXPECT_EQ(take(*loader, 5), first);
}

TEST_F(LoaderTest, WorldSizeIndependence) {
  auto single = make(options(6));
  const Rows global = take(*single, 10);
  EXPECT_EQ(interleave(2, 3, 10), global);
  EXPECT_EQ(interleave(3, 2, 10), global);
  EXPECT_EQ(interleave(6, 1, 10), global);
}

TEST_F(LoaderTest, WorldSizeIndependenceAfterRestoringIntoAnotherWorldSize) {
  // Saved by a 3-rank run after 4 steps (all ranks hold the same state), resumed by 1, 2 and 6 ranks.
  std::vector<LoaderState> rank_states;
  for (int64_t r = 0; r < 3; ++r) {
    auto rank_loader = make(options(2, 3, r));
    take(*rank_loader, 4);
    rank_states.push_back(rank_loader->state());
  }
  EXPECT_EQ(rank_states[0], rank_states[1]);
  EXPECT_EQ(rank_states[0], rank_states[2]);
  const LoaderState saved = rank_states[0];
  EXPECT_EQ(saved.next_global_row, 4 * 6);

  auto single = make(options(6));
  take(*single, 4);
  EXPECT_EQ(single->state(), saved) << "the state after 4 steps does not depend on the world size";
  const Rows global = take(*single, 8);

  auto resumed_single = make(options(6), &saved);
  EXPECT_EQ(take(*resumed_single, 8), global);
  EXPECT_EQ(interleave(2, 3, 8, &saved), global);
  EXPECT_EQ(interleave(6, 1, 8, &saved), global);
}

TEST_F(LoaderTest, StateBytesRoundTripAndRejectCorruption) {
  auto loader = make(options(4));
  take(*loader, 3);
  const LoaderState state = loader->state();
  // The buffer is refilled before each pick, so after a row it lacks the document picked last.
  EXPECT_EQ(state.buffered_positions.size(), static_cast<size_t>(kBuffer - 1));
  const std::vector<uint8_t> bytes = state.to_bytes();
  EXPECT_EQ(bytes.size(), 16 + 8 * (15 + kBuffer - 1));
  auto back = LoaderState::from_bytes(bytes);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, state);

  std::vector<uint8_t> truncated(bytes.begin(), bytes.end() - 8);
  EXPECT_EQ(LoaderState::from_bytes(truncated).status().code(), absl::StatusCode::kDataLoss);
  std::vector<uint8_t> bad_magic = bytes;
  bad_magic[0] = 'X';
  EXPECT_EQ(LoaderState::from_bytes(bad_magic).status().code(), absl::StatusCode::kInvalidArgument);
  std::vector<uint8_t> newer = bytes;
  newer[8] = 2;
  EXPECT_EQ(LoaderState::from_bytes(newer).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(LoaderState::from_bytes({}).ok());
}

// Fuzzing found it: a buffered-document count of 2^61 wrapped around when multiplied by 8, matched the size
// of a state with an empty buffer, and the reader then asked for 2^61 positions (std::length_error).
TEST_F(LoaderTest, StateBytesRefuseABufferCountThatWouldWrapAround) {
  auto loader = make(options(4));
  std::vector<uint8_t> bytes = loader->state().to_bytes();
  ASSERT_EQ(loader->state().buffered_positions.size(), 0u);  // the count is the last 8 bytes
  const int64_t wrapping = int64_t{1} << 61;
  std::memcpy(bytes.data() + bytes.size() - 8, &wrapping, 8);
  const absl::StatusOr<LoaderState> state = LoaderState::from_bytes(bytes);
  EXPECT_EQ(state.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(state.status().message().find("2305843009213693952 buffered documents"), std::string::npos)
      << state.status();
}

// Fuzzing found it (loader_state): a row capacity of -2^63 reached the message that compares it with the
// loader's, whose `row_capacity - 1` overflowed (undefined behaviour). Sizes no loader has are refused as
// the state is read. Reproducer: tests/fuzz/corpus/loader_state/regress_row_capacity_min.
TEST_F(LoaderTest, StateBytesRefuseRowAndBufferSizesNoLoaderHas) {
  auto loader = make(options(4));
  const std::vector<uint8_t> bytes = loader->state().to_bytes();
  constexpr size_t kRowCapacityAt = 16 + 4 * 8, kBufferSizeAt = 16 + 5 * 8;  // header, then int64 fields
  for (const auto& [at, value] :
       {std::pair{kRowCapacityAt, std::numeric_limits<int64_t>::min()}, std::pair{kRowCapacityAt, int64_t{1}},
        std::pair{kBufferSizeAt, int64_t{0}}}) {
    std::vector<uint8_t> damaged = bytes;
    std::memcpy(damaged.data() + at, &value, 8);
    const absl::StatusOr<LoaderState> state = LoaderState::from_bytes(damaged);
    EXPECT_EQ(state.status().code(), absl::StatusCode::kDataLoss) << value;
    EXPECT_NE(state.status().message().find("(corrupt state)"), std::string::npos) << state.status();
  }
}

// Found by fuzzing: a state whose cropped-document count was 2^63 - 1 overflowed at the next cropped
// document.
TEST_F(LoaderTest, StateBytesRefusePositionsAndCountsNoLoaderReaches) {
  auto loader = make(options(4));
  const std::vector<uint8_t> bytes = loader->state().to_bytes();
  constexpr size_t kFirstPositionAt = 16 + 6 * 8,
                   kLastCountAt = 16 + 12 * 8;  // next_global_row .. docs_cropped
  for (size_t at = kFirstPositionAt; at <= kLastCountAt; at += 8) {
    for (const int64_t value : {std::numeric_limits<int64_t>::max(), int64_t{-1}}) {
      std::vector<uint8_t> damaged = bytes;
      std::memcpy(damaged.data() + at, &value, 8);
      const absl::StatusOr<LoaderState> state = LoaderState::from_bytes(damaged);
      EXPECT_EQ(state.status().code(), absl::StatusCode::kDataLoss) << "field at " << at << ": " << value;
      EXPECT_NE(state.status().message().find("(corrupt state)"), std::string::npos) << state.status();
    }
  }
}

TEST_F(LoaderTest, RefusesAStateForOtherDataOrSettings) {
  auto loader = make(options(4));
  take(*loader, 2);
  const LoaderState state = loader->state();
  const auto refused = [&](const LoaderOptions& o, std::shared_ptr<const ShardSet> data,
                           const std::string& what) {
    auto other = Loader::create(std::move(data), o, &state);
    ASSERT_FALSE(other.ok()) << "expected a refusal mentioning " << what;
    EXPECT_EQ(other.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(other.status().message().find(what), std::string::npos) << other.status();
  };
  refused(options(4, 1, 0, 6), data_, "seed");
  LoaderOptions longer = options(4);
  longer.sequence_length = kSeq * 2;
  refused(longer, data_, "sequence length");
  LoaderOptions buffer = options(4);
  buffer.doc_buffer_size = kBuffer + 1;
  refused(buffer, data_, "buffer");
  auto fewer = ShardSet::open({paths_[0], paths_[1]}, {});
  ASSERT_TRUE(fewer.ok());
  refused(options(4), *fewer, "other data");
  EXPECT_FALSE(loader
                   ->restore([&] {
                     LoaderState corrupt = state;
                     corrupt.buffered_positions[0] = corrupt.next_stream_position;
                     return corrupt;
                   }())
                   .ok());
}

TEST_F(LoaderTest, RejectsBadOptions) {
  EXPECT_FALSE(Loader::create(data_, options(0)).ok());
  EXPECT_FALSE(Loader::create(data_, options(4, 2, 2)).ok());
  LoaderOptions ring = options(4);
  ring.ring_batches = 1;
  EXPECT_FALSE(Loader::create(data_, ring).ok());
}

TEST_F(LoaderTest, ValidationLoaderRepeatsAfterRewindInFileOrder) {
  LoaderOptions val = options(3, 2, 1);
  val.shuffle = false;
  auto loader = make(val);
  const Rows first = take(*loader, 12);
  ASSERT_TRUE(loader->rewind().ok());
  EXPECT_EQ(take(*loader, 12), first);
  auto fresh = make(val);
  EXPECT_EQ(take(*fresh, 12), first) << "a new validation loader gives the same batches";

  // File order: the stream is documents 0, 1, 2, ... every epoch.
  std::vector<int64_t> all_lengths;
  for (const auto& shard : lengths_)
    all_lengths.insert(all_lengths.end(), shard.begin(), shard.end());
  const auto n = static_cast<int64_t>(all_lengths.size());
  const auto plan = testing::reference_bestfit_rows(
      [&](int64_t position) { return all_lengths[static_cast<size_t>(position % n)]; }, kSeq + 1, kBuffer,
      2 * 12 * 3);
  const auto& segments = plan[1];  // global row 1 is rank 1's first row
  std::vector<int32_t> expected;
  for (const PackedSegment& segment : segments) {
    const auto tokens = testing::synthetic_document(segment.position % n, all_lengths[segment.position % n]);
    expected.insert(expected.end(), tokens.begin(), tokens.begin() + segment.length);
  }
  EXPECT_EQ(first[0], expected);
}

}  // namespace
}  // namespace nanoforge

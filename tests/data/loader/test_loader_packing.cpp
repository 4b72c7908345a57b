// The best-fit packer and the document order: nanochat's choices on hand-made examples (longest that fits,
// first among ties, crop the shortest), equality with a plain transliteration of nanochat's loop on long
// random streams, the waste accounting, restore of the packer, and the shuffle (a bijection per epoch, a
// different one per epoch and per seed).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <set>

#include "data/loader/bos_bestfit_packer.h"
#include "data/loader/loader_doc_order.h"
#include "tests/data/loader/reference_packer.h"
#include "tests/data/shards/shard_test_files.h"

namespace nanoforge {
namespace {

using Segments = std::vector<std::vector<int64_t>>;  // (position, length) per segment

BosBestFitPacker packer_over(std::vector<int64_t> lengths, int64_t capacity, int64_t buffer_docs) {
  return BosBestFitPacker(capacity, buffer_docs, [lengths](int64_t position) {
    return BosBestFitPacker::StreamDoc{position * 10, lengths.at(static_cast<size_t>(position))};
  });
}

Segments pack(BosBestFitPacker& packer) {
  std::vector<PackedSegment> segments;
  packer.pack_row(segments);
  Segments out;
  int64_t total = 0;
  for (const PackedSegment& segment : segments) {
    EXPECT_EQ(segment.doc, segment.position * 10) << "the segment must carry the looked-up document";
    out.push_back({segment.position, segment.length});
    total += segment.length;
  }
  EXPECT_EQ(total, packer.row_capacity()) << "a row is filled exactly: no padding";
  return out;
}

TEST(BosBestFitPacker, PicksTheLongestThatFitsElseCropsTheShortest) {
  // capacity 10, buffer 3, documents by stream position:
  BosBestFitPacker packer = packer_over({6, 3, 4, 9, 5, 12, 2, 7, 3, 1, 1, 1, 1}, 10, 3);
  // buffer [6 3 4]: 6 fits best; refill [3 4 9]: 4 fills the remaining 4.
  EXPECT_EQ(pack(packer), (Segments{{0, 6}, {2, 4}}));
  // buffer [3 9 5]: 9; refill [3 5 12], remaining 1: nothing fits, crop the shortest (3) to 1.
  EXPECT_EQ(pack(packer), (Segments{{3, 9}, {1, 1}}));
  // buffer [5 12 2]: 5; refill [12 2 7], remaining 5: 2; refill [12 7 3], remaining 3: 3.
  EXPECT_EQ(pack(packer), (Segments{{4, 5}, {6, 2}, {8, 3}}));
  const PackingStats& stats = packer.stats();
  EXPECT_EQ(stats.rows, 3);
  EXPECT_EQ(stats.tokens_packed, 30);
  EXPECT_EQ(stats.tokens_cropped, 2);
  EXPECT_EQ(stats.docs_whole, 6);
  EXPECT_EQ(stats.docs_cropped, 1);
  EXPECT_DOUBLE_EQ(stats.crop_fraction(), 2.0 / 32.0);
  EXPECT_EQ(std::vector<int64_t>(packer.buffered_positions().begin(), packer.buffered_positions().end()),
            (std::vector<int64_t>{5, 7}))
      << "the buffer is refilled before a pick, not after";
  EXPECT_EQ(packer.next_position(), 9);
}

TEST(BosBestFitPacker, TiesGoToTheFirstInTheBuffer) {
  BosBestFitPacker fits = packer_over(std::vector<int64_t>(20, 4), 8, 4);
  EXPECT_EQ(pack(fits), (Segments{{0, 4}, {1, 4}}));
  EXPECT_EQ(pack(fits), (Segments{{2, 4}, {3, 4}}));
  // Nothing fits: the shortest is cropped, the first of equal shortest ones.
  BosBestFitPacker crops = packer_over({9, 5, 7, 5, 9, 9, 9, 9}, 3, 4);
  EXPECT_EQ(pack(crops), (Segments{{1, 3}}));
  EXPECT_EQ(pack(crops), (Segments{{3, 3}}));
  EXPECT_EQ(crops.stats().tokens_cropped, 2 + 2);
}

TEST(BosBestFitPacker, WasteIsZeroForExactFitsAndHalfForDoubleLengthDocuments) {
  BosBestFitPacker exact = packer_over(std::vector<int64_t>(100, 17), 17, 10);
  for (int i = 0; i < 50; ++i)
    pack(exact);
  EXPECT_EQ(exact.stats().tokens_cropped, 0);
  EXPECT_EQ(exact.stats().crop_fraction(), 0.0);
  BosBestFitPacker doubled = packer_over(std::vector<int64_t>(100, 34), 17, 10);
  for (int i = 0; i < 50; ++i)
    EXPECT_EQ(pack(doubled).size(), 1u);
  EXPECT_DOUBLE_EQ(doubled.stats().crop_fraction(), 0.5);
}

// The packer against nanochat's loop written out plainly, on long random streams and several shapes.
TEST(BosBestFitPacker, MatchesNanochatsLoopOnRandomStreams) {
  struct Case {
    int64_t capacity, buffer_docs, max_length, rows;
  };
  for (const Case& c : {Case{65, 50, 200, 2000}, Case{2049, 1000, 6000, 300}, Case{257, 7, 300, 2000},
                        Case{10, 1, 25, 500}}) {
    std::mt19937_64 generator(c.capacity * 31 + c.buffer_docs);
    std::lognormal_distribution<double> lognormal(std::log(static_cast<double>(c.max_length) / 6), 1.0);
    std::vector<int64_t> lengths(2000000 / 10);
    for (int64_t& length : lengths) {
      length = std::clamp<int64_t>(static_cast<int64_t>(lognormal(generator)), 1, c.max_length);
    }
    BosBestFitPacker packer = packer_over(lengths, c.capacity, c.buffer_docs);
    const auto expected = testing::reference_bestfit_rows(
        [&](int64_t position) { return lengths.at(static_cast<size_t>(position)); }, c.capacity,
        c.buffer_docs, c.rows);
    int64_t cropped = 0, used = 0;
    for (int64_t r = 0; r < c.rows; ++r) {
      std::vector<PackedSegment> segments;
      packer.pack_row(segments);
      ASSERT_EQ(segments.size(), expected[r].size()) << "capacity " << c.capacity << " row " << r;
      for (size_t s = 0; s < segments.size(); ++s) {
        ASSERT_EQ(segments[s].position, expected[r][s].position) << "capacity " << c.capacity << " row " << r;
        ASSERT_EQ(segments[s].length, expected[r][s].length) << "capacity " << c.capacity << " row " << r;
        const int64_t full = lengths[static_cast<size_t>(segments[s].position)];
        cropped += full - segments[s].length;
        used += full;
      }
    }
    EXPECT_EQ(packer.stats().tokens_cropped, cropped);
    EXPECT_EQ(packer.stats().tokens_packed + packer.stats().tokens_cropped, used);
  }
}

TEST(BosBestFitPacker, RestoredPackerContinuesIdentically) {
  const std::vector<int64_t> lengths = testing::random_lengths(5000, 1, 150, 3);
  BosBestFitPacker original = packer_over(lengths, 65, 20);
  for (int i = 0; i < 100; ++i)
    pack(original);
  const std::vector<int64_t> buffered(original.buffered_positions().begin(),
                                      original.buffered_positions().end());
  BosBestFitPacker restored = packer_over(lengths, 65, 20);
  restored.restore(original.next_position(), buffered, original.stats());
  for (int i = 0; i < 200; ++i)
    ASSERT_EQ(pack(restored), pack(original)) << "row " << i;
  EXPECT_EQ(restored.stats(), original.stats());
}

TEST(FeistelPermutation, IsABijectionForAnySize) {
  for (uint64_t n : {1u, 2u, 3u, 4u, 5u, 17u, 1000u, 4096u, 65537u}) {
    for (uint64_t key : {0ull, 1ull, 0xdeadbeefull}) {
      const FeistelPermutation permutation(n, key);
      std::vector<bool> seen(n, false);
      for (uint64_t i = 0; i < n; ++i) {
        const uint64_t value = permutation(i);
        ASSERT_LT(value, n);
        ASSERT_FALSE(seen[value]) << "n " << n << " maps two indices to " << value;
        seen[value] = true;
      }
    }
  }
}

TEST(FeistelPermutation, KeysGiveUnrelatedOrders) {
  const uint64_t n = 10000;
  const FeistelPermutation a(n, 1), b(n, 2);
  int same = 0, fixed_points = 0;
  for (uint64_t i = 0; i < n; ++i) {
    same += a(i) == b(i);
    fixed_points += a(i) == i;
  }
  EXPECT_LT(same, 20);          // a random pair of permutations agrees on ~1 place
  EXPECT_LT(fixed_points, 20);  // and a random permutation has ~1 fixed point
}

TEST(DocOrder, EveryEpochVisitsEveryDocumentOnceInItsOwnOrder) {
  const int64_t n = 777;
  const DocOrder order(n, 42, true);
  std::vector<int64_t> epoch0, epoch1;
  for (int64_t p = 0; p < n; ++p)
    epoch0.push_back(order.doc_at(p));
  for (int64_t p = n; p < 2 * n; ++p)
    epoch1.push_back(order.doc_at(p));
  EXPECT_EQ(order.epoch_of(n), 1);
  std::vector<int64_t> sorted0 = epoch0, sorted1 = epoch1, all(n);
  std::sort(sorted0.begin(), sorted0.end());
  std::sort(sorted1.begin(), sorted1.end());
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(sorted0, all);
  EXPECT_EQ(sorted1, all);
  EXPECT_NE(epoch0, epoch1) << "each epoch is shuffled afresh";
  EXPECT_NE(epoch0, all) << "shuffled";
  // Same seed, same order (also looked up out of order); other seed, other order; unshuffled, file order.
  const DocOrder again(n, 42, true), other(n, 43, true), plain(n, 42, false);
  EXPECT_EQ(again.doc_at(n + 5), epoch1[5]);
  EXPECT_EQ(again.doc_at(3), epoch0[3]);
  int differences = 0;
  for (int64_t p = 0; p < n; ++p)
    differences += other.doc_at(p) != epoch0[static_cast<size_t>(p)];
  EXPECT_GT(differences, n / 2);
  for (int64_t p = 0; p < 2 * n; ++p)
    ASSERT_EQ(plain.doc_at(p), p % n);
}

}  // namespace
}  // namespace nanoforge

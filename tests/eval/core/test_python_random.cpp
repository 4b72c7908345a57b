// PythonRandom against CPython 3.11's random module: the expected values are CPython's output for the
// expression in each comment, so a wrong seeding, twist, tempering or sampling branch shows up as a mismatch.
#include <gtest/gtest.h>

#include <numeric>

#include "eval/core/python_random.h"

namespace nanoforge {
namespace {

std::vector<int64_t> range_without(int64_t n, int64_t skip) {
  std::vector<int64_t> values;
  for (int64_t i = 0; i < n; ++i) {
    if (i != skip) values.push_back(i);
  }
  return values;
}

TEST(PythonRandom, SeedsFromAnIntLikeCPython) {
  PythonRandom seeded(1234);  // [random.Random(1234).getrandbits(32) for _ in range(3)]
  EXPECT_EQ(seeded.next_uint32(), 4150886329u);
  EXPECT_EQ(seeded.next_uint32(), 3342196574u);
  EXPECT_EQ(seeded.next_uint32(), 1892932127u);
  PythonRandom zero(0);  // zero is one key word
  EXPECT_EQ(zero.next_uint32(), 3626764237u);
  EXPECT_EQ(zero.next_uint32(), 1654615998u);
  PythonRandom wide((1ull << 40) + 5);  // two key words, least significant first
  EXPECT_EQ(wide.next_uint32(), 2166296868u);
  EXPECT_EQ(wide.next_uint32(), 2220160828u);
}

TEST(PythonRandom, GetrandbitsOverAndUnderOneWord) {
  PythonRandom random(7);  // r = random.Random(7); r.getrandbits(48), r.getrandbits(64), r.getrandbits(5)
  EXPECT_EQ(random.getrandbits(48), 266800464311352ull);
  EXPECT_EQ(random.getrandbits(64), 7283207964119141687ull);
  EXPECT_EQ(random.getrandbits(5), 20u);
}

TEST(PythonRandom, RandbelowRejectsLikeCPython) {
  PythonRandom random(99);  // r = random.Random(99); [r.randrange(1000) for _ in range(5)], r._randbelow(1)
  for (const uint64_t expected : {413u, 389u, 204u, 613u, 183u})
    EXPECT_EQ(random.randbelow(1000), expected);
  EXPECT_EQ(random.randbelow(1), 0u);
}

TEST(PythonRandom, ShuffleIsBaseEvalsOrder) {
  std::vector<int> items(12);  // x = list(range(12)); random.Random(1337).shuffle(x)
  std::iota(items.begin(), items.end(), 0);
  PythonRandom(1337).shuffle(items);
  EXPECT_EQ(items, (std::vector<int>{6, 0, 1, 4, 10, 7, 3, 11, 2, 5, 8, 9}));
}

TEST(PythonRandom, SampleTakesCPythonsPoolListBranchForSmallPopulations) {
  // random.Random(1234 + 3).sample([i for i in range(14) if i != 3], 10): 13 <= 21 + 4**3, the pool list
  EXPECT_EQ(PythonRandom(1237).sample(range_without(14, 3), 10),
            (std::vector<int64_t>{2, 7, 5, 4, 10, 6, 11, 12, 13, 9}));
  // random.Random(1234).sample(list(range(21)), 5): 21 <= 21
  EXPECT_EQ(PythonRandom(1234).sample(range_without(21, -1), 5), (std::vector<int64_t>{14, 3, 0, 2, 1}));
}

TEST(PythonRandom, SampleTakesCPythonsSetBranchForLargePopulations) {
  // random.Random(1234).sample(list(range(22)), 5): 22 > 21, a selected-set; differs from the list in the
  // last
  EXPECT_EQ(PythonRandom(1234).sample(range_without(22, -1), 5), (std::vector<int64_t>{14, 3, 0, 2, 18}));
  // random.Random(1234 + 0).sample([i for i in range(90) if i != 0], 10): 89 > 85
  EXPECT_EQ(PythonRandom(1234).sample(range_without(90, 0), 10),
            (std::vector<int64_t>{57, 15, 1, 12, 75, 5, 86, 89, 11, 13}));
}

}  // namespace
}  // namespace nanoforge

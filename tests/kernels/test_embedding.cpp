// embedding_forward / embedding_backward: the lookup is a copy (compared exactly), the scatter-add backward
// is checked against a token-order reference, against central differences, for accumulation into what
// d_table holds, and for bitwise thread-count independence.
#include "tests/kernels/op_test_util.h"

namespace nanoforge::test {
namespace {

constexpr int32_t kVocab = 11;

template <class T>
void check_embedding_forward() {
  HostTensor<T> table = random_tensor<T>({kVocab, 24}, 30);
  HostTensor<int32_t> ids = random_ids({3, 7}, kVocab, 31);
  HostTensor<T> out({3, 7, 24}, T{-9});
  ops::embedding_forward(out.view(), table.view(), ids.view());
  std::vector<double> expected;
  for (int32_t id : ids.data) {
    for (int64_t c = 0; c < 24; ++c)
      expected.push_back(table[id * 24 + c]);
  }
  EXPECT_TRUE(all_close(out, expected, 0));  // a row copy: exact
}

TEST(Embedding, ForwardCopiesRowsF64) {
  check_embedding_forward<double>();
}
TEST(Embedding, ForwardCopiesRowsF32) {
  check_embedding_forward<float>();
}

// Token-order scatter-add in double, starting from what d_table held.
std::vector<double> reference_embedding_backward(const std::vector<double>& d_table,
                                                 const std::vector<double>& d_out,
                                                 const HostTensor<int32_t>& ids, int64_t channels) {
  std::vector<double> result = d_table;
  for (int64_t n = 0; n < ids.numel(); ++n) {
    for (int64_t c = 0; c < channels; ++c)
      result[ids[n] * channels + c] += d_out[n * channels + c];
  }
  return result;
}

TEST(Embedding, BackwardMatchesTokenOrderReferenceF64) {
  HostTensor<double> d_table = random_tensor<double>({kVocab, 80}, 32);
  HostTensor<double> d_out = random_tensor<double>({50, 80}, 33);
  HostTensor<int32_t> ids = random_ids({50}, kVocab, 34);
  const std::vector<double> expected =
      reference_embedding_backward(d_table.as_double(), d_out.as_double(), ids, 80);
  ops::embedding_backward(d_table.view(), d_out.view(), ids.view(), {});
  EXPECT_TRUE(all_close(d_table, expected, 0));  // the op promises token order, as the reference: exact
}

// f32: each table row sums ~50/11 ~ 5 gradients in float; a few roundings of 6e-8 each.
TEST(Embedding, BackwardMatchesTokenOrderReferenceF32) {
  HostTensor<float> d_table = random_tensor<float>({kVocab, 80}, 32);
  HostTensor<float> d_out = random_tensor<float>({50, 80}, 33);
  HostTensor<int32_t> ids = random_ids({50}, kVocab, 34);
  const std::vector<double> expected =
      reference_embedding_backward(d_table.as_double(), d_out.as_double(), ids, 80);
  ops::embedding_backward(d_table.view(), d_out.view(), ids.view(), {});
  EXPECT_TRUE(all_close(d_table, expected, 1e-6));
}

// L = sum(w * table[ids]); d_table is added to, so it starts non-zero and only the difference is the
// gradient.
TEST(Embedding, BackwardMatchesFiniteDifferences) {
  HostTensor<double> table = random_tensor<double>({kVocab, 16}, 35);
  HostTensor<int32_t> ids = random_ids({2, 9}, kVocab, 36);
  ids[0] = ids[5] = ids[17] = 4;  // a repeated id, gathered several times
  HostTensor<double> w = random_tensor<double>({2, 9, 16}, 37);
  HostTensor<double> out({2, 9, 16});
  const Objective objective = [&] {
    ops::embedding_forward(out.view(), table.view(), ids.view());
    return weighted_sum(w, out);
  };
  HostTensor<double> d_table = random_tensor<double>({kVocab, 16}, 38);
  const HostTensor<double> before = d_table;
  ops::embedding_backward(d_table.view(), w.view(), ids.view(), {});
  EXPECT_TRUE(gradient_matches(table, added(d_table, before), objective, 39, /*max_elements=*/kVocab * 16));
}

// 200 channels: several column tasks; 600 tokens over 7 ids: long chains of adds into the same rows.
template <class T>
void check_embedding_backward_thread_independence() {
  const HostTensor<T> d_out = random_tensor<T>({600, 200}, 40);
  const HostTensor<int32_t> ids = random_ids({600}, 7, 41);
  EXPECT_TRUE(same_bits_for_every_thread_count<T>([&] {
    HostTensor<T> d_table = random_tensor<T>({7, 200}, 42), grad = d_out;
    HostTensor<int32_t> token_ids = ids;
    ops::embedding_backward(d_table.view(), grad.view(), token_ids.view(), {});
    return std::vector<HostTensor<T>>{d_table};
  }));
}

TEST(Embedding, BackwardIsThreadCountIndependentF32) {
  check_embedding_backward_thread_independence<float>();
}
TEST(Embedding, BackwardIsThreadCountIndependentF64) {
  check_embedding_backward_thread_independence<double>();
}

TEST(EmbeddingContracts, RejectsIdsOutsideTheVocabulary) {
  use_threadsafe_death_tests();
  HostTensor<double> table({kVocab, 4}), out({3, 4});
  HostTensor<int32_t> too_large({3}, 0), negative({3}, 0);
  too_large[1] = kVocab;
  negative[2] = -1;
  EXPECT_DEATH(ops::embedding_forward(out.view(), table.view(), too_large.view()), "outside \\[0, 11\\)");
  EXPECT_DEATH(ops::embedding_forward(out.view(), table.view(), negative.view()), "outside \\[0, 11\\)");
  EXPECT_DEATH(ops::embedding_backward(table.view(), out.view(), too_large.view(), {}),
               "outside \\[0, 11\\)");
  HostTensor<double> short_out({2, 4});
  HostTensor<int32_t> ids({3}, 0);
  EXPECT_DEATH(ops::embedding_forward(short_out.view(), table.view(), ids.view()), "does not hold");
}

}  // namespace
}  // namespace nanoforge::test

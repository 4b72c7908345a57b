// plan_grad_buckets and the ownership arithmetic.
#include "optim/grad_buckets.h"

#include <fmt/format.h>

#include <algorithm>

namespace nanoforge {
namespace {

int64_t round_up(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

}  // namespace

std::vector<GradBucket> plan_grad_buckets(const BucketPlanInput& input) {
  const int64_t world = std::max(1, input.world_size);
  std::vector<GradBucket> buckets;

  // Elementwise tensors in backward order (ascending offset).
  std::vector<BucketTensor> elementwise = input.elementwise;
  std::sort(elementwise.begin(), elementwise.end(),
            [](const BucketTensor& a, const BucketTensor& b) { return a.offset < b.offset; });
  GradBucket current;
  int64_t current_elements = 0;
  auto close = [&] {
    if (current.tensors.empty()) return;
    current.padded_elements = round_up(current_elements, world);
    buckets.push_back(current);
    current = GradBucket{};
    current_elements = 0;
  };
  for (const BucketTensor& tensor : elementwise) {
    const int64_t cap =
        (buckets.empty() ? input.first_bucket_bytes : input.bucket_bytes) / input.element_bytes;
    if (!current.tensors.empty() && (current_elements + tensor.numel > cap ||
                                     tensor.gather_class != current.tensors.back().gather_class)) {
      close();
    }
    current.tensors.push_back(tensor);
    current_elements += tensor.numel;
    current.ready_offset = std::max(current.ready_offset, tensor.offset + tensor.numel);
  }
  close();

  // Matrix stacks: world_size consecutive matrices (backward order) of each group.
  for (size_t g = 0; g < input.matrix_groups.size(); ++g) {
    std::vector<BucketTensor> matrices = input.matrix_groups[g];
    std::sort(matrices.begin(), matrices.end(),
              [](const BucketTensor& a, const BucketTensor& b) { return a.offset < b.offset; });
    for (size_t first = 0; first < matrices.size(); first += static_cast<size_t>(world)) {
      GradBucket stack;
      stack.kind = GradBucket::Kind::kMatrixStack;
      stack.group = static_cast<int>(g);
      const size_t last = std::min(matrices.size(), first + static_cast<size_t>(world));
      stack.tensors.assign(matrices.begin() + static_cast<std::ptrdiff_t>(first),
                           matrices.begin() + static_cast<std::ptrdiff_t>(last));
      stack.padded_elements = world * matrices[first].numel;
      for (const BucketTensor& tensor : stack.tensors) {
        stack.ready_offset = std::max(stack.ready_offset, tensor.offset + tensor.numel);
      }
      buckets.push_back(stack);
    }
  }
  std::stable_sort(buckets.begin(), buckets.end(),
                   [](const GradBucket& a, const GradBucket& b) { return a.ready_offset < b.ready_offset; });
  return buckets;
}

OwnedPiece owned_piece(const GradBucket& bucket, size_t tensor_index, int rank, int world_size) {
  const int64_t chunk = bucket.padded_elements / world_size;
  const int64_t chunk_begin = rank * chunk, chunk_end = chunk_begin + chunk;
  int64_t start = 0;  // where the tensor starts in the bucket
  for (size_t i = 0; i < tensor_index; ++i)
    start += bucket.tensors[i].numel;
  const int64_t begin = std::max(start, chunk_begin),
                end = std::min(start + bucket.tensors[tensor_index].numel, chunk_end);
  if (begin >= end) return {0, 0, 0};
  return {begin - start, end - start, begin - chunk_begin};
}

std::string describe_buckets(const std::vector<GradBucket>& buckets, int64_t element_bytes) {
  int64_t elementwise = 0, stacks = 0, bytes = 0;
  for (const GradBucket& bucket : buckets) {
    (bucket.kind == GradBucket::Kind::kElementwise ? elementwise : stacks) += 1;
    bytes += bucket.padded_elements * element_bytes;
  }
  return fmt::format("{} gradient buckets ({} elementwise, {} matrix stacks), {:.1f} MB staged",
                     buckets.size(), elementwise, stacks, static_cast<double>(bytes) / 1e6);
}

}  // namespace nanoforge

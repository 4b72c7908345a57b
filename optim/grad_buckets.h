// The gradient buckets of a data-parallel step: which gradients are reduced together, in which order, and
// which rank owns (updates) what — knowing tensors by their place in the flat gradient buffer only, nothing
// of models or transports. The flat buffer is in backward order, so a bucket can go as soon as its last
// tensor is final. Two kinds, for ZeRO-1 sharding that Muon can live with: elementwise buckets (AdamW
// parameters; rank r owns chunk r of the packed staging buffer) and matrix-stack buckets (Muon matrices of
// one shape, one per rank: rank k owns the k-th matrix whole, as Muon's orthogonalisation needs). How they
// fill and close: docs/distributed.md, "The gradient buckets".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nanoforge {

struct BucketTensor {
  int64_t offset = 0;  // in the flat buffer, elements
  int64_t numel = 0;
  int gather_class = 0;  // elementwise tensors of different classes never share a bucket (gathered in
                         // different dtypes: the GPU's bf16 compute copies, fp32 masters)
};

struct BucketPlanInput {
  std::vector<BucketTensor> elementwise;                 // every AdamW tensor
  std::vector<std::vector<BucketTensor>> matrix_groups;  // Muon groups: same-shape matrices each
  int world_size = 1;
  int64_t bucket_bytes = 25 << 20;
  int64_t first_bucket_bytes = 1 << 20;
  int64_t element_bytes = 4;
};

struct GradBucket {
  enum class Kind { kElementwise, kMatrixStack } kind = Kind::kElementwise;
  int group = -1;                     // matrix stacks: index into matrix_groups
  std::vector<BucketTensor> tensors;  // packing order; stacks: slot k = tensors[k]
  int64_t padded_elements = 0;        // staging size, a multiple of world_size
  int64_t ready_offset = 0;           // final once the gradients of [0, ready_offset) are
  int64_t chunk_elements() const { return padded_elements; }
};

// Buckets in launch order (ascending ready_offset; ties in a fixed order), the same on every rank.
std::vector<GradBucket> plan_grad_buckets(const BucketPlanInput& input);

// The part of an elementwise bucket's tensor k that lies in rank r's chunk: [begin, end) within the tensor
// (empty when begin == end) and where it sits in the chunk.
struct OwnedPiece {
  int64_t tensor_begin = 0, tensor_end = 0;
  int64_t chunk_offset = 0;
};
OwnedPiece owned_piece(const GradBucket& bucket, size_t tensor_index, int rank, int world_size);

std::string describe_buckets(const std::vector<GradBucket>& buckets, int64_t element_bytes);

}  // namespace nanoforge

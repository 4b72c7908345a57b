// cuDNN's fused attention (flash-attention kernels NVIDIA tunes per GPU) through the graph API's C++
// frontend: one SDPA forward and one SDPA backward graph per shape, window, scale and deterministic mode,
// built once (validate, heuristics, support check, plan) and cached for the process. The tensors keep our
// layouts: q, k, v, out and their gradients (B, T, heads, D) row-major are cuDNN's (B, heads, T, D) with
// strides (T*R*D, D, R*D, 1), R = heads for a dense tensor and the whole tensor's heads for a head slice (q,
// k, v inside the fused projection's output); lse (B, H, T) f32 is cuDNN's softmax Stats (B, H, T, 1), which
// is the same natural-log log-sum-exp of the scaled scores, so flash and cuDNN passes can read each other's
// lse. Host code only: cuDNN queues its kernels on the default stream, in order with ours.
#include "kernels/cuda/cudnn_attention.h"

#include <absl/status/statusor.h>
#include <cudnn_frontend.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <tuple>
#include <unordered_map>

#include "kernels/cuda/attention_workspace_choice.h"
#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/cuda_memory.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/scratch.h"
#include "kernels/ops.h"

namespace nanoforge::cuda {
namespace {

namespace fe = cudnn_frontend;
using Graph = fe::graph::Graph;

// The graphs' tensor ids (the variant pack's keys).
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

enum class Pass { kForward, kBackward };

// Everything a graph depends on. left_bound is cuDNN's diagonal-band left bound: key j is kept for query t
// when j + left_bound > t, i.e. the left_bound keys t - left_bound + 1 .. t; our window keeps
// t - window .. t, so left_bound = window + 1, and 0 (none) for plain causal (window >= T).
// The row fields are how many heads apart consecutive positions of each tensor lie (a head slice's are its
// whole tensor's; out and d_out are dense).
struct GraphKey {
  Pass pass;
  int device;
  int64_t batch, seq, heads, kv_heads, head_dim, left_bound;
  float scale;
  bool deterministic;
  int64_t q_row, k_row, v_row, d_q_row, d_k_row, d_v_row;

  auto tie() const {
    return std::tie(pass, device, batch, seq, heads, kv_heads, head_dim, left_bound, scale, deterministic,
                    q_row, k_row, v_row, d_q_row, d_k_row, d_v_row);
  }
  bool operator<(const GraphKey& other) const { return tie() < other.tie(); }
};

// A built graph and its workspace, or why cuDNN cannot run the key.
struct CachedGraph {
  std::shared_ptr<Graph> graph;
  cudnnHandle_t handle = nullptr;  // its device's
  int64_t workspace_bytes = 0;
  absl::Status status;
  bool fallback_reported = false;
};

struct Cache {
  std::mutex mutex;
  std::map<int, cudnnHandle_t> handles;  // one per device, on the default stream
  std::map<GraphKey, CachedGraph> graphs;
};

Cache& cache() {
  static Cache* instance = new Cache();  // never destroyed: queued cuDNN kernels may outlive static teardown
  return *instance;
}

int current_device() {
  int device = 0;
  NANOFORGE_CUDA_CHECK(cudaGetDevice(&device));
  return device;
}

int64_t left_bound(int64_t seq, int64_t window) {
  return window >= seq ? 0 : window + 1;
}

// (B, T, heads, D) row-major, positions row_heads heads apart (heads itself when dense), as cuDNN's
// (B, heads, T, D).
std::vector<int64_t> token_major_strides(int64_t seq, int64_t row_heads, int64_t head_dim) {
  return {seq * row_heads * head_dim, head_dim, row_heads * head_dim, 1};
}
fe::graph::Tensor_attributes token_major(const char* name, Uid uid, int64_t batch, int64_t seq, int64_t heads,
                                         int64_t row_heads, int64_t head_dim) {
  return fe::graph::Tensor_attributes()
      .set_name(name)
      .set_uid(uid)
      .set_dim({batch, heads, seq, head_dim})
      .set_stride(token_major_strides(seq, row_heads, head_dim));
}

std::vector<int64_t> stats_dims(const GraphKey& key) {
  return {key.batch, key.heads, key.seq, 1};
}
std::vector<int64_t> stats_strides(const GraphKey& key) {
  return {key.heads * key.seq, key.seq, 1, 1};
}

// Causal (the diagonal through the top-left corner, nothing right of it) and, for a window, the left bound.
template <class Attributes>
void set_mask(Attributes& attributes, const GraphKey& key) {
  attributes.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT).set_diagonal_band_right_bound(0);
  if (key.left_bound > 0) attributes.set_diagonal_band_left_bound(static_cast<int>(key.left_bound));
}

std::shared_ptr<Graph> describe_graph(const GraphKey& key) {
  auto graph = std::make_shared<Graph>();
  graph->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  const int64_t B = key.batch, T = key.seq, H = key.heads, Hkv = key.kv_heads, D = key.head_dim;
  auto q = graph->tensor(token_major("q", kQ, B, T, H, key.q_row, D));
  auto k = graph->tensor(token_major("k", kK, B, T, Hkv, key.k_row, D));
  auto v = graph->tensor(token_major("v", kV, B, T, Hkv, key.v_row, D));
  if (key.pass == Pass::kForward) {
    auto options = fe::graph::SDPA_attributes()
                       .set_name("nanoforge_attention_forward")
                       .set_generate_stats(true)
                       .set_attn_scale(key.scale);
    set_mask(options, key);
    auto [o, stats] = graph->sdpa(q, k, v, options);
    o->set_output(true).set_uid(kO).set_dim({B, H, T, D}).set_stride(token_major_strides(T, H, D));
    stats->set_output(true)
        .set_uid(kStats)
        .set_data_type(fe::DataType_t::FLOAT)
        .set_dim(stats_dims(key))
        .set_stride(stats_strides(key));
    return graph;
  }
  auto o = graph->tensor(token_major("o", kO, B, T, H, H, D));
  auto d_o = graph->tensor(token_major("d_o", kDO, B, T, H, H, D));
  auto stats = graph->tensor(fe::graph::Tensor_attributes()
                                 .set_name("stats")
                                 .set_uid(kStats)
                                 .set_dim(stats_dims(key))
                                 .set_stride(stats_strides(key))
                                 .set_data_type(fe::DataType_t::FLOAT));
  auto options = fe::graph::SDPA_backward_attributes()
                     .set_name("nanoforge_attention_backward")
                     .set_attn_scale(key.scale)
                     .set_deterministic_algorithm(key.deterministic);
  set_mask(options, key);
  auto [d_q, d_k, d_v] = graph->sdpa_backward(q, k, v, o, d_o, stats, options);
  d_q->set_output(true).set_uid(kDQ).set_dim({B, H, T, D}).set_stride(token_major_strides(T, key.d_q_row, D));
  d_k->set_output(true)
      .set_uid(kDK)
      .set_dim({B, Hkv, T, D})
      .set_stride(token_major_strides(T, key.d_k_row, D));
  d_v->set_output(true)
      .set_uid(kDV)
      .set_dim({B, Hkv, T, D})
      .set_stride(token_major_strides(T, key.d_v_row, D));
  return graph;
}

std::string describe_key(const GraphKey& key) {
  return fmt::format(
      "{} (batch {}, seq {}, heads {}/{} kv, head dim {}, {}{})",
      key.pass == Pass::kForward ? "forward" : "backward", key.batch, key.seq, key.heads, key.kv_heads,
      key.head_dim,
      key.left_bound == 0 ? std::string("causal") : fmt::format("window {}", key.left_bound - 1),
      key.deterministic ? ", deterministic" : "");
}

absl::StatusOr<cudnnHandle_t> handle_locked(Cache& c, int device) {
  auto found = c.handles.find(device);
  if (found != c.handles.end()) return found->second;
  cudnnHandle_t handle = nullptr;
  const cudnnStatus_t status = cudnnCreate(&handle);
  if (status != CUDNN_STATUS_SUCCESS) {
    return absl::FailedPreconditionError(
        fmt::format("cudnnCreate on GPU {} failed: {}", device, cudnnGetErrorString(status)));
  }
  c.handles.emplace(device, handle);
  return handle;
}

// The frontend's build, step by step, so that a refusal says which step refused (the support check is
// the one that says whether the installed cuDNN has an engine for this graph on this GPU).
absl::Status build_graph(Graph& graph, cudnnHandle_t handle, int64_t* workspace_bytes) {
  const auto step = [](fe::error_t result, const char* what) {
    return result.is_good()
               ? absl::OkStatus()
               : absl::FailedPreconditionError(fmt::format("{}: {}", what, result.get_message()));
  };
  try {
    if (absl::Status s = step(graph.validate(), "validate"); !s.ok()) return s;
    if (absl::Status s = step(graph.build_operation_graph(handle), "build_operation_graph"); !s.ok())
      return s;
    if (absl::Status s = step(graph.create_execution_plans({fe::HeurMode_t::A}), "create_execution_plans");
        !s.ok())
      return s;
    if (absl::Status s = step(graph.check_support(), "check_support"); !s.ok()) return s;
    if (absl::Status s = step(graph.build_plans(), "build_plans"); !s.ok()) return s;
    return step(graph.get_workspace_size(*workspace_bytes), "get_workspace_size");
  } catch (const std::exception& e) {  // the frontend throws from some cuDNN backend failures
    return absl::FailedPreconditionError(e.what());
  }
}

// A workspace beyond what the device can spare: flash runs the shape (said once, by use_fallback), or a
// deterministic backward refuses with the recipe keys to change (attention_workspace_choice.h).
absl::Status check_workspace(const GraphKey& key, int64_t workspace_bytes) {
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) return absl::OkStatus();
  const AttentionWorkspaceChoice choice = choose_attention_workspace(
      workspace_bytes, attention_workspace_budget_bytes(static_cast<int64_t>(free_bytes)), key.deterministic);
  if (choice.decision == AttentionWorkspaceDecision::kUseCudnn) return absl::OkStatus();
  return absl::ResourceExhaustedError(choice.message);
}

// The cached graph of `key`, built on first use (a refusal is cached too).
CachedGraph& graph_for(const GraphKey& key) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto found = c.graphs.find(key);
  if (found != c.graphs.end()) return found->second;
  CachedGraph& entry = c.graphs[key];
  absl::StatusOr<cudnnHandle_t> handle = handle_locked(c, key.device);
  if (!handle.ok()) {
    entry.status = handle.status();
    return entry;
  }
  entry.handle = *handle;
  entry.graph = describe_graph(key);
  entry.status = build_graph(*entry.graph, entry.handle, &entry.workspace_bytes);
  if (entry.status.ok()) entry.status = check_workspace(key, entry.workspace_bytes);
  if (!entry.status.ok()) {
    entry.status =
        absl::FailedPreconditionError(fmt::format("cuDNN {} refuses attention {}: {}", cudnnGetVersion(),
                                                  describe_key(key), std::string(entry.status.message())));
    entry.graph.reset();
  }
  return entry;
}

// The forward's key (gradient rows as dense: the forward has none), or with the backward's gradients.
GraphKey key_for(Pass pass, const HeadSlice& q, const HeadSlice& k, const HeadSlice& v, int64_t window,
                 double scale, const HeadSlice* d_q = nullptr, const HeadSlice* d_k = nullptr,
                 const HeadSlice* d_v = nullptr) {
  return {pass,
          current_device(),
          q.batch(),
          q.seq(),
          q.heads(),
          k.heads(),
          q.head_dim(),
          left_bound(q.seq(), window),
          static_cast<float>(scale),
          pass == Pass::kBackward && ops::deterministic(),
          q.row_heads(),
          k.row_heads(),
          v.row_heads(),
          d_q != nullptr ? d_q->row_heads() : q.heads(),
          d_k != nullptr ? d_k->row_heads() : k.heads(),
          d_v != nullptr ? d_v->row_heads() : v.heads()};
}

// The ops' shape contract (kernels/ops.h), and cuDNN's 16-byte alignment of every tensor.
void check_call(const char* op, const HeadSlice& q, const HeadSlice& k, const HeadSlice& v,
                const TensorView& out, const TensorView& lse, int64_t window) {
  check_tensor(q.whole, DType::kBF16, op, "q");
  check_tensor(k.whole, DType::kBF16, op, "k");
  check_tensor(v.whole, DType::kBF16, op, "v");
  check_tensor(out, DType::kBF16, op, "out");
  check_tensor(lse, DType::kF32, op, "lse");
  check_rank(out, 4, op, "out");
  check_same_shape(k, v, op);
  check_same_shape(q, out, op);
  const int64_t batch = q.batch(), seq = q.seq(), heads = q.heads(), head_dim = q.head_dim();
  const int64_t kv_heads = k.heads();
  NANOFORGE_CHECK(k.batch() == batch && k.seq() == seq && k.head_dim() == head_dim && kv_heads > 0 &&
                      heads % kv_heads == 0,
                  "{} on CUDA: k {} does not fit q {} (heads must be a multiple of kv heads)", op,
                  k.describe(), q.describe());
  NANOFORGE_CHECK(lse.numel() == batch * heads * seq, "{} on CUDA: lse {} must be ({}, {}, {})", op,
                  lse.describe(), batch, heads, seq);
  NANOFORGE_CHECK(window >= 0, "{} on CUDA: negative window {}", op, window);
  for (const HeadSlice* t : {&q, &k, &v}) {
    NANOFORGE_CHECK(reinterpret_cast<uintptr_t>(t->data()) % 16 == 0,
                    "{} on CUDA: {} must start on a 16-byte boundary", op, t->describe());
  }
  NANOFORGE_CHECK(reinterpret_cast<uintptr_t>(out.data) % 16 == 0,
                  "{} on CUDA: {} must start on a 16-byte boundary", op, out.describe());
}

void* workspace_for(const CachedGraph& graph) {
  return graph.workspace_bytes > 0 ? device_scratch(graph.workspace_bytes) : nullptr;
}

void execute(const CachedGraph& graph, const GraphKey& key, std::unordered_map<int64_t, void*>& pack) {
  fe::error_t result = graph.graph->execute(graph.handle, pack, workspace_for(graph));
  NANOFORGE_CHECK(result.is_good(), "cuDNN attention {}: execute failed: {}", describe_key(key),
                  result.get_message());
}

// A shape the start-up check did not cover and cuDNN refuses: flash runs it, said once per shape.
bool use_fallback(CachedGraph& graph) {
  if (graph.status.ok()) return false;
  std::lock_guard<std::mutex> lock(cache().mutex);
  if (!graph.fallback_reported) {
    std::fprintf(stderr, "attention: %s; flash attention runs this shape\n",
                 std::string(graph.status.message()).c_str());
    graph.fallback_reported = true;
  }
  return true;
}

}  // namespace

bool cudnn_attention_built(std::string* reason) {
  if (reason != nullptr) {
    const size_t version = cudnnGetVersion();
    *reason = fmt::format("cuDNN {}.{}.{} (loaded), {}", version / 10000, version / 100 % 100, version % 100,
                          NANOFORGE_CUDNN_DESCRIPTION);
  }
  return true;
}

absl::Status check_cudnn_attention(const ops::AttentionCalls& calls, int64_t* workspace_bytes) {
  std::string no_gpu;
  if (!available(&no_gpu)) return absl::FailedPreconditionError(fmt::format("no usable GPU: {}", no_gpu));
  int64_t largest = 0;
  const std::set<int64_t> windows(calls.windows.begin(), calls.windows.end());
  for (const int64_t window : windows) {
    for (const Pass pass : {Pass::kForward, Pass::kBackward}) {
      const int64_t q_row = calls.row_heads > 0 ? calls.row_heads : calls.heads;
      const int64_t kv_row = calls.row_heads > 0 ? calls.row_heads : calls.kv_heads;
      const bool backward = pass == Pass::kBackward;
      const GraphKey key{pass,
                         current_device(),
                         calls.batch,
                         calls.seq,
                         calls.heads,
                         calls.kv_heads,
                         calls.head_dim,
                         left_bound(calls.seq, window),
                         static_cast<float>(calls.scale),
                         backward && ops::deterministic(),
                         q_row,
                         kv_row,
                         kv_row,
                         backward ? q_row : calls.heads,
                         backward ? kv_row : calls.kv_heads,
                         backward ? kv_row : calls.kv_heads};
      const CachedGraph& graph = graph_for(key);
      if (!graph.status.ok()) return graph.status;
      largest = std::max(largest, graph.workspace_bytes);
    }
  }
  if (largest > 0) device_scratch(largest);  // grown now, not in the middle of the first step
  if (workspace_bytes != nullptr) *workspace_bytes = largest;
  return absl::OkStatus();
}

void cudnn_attention_forward(TensorView out, TensorView lse, HeadSlice q, HeadSlice k, HeadSlice v,
                             int64_t window, double scale, TensorView flash_workspace) {
  check_call("attention_forward (cuDNN)", q, k, v, out, lse, window);
  const GraphKey key = key_for(Pass::kForward, q, k, v, window, scale);
  CachedGraph& graph = graph_for(key);
  if (use_fallback(graph)) return attention_forward(out, lse, q, k, v, window, scale, flash_workspace);
  std::unordered_map<int64_t, void*> pack = {
      {kQ, q.data()}, {kK, k.data()}, {kV, v.data()}, {kO, out.data}, {kStats, lse.data}};
  execute(graph, key, pack);
}

void cudnn_attention_backward(HeadSlice d_q, HeadSlice d_k, HeadSlice d_v, TensorView d_out, HeadSlice q,
                              HeadSlice k, HeadSlice v, TensorView out, TensorView lse, int64_t window,
                              double scale, TensorView flash_workspace) {
  const char* op = "attention_backward (cuDNN)";
  check_call(op, q, k, v, out, lse, window);
  check_tensor(d_out, DType::kBF16, op, "d_out");
  check_tensor(d_q.whole, DType::kBF16, op, "d_q");
  check_tensor(d_k.whole, DType::kBF16, op, "d_k");
  check_tensor(d_v.whole, DType::kBF16, op, "d_v");
  check_same_shape(d_out, q, op);
  check_same_shape(d_q, q, op);
  check_same_shape(d_k, k, op);
  check_same_shape(d_v, v, op);
  for (const HeadSlice* t : {&d_q, &d_k, &d_v}) {
    NANOFORGE_CHECK(reinterpret_cast<uintptr_t>(t->data()) % 16 == 0,
                    "{} on CUDA: {} must start on a 16-byte boundary", op, t->describe());
  }
  NANOFORGE_CHECK(reinterpret_cast<uintptr_t>(d_out.data) % 16 == 0,
                  "{} on CUDA: {} must start on a 16-byte boundary", op, d_out.describe());
  const GraphKey key = key_for(Pass::kBackward, q, k, v, window, scale, &d_q, &d_k, &d_v);
  CachedGraph& graph = graph_for(key);
  if (use_fallback(graph)) {
    return attention_backward(d_q, d_k, d_v, d_out, q, k, v, out, lse, window, scale, flash_workspace);
  }
  std::unordered_map<int64_t, void*> pack = {{kQ, q.data()},    {kK, k.data()},    {kV, v.data()},
                                             {kO, out.data},    {kDO, d_out.data}, {kStats, lse.data},
                                             {kDQ, d_q.data()}, {kDK, d_k.data()}, {kDV, d_v.data()}};
  execute(graph, key, pack);
}

}  // namespace nanoforge::cuda

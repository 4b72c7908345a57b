// nanoforge's side of the parity check against nanochat's PyTorch model: read a case file (config, weights,
// inputs), run forward and backward on the CPU backend, write the result file (loss, softcapped logits, the
// gradient of the mean loss for every parameter). The file layouts are in docs/parity.md.
#pragma once

#include <absl/status/statusor.h>

#include <map>
#include <string>

#include "h5/file.h"
#include "kernels/tensor.h"
#include "model/gpt_config.h"
#include "support/host_array.h"

namespace nanoforge {

struct ParityCase {
  std::string path;
  GPTConfig config;
  // /config@fp8 = 1: nanochat's FP8 training (base_train --fp8), run with KernelSettings::fp8
  bool fp8 = false;
  std::map<std::string, HostArray<float>> weights;  // by state-dict name
  HostArray<int64_t> idx, targets;                  // (B, T)
};

struct ParityResult {
  double loss = 0;
  HostArray<float> logits;                        // (B, T, vocab_size), after the softcap
  std::map<std::string, HostArray<float>> grads;  // by state-dict name, PyTorch shapes
};

// Reads and validates a case: every config attribute, every parameter with its exact shape, ids in
// [0, vocab_size), targets in [0, vocab_size) or -1. Errors name the file and the dataset.
absl::StatusOr<ParityCase> read_parity_case(const std::string& path);

// Forward and backward of the case on the CPU backend in `dtype` (f32 or f64; an FP8 case runs in f32 only).
ParityResult run_parity(const ParityCase& parity_case, DType dtype);

// Writes the result file; written under a temporary name and renamed, so a failure leaves no partial file.
absl::Status write_parity_result(const std::string& path, const ParityResult& result);

}  // namespace nanoforge

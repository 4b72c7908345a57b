// The host side of a kernel launch in the emulation build (kernels/cuda/launch.cuh calls it where nvcc would
// compile <<<...>>>): the arguments are converted to the kernel's parameter types and kept, as CUDA copies
// them at launch; the configuration is checked as the driver checks it (a refused launch sets the error that
// cudaGetLastError returns); the launch is queued on its stream and runs when the stream is waited for.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <source_location>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace nanoforge::emulator {

struct LaunchRequest {
  std::string kernel_name;
  std::source_location site;
  const void* kernel = nullptr;  // the kernel function's address (its attributes are keyed by it)
  dim3 grid, block;
  size_t dynamic_shared_bytes = 0;
  cudaStream_t stream = nullptr;
  std::shared_ptr<const void> arguments;  // a std::tuple of the kernel's parameters
  size_t arguments_size = 0;
  void (*invoke)(const void* arguments) = nullptr;
  std::vector<std::pair<int, const void*>> pointer_arguments;  // (position, value) of pointer parameters
};

// Checks and queues a launch (launch.cpp).
void submit_launch(LaunchRequest request);

// "attention_forward_kernel<64>" from the __PRETTY_FUNCTION__ of launch_on_emulator<kernel>.
std::string kernel_name_from(const char* pretty_function);

template <auto kKernel, class... Parameters, class... Arguments>
void launch_with_parameters(void (*)(Parameters...), const char* pretty_function, dim3 grid, dim3 block,
                            size_t shared_bytes, cudaStream_t stream, std::source_location site,
                            Arguments&&... arguments) {
  static_assert(sizeof...(Parameters) == sizeof...(Arguments),
                "the kernel takes another number of arguments");
  using Tuple = std::tuple<std::decay_t<Parameters>...>;
  auto values = std::make_shared<const Tuple>(std::forward<Arguments>(arguments)...);
  LaunchRequest request;
  request.kernel_name = kernel_name_from(pretty_function);
  request.site = site;
  request.kernel = reinterpret_cast<const void*>(kKernel);
  request.grid = grid;
  request.block = block;
  request.dynamic_shared_bytes = shared_bytes;
  request.stream = stream;
  request.arguments_size = sizeof(Tuple);
  request.invoke = [](const void* stored) { std::apply(kKernel, *static_cast<const Tuple*>(stored)); };
  [&]<size_t... kIndex>(std::index_sequence<kIndex...>) {
    (
        [&] {
          using Element = std::tuple_element_t<kIndex, Tuple>;
          if constexpr (std::is_pointer_v<Element>) {
            request.pointer_arguments.emplace_back(static_cast<int>(kIndex),
                                                   static_cast<const void*>(std::get<kIndex>(*values)));
          }
        }(),
        ...);
  }
  (std::index_sequence_for<Parameters...>{});
  request.arguments = std::move(values);
  submit_launch(std::move(request));
}

template <auto kKernel, class... Arguments>
void launch_on_emulator(dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
                        std::source_location site, Arguments&&... arguments) {
  launch_with_parameters<kKernel>(kKernel, __PRETTY_FUNCTION__, grid, block, shared_bytes, stream, site,
                                  std::forward<Arguments>(arguments)...);
}

}  // namespace nanoforge::emulator

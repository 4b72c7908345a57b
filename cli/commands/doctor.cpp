// `nanoforge doctor [--inventory FILE] [--record-inventory FILE]`: is this machine ready for data-parallel
// training? Lists RDMA devices (libibverbs + sysfs), the NCCL settings they call for (printed as `export`
// lines for the ones the environment does not already set), CUDA devices and versions, NCCL, MPI and the CPU
// BLAS. Exits non-zero only for what will make training fail; the last line is a JSON summary.
#include <absl/flags/flag.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <fmt/format.h>

#include <cstdlib>
#include <fstream>

#include "cli/build_info.h"
#include "cli/command.h"
#include "doctor/comm_runtime_info.h"
#include "doctor/nccl_env_advice.h"
#include "doctor/nccl_env_apply.h"
#include "doctor/rdma_inventory.h"
#include "doctor/rdma_probe.h"
#include "doctor/rdma_report.h"
#include "kernels/backend_info.h"
#include "support/json_text.h"
#include "support/status.h"

ABSL_FLAG(std::string, inventory, "",
          "read the RDMA inventory from this recorded file instead of this machine "
          "(format: doctor/rdma_inventory.h; examples: tests/doctor/recorded/)");
ABSL_FLAG(std::string, record_inventory, "",
          "also write this machine's RDMA inventory to this file (to attach to a bug report, or as a test "
          "fixture)");

namespace nanoforge {
namespace {

std::string json_strings(const std::vector<std::string>& values) {
  std::vector<std::string> quoted;
  for (const std::string& value : values)
    quoted.push_back(json_string(value));
  return absl::StrCat("[", absl::StrJoin(quoted, ", "), "]");
}

std::string format_runtimes(const CommRuntimeInfo& runtimes, const BackendInfo& backend) {
  std::string text = "CUDA:\n";
  if (backend.cuda_emulated) {
    text +=
        "  THE CPU EMULATOR OF CUDA: this is nanoforge-emulated, the tests' program; its GPUs are emulated "
        "on "
        "the CPU. Check a machine with bin/nanoforge doctor\n";
  }
  if (!runtimes.cuda_built) {
    text += "  " + runtimes.cuda_status + "\n";
  } else {
    text += fmt::format("  {}; runtime {}; driver {}\n",
                        backend.cuda_emulated ? "the emulated build"
                                              : fmt::format("built for sm {}", backend.cuda_architectures),
                        cuda_version_text(runtimes.cuda_runtime_version),
                        runtimes.cuda_driver_version == 0 ? "none (no NVIDIA driver loaded)"
                                                          : cuda_version_text(runtimes.cuda_driver_version));
    if (runtimes.gpus.empty()) text += "  no usable GPU: " + runtimes.cuda_status + "\n";
    for (const CudaDeviceInfo& gpu : runtimes.gpus) {
      text += fmt::format("  GPU {}: {}, compute capability {}.{}, {:.1f} GiB, {} SMs, pci {}\n", gpu.index,
                          gpu.name, gpu.major, gpu.minor, static_cast<double>(gpu.memory_bytes) / (1 << 30),
                          gpu.multiprocessors, gpu.pci_bus_id);
      if (gpu.major == 12 && gpu.minor == 1) {
        text +=
            "    DGX Spark (GB10): unified memory, so this is shared with the CPU; no GPUDirect RDMA (NCCL "
            "stages "
            "through host memory); use an NCCL release built for sm_121\n";
      }
    }
  }
  text += fmt::format("NCCL: {}\n", runtimes.nccl_built
                                        ? "library " + runtimes.nccl_version
                                        : "not in this build (CPU-only): the MPI engine communicates");
  text += fmt::format("MPI: {}\n",
                      runtimes.mpi_built
                          ? fmt::format("{} (MPI standard {})", runtimes.mpi_library, runtimes.mpi_standard)
                          : "not in this build");
  text += fmt::format("CPU: {} OpenMP threads; {}; {} kernels\n", backend.cpu_threads, backend.blas,
                      backend.blas_core);
  return text;
}

std::string json_summary(const RdmaInventory& inventory, const NcclAdvice& advice, const EnvReview& review,
                         const CommRuntimeInfo& runtimes, const BackendInfo& backend) {
  std::vector<std::string> ports, warnings, environment, exported, kept, gpus;
  for (const NcclDataPort& port : advice.data_ports)
    ports.push_back(fmt::format("{}:{}", port.device, port.port));
  for (const std::vector<DoctorWarning>* list : {&advice.warnings, &review.warnings})
    for (const DoctorWarning& warning : *list)
      warnings.push_back(fmt::format("{} {}", to_string(warning.kind), warning.subject));
  for (const NcclSetting& setting : advice.settings)
    environment.push_back(fmt::format("{}: {}", json_string(setting.name), json_string(setting.value)));
  for (const EnvDecision& decision : review.decisions)
    (decision.exported() ? exported : kept).push_back(decision.name);
  for (const CudaDeviceInfo& gpu : runtimes.gpus) {
    gpus.push_back(fmt::format("{{\"name\": {}, \"compute_capability\": \"{}.{}\", \"memory_bytes\": {}}}",
                               json_string(gpu.name), gpu.major, gpu.minor, gpu.memory_bytes));
  }
  auto optional_text = [](const std::string& text) { return text.empty() ? "null" : json_string(text); };
  return fmt::format(
      "{{\"doctor\": {{\"ok\": {}, \"problems\": {}, \"warnings\": {}, \"rdma_devices\": {}, \"transport\": "
      "{}, "
      "\"data_ports\": {}, \"link_gbps\": {:g}, \"nccl_env\": {{{}}}, \"exported\": {}, \"kept\": {}, "
      "\"cuda_built\": {}, \"cuda_emulated\": {}, \"cuda_runtime\": {}, \"cuda_driver\": {}, \"gpus\": [{}], "
      "\"cuda_status\": {}, "
      "\"nccl\": {}, \"mpi\": {}, \"blas_kernels\": {}}}}}",
      review.problems.empty() ? "true" : "false", json_strings(review.problems), json_strings(warnings),
      inventory.devices.size(), json_string(to_string(advice.transport)), json_strings(ports),
      advice.total_rate_gbps(), absl::StrJoin(environment, ", "), json_strings(exported), json_strings(kept),
      runtimes.cuda_built ? "true" : "false", backend.cuda_emulated ? "true" : "false",
      runtimes.cuda_built ? json_string(cuda_version_text(runtimes.cuda_runtime_version)) : "null",
      runtimes.cuda_driver_version ? json_string(cuda_version_text(runtimes.cuda_driver_version)) : "null",
      absl::StrJoin(gpus, ", "), optional_text(runtimes.cuda_status), optional_text(runtimes.nccl_version),
      optional_text(runtimes.mpi_library), json_string(backend.blas_core));
}

absl::StatusOr<RdmaInventory> load_inventory() {
  const std::string recorded = absl::GetFlag(FLAGS_inventory);
  if (!recorded.empty()) {
    NANOFORGE_ASSIGN_OR_RETURN(RdmaInventory inventory, read_rdma_inventory_file(recorded));
    inventory.description =
        fmt::format("{} (recorded in {})",
                    inventory.description.empty() ? "a recorded machine" : inventory.description, recorded);
    return inventory;
  }
  NANOFORGE_ASSIGN_OR_RETURN(RdmaInventory inventory, probe_rdma_inventory());
  const std::string record = absl::GetFlag(FLAGS_record_inventory);
  if (!record.empty()) {
    std::ofstream file(record);
    file << format_rdma_inventory(inventory);
    if (!file) return absl::PermissionDeniedError(fmt::format("cannot write the inventory to '{}'", record));
    fmt::print("wrote this machine's RDMA inventory to {}\n", record);
  }
  return inventory;
}

absl::Status run_doctor(const std::vector<std::string>& /*arguments*/) {
  NANOFORGE_ASSIGN_OR_RETURN(const RdmaInventory inventory, load_inventory());
  const NcclAdvice advice = advise_nccl(inventory);
  const EnvReview review = review_nccl_environment(inventory, advice, process_nccl_environment());
  const CommRuntimeInfo runtimes = probe_comm_runtimes();
  const BackendInfo backend = backend_info();

  fmt::print("nanoforge doctor: {}\n\n", version_line());
  fmt::print("{}\n{}\n{}\n", format_rdma_report(inventory, advice), format_nccl_settings(advice, review),
             format_runtimes(runtimes, backend));
  const size_t warning_count = advice.warnings.size() + review.warnings.size();
  if (review.problems.empty()) {
    fmt::print("verdict: ready{}{}\n",
               warning_count == 0
                   ? ""
                   : fmt::format(", with {} warning{} above", warning_count, warning_count == 1 ? "" : "s"),
               backend.cuda_emulated ? " (for tests only: the GPUs are the CPU emulator of CUDA)" : "");
  } else {
    fmt::print("verdict: BROKEN — {}\n", absl::StrJoin(review.problems, "; "));
  }
  fmt::print("{}\n", json_summary(inventory, advice, review, runtimes, backend));
  std::fflush(stdout);
  if (!review.problems.empty()) {
    return absl::FailedPreconditionError(
        fmt::format("training would fail on this machine: {}", absl::StrJoin(review.problems, "; ")));
  }
  return absl::OkStatus();
}

}  // namespace

Command doctor_command() {
  return {
      "doctor",
      "check RDMA/RoCE, NCCL, CUDA and MPI for data-parallel training; print the NCCL settings to export",
      "[--inventory FILE] [--record-inventory FILE]\n\n"
      "Prints the RDMA devices, ports and GID tables, the NCCL settings they call for (as `export` lines "
      "for\n"
      "those your environment does not set), CUDA devices, NCCL and MPI versions. Exit status 1 only when\n"
      "something will make training fail. Last line: JSON. See docs/doctor.md.",
      {"inventory", "record_inventory"},
      run_doctor};
}

}  // namespace nanoforge

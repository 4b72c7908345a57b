// checksum_file: the mapping split into one slice per thread, each slice's CRC combined in order.
#include "support/file_checksum.h"

#include <zlib.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "support/mapped_file.h"
#include "support/status.h"

namespace nanoforge {
namespace {

// Slices smaller than this are not worth a thread.
constexpr int64_t kMinSliceBytes = int64_t{64} << 20;

}  // namespace

absl::StatusOr<FileChecksum> checksum_file(const std::string& path) {
  NANOFORGE_ASSIGN_OR_RETURN(const MappedFile file, MappedFile::open(path));
  file.advise(MappedFile::Access::kSequential);
  const int64_t bytes = file.size_bytes();
  const auto* data = reinterpret_cast<const Bytef*>(file.bytes().data());
  const int64_t threads = std::clamp<int64_t>(bytes / kMinSliceBytes, 1,
                                              std::max<int64_t>(1, std::thread::hardware_concurrency()));
  const int64_t slice = (bytes + threads - 1) / threads;
  std::vector<uLong> crcs(static_cast<size_t>(threads), crc32_z(0, nullptr, 0));
  std::vector<std::thread> workers;
  for (int64_t t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      const int64_t begin = std::min(bytes, t * slice), end = std::min(bytes, begin + slice);
      crcs[static_cast<size_t>(t)] =
          crc32_z(crcs[static_cast<size_t>(t)], data + begin, static_cast<z_size_t>(end - begin));
    });
  }
  for (std::thread& worker : workers)
    worker.join();
  uLong crc = crcs[0];
  for (int64_t t = 1; t < threads; ++t) {
    const int64_t begin = std::min(bytes, t * slice), end = std::min(bytes, begin + slice);
    crc = crc32_combine(crc, crcs[static_cast<size_t>(t)], static_cast<z_off_t>(end - begin));
  }
  return FileChecksum{bytes, static_cast<uint32_t>(crc)};
}

}  // namespace nanoforge

// A checkpoint's manifest (CHECKPOINT/manifest.txt): the checkpoint format, then each file's size and CRC-32,
// written last, after the files are complete. Checking it before libhdf5 opens a file means a checkpoint
// whose bytes changed in any way since it was written (bit rot, a partial copy, an edit) is refused, named,
// and — on resume — passed over, whatever part of the file the damage is in.
#pragma once

#include <absl/status/status.h>

#include <string>
#include <vector>

namespace nanoforge {

// The checkpoint format this nanoforge writes and reads: 2 stores no variable-length data (format 1 kept
// strings in HDF5's global heap; `tools/upgrade_h5.py checkpoint` converts).
inline constexpr int kCheckpointFormat = 2;
inline constexpr char kManifestFile[] = "manifest.txt";

// Writes DIR/manifest.txt for `files` (names inside DIR), fsync'd.
absl::Status write_manifest(const std::string& dir, const std::vector<std::string>& files);
// Checks DIR/manifest.txt: the format, then that each of `files` is listed with the size and CRC-32 it has.
absl::Status verify_manifest(const std::string& dir, const std::vector<std::string>& files);

}  // namespace nanoforge

// What a prep records of its settings and input (the first contents of prep.unfinished), and what
// `nanoforge prep --resume` checks against that record before it continues: the same settings, the same input
// files (size, modification time, a hash of their first and last MiB), the recorded shards' bytes, and,
// read again, the same documents up to the last recorded one.
#pragma once

#include <absl/status/statusor.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/documents/documents.h"
#include "data/prep/prep.h"
#include "data/shards/shard_manifest.h"
#include "data/tokenizer/tokenizer.h"

namespace nanoforge {

// The tokenizer, the settings a resume may not change and each input file's identity; no shards yet.
ShardManifest settings_record(const Tokenizer& tokenizer, const PrepOptions& options,
                              const std::vector<std::string>& paths);

// The record of the interrupted prep in options.out_dir, checked against `settings` and against its shard
// files; nullopt when that prep already finished (its manifest is there).
absl::StatusOr<std::optional<ShardManifest>> record_to_resume(const PrepOptions& options,
                                                              const ShardManifest& settings);

// Reads the input again up to the record's last document; returns the hash of those documents' texts
// (ShardManifest), checked against the record's.
absl::StatusOr<uint64_t> reread_recorded_documents(DocumentReader& reader, const ShardManifest& record,
                                                   const std::vector<std::string>& paths);

}  // namespace nanoforge

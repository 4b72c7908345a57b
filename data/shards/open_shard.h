// Opening a token shard of any format: apart from shard.h, so that the view every format fills in does not
// include the formats built on it.
#pragma once

#include <absl/status/statusor.h>

#include <string>

#include "data/shards/shard.h"

namespace nanoforge {

// Opens `path` as whichever format its first bytes say (HDF5 signature or an llm.c magic number).
absl::StatusOr<TokenShard> open_token_shard(const std::string& path, const ShardOpenOptions& options);

}  // namespace nanoforge

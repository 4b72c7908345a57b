// Where a command writes a result file the user names (--out, --json-out): nanoforge writes a new file next
// to it and renames it into place, so that no reader sees half a file. A rename replaces whatever held the
// name — as root, `--out /dev/full` replaced the device /dev/full with a regular file, and `/dev/stdout`
// would go the same way — so the path must be a regular file or not exist yet. A command that writes a
// directory of files (a tokenizer, shards) writes only into one of its own.
#pragma once

#include <absl/status/status.h>

#include <functional>
#include <string>
#include <string_view>

namespace nanoforge {

// OK when `path` does not exist or is a regular file (not a symlink); else an error naming the path, what it
// is, and what to give instead.
absl::Status check_output_file_path(const std::string& path);

// Renames a finished `temporary` file to `path` (replacing it): the last step of every write that must not
// leave half a file under its final name. The error names both.
absl::Status rename_into_place(const std::string& temporary, const std::string& path);

// Writes `contents` to PATH.tmp, closes it (a full disk shows then) and renames it to `path`, after
// check_output_file_path. PATH.tmp is created new: when the name exists (a link, whose target would be
// written; a pipe, which would block; a leftover) that is an error naming it, and nothing is written. An
// error names the file and the cause; the temporary file is removed.
absl::Status write_file_atomically(const std::string& path, std::string_view contents);
// The suffix of write_file_atomically's temporary file (what an interrupted write leaves).
inline constexpr char kTemporaryFileSuffix[] = ".tmp";

// OK when `dir` does not exist, is not a directory (creating it then fails, naming why), or holds only
// entries whose names `is_own` accepts: the files `command` writes there and what its interrupted runs leave.
// Else FailedPrecondition naming `flag`, `dir`, its first other entry in name order, and `remedy`. Outputs
// written among other files (the README's `--out data/tokenizer` once put them beside the source) would be
// mixed with them, and --overwrite deletes in that directory.
absl::Status check_output_directory_is_own(const std::string& command, const std::string& flag,
                                           const std::string& dir,
                                           const std::function<bool(const std::string& name)>& is_own,
                                           const std::string& remedy);

}  // namespace nanoforge

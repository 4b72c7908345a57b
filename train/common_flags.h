// Flags shared by several commands, defined once in common_flags.cpp (absl flags are process-wide).
#pragma once

#include <absl/flags/declare.h>

#include <cstdint>
#include <string>
#include <vector>

ABSL_DECLARE_FLAG(int32_t, threads);
// Input documents (data/documents.h): files or directories, comma-separated; and how text files split.
ABSL_DECLARE_FLAG(std::vector<std::string>, input);
ABSL_DECLARE_FLAG(std::string, text_split);
// A tokenizer directory (data/tokenizer.h).
ABSL_DECLARE_FLAG(std::string, tokenizer);
ABSL_DECLARE_FLAG(std::string, out);
ABSL_DECLARE_FLAG(std::string, data);
ABSL_DECLARE_FLAG(std::string, checkpoint);

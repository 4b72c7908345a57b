// Flags shared by several commands, defined once in common_flags.cpp (absl flags are process-wide).
#pragma once

#include <absl/flags/declare.h>

#include <cstdint>

ABSL_DECLARE_FLAG(int32_t, threads);

// absl::Status plumbing for the boundaries that can fail on input. This Abseil version has no public
// RETURN_IF_ERROR / ASSIGN_OR_RETURN, so the two small macros live here.
#pragma once

#include <absl/status/status.h>
#include <absl/status/statusor.h>

#define NANOFORGE_STATUS_CONCAT_INNER(a, b) a##b
#define NANOFORGE_STATUS_CONCAT(a, b) NANOFORGE_STATUS_CONCAT_INNER(a, b)

// Returns the status from the enclosing function when `expression` is not OK.
#define NANOFORGE_RETURN_IF_ERROR(expression)              \
  do {                                                     \
    ::absl::Status _nanoforge_status = (expression);       \
    if (!_nanoforge_status.ok()) return _nanoforge_status; \
  } while (false)

// NANOFORGE_ASSIGN_OR_RETURN(auto value, StatusOr-expression): declares `value` or returns the error.
#define NANOFORGE_ASSIGN_OR_RETURN(declaration, expression) \
  NANOFORGE_ASSIGN_OR_RETURN_IMPL(NANOFORGE_STATUS_CONCAT(_nanoforge_or_, __LINE__), declaration, expression)
#define NANOFORGE_ASSIGN_OR_RETURN_IMPL(holder, declaration, expression) \
  auto holder = (expression);                                            \
  if (!holder.ok()) return std::move(holder).status();                   \
  declaration = std::move(holder).value()

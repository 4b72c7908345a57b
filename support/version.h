// Version facts of this build: the project version and the git commit it was built from. Defined in a file
// generated at build time (cmake/WriteVersion.cmake), so the commit is never stale.
#pragma once

#include <string_view>

namespace nanoforge {

std::string_view version();
std::string_view git_commit();

}  // namespace nanoforge

// An environment variable set (or unset) for one test and restored when it ends: the base directory
// (support/base_dir.h) is read from NANOFORGE_BASE_DIR and HOME at each call.
#pragma once

#include <stdlib.h>

#include <optional>
#include <string>

namespace nanoforge::test {

class ScopedEnvironment {
 public:
  // `value` nullopt: unset.
  ScopedEnvironment(std::string name, const std::optional<std::string>& value) : name_(std::move(name)) {
    if (const char* before = getenv(name_.c_str()); before != nullptr) before_ = before;
    if (value)
      setenv(name_.c_str(), value->c_str(), 1);
    else
      unsetenv(name_.c_str());
  }
  ~ScopedEnvironment() {
    if (before_)
      setenv(name_.c_str(), before_->c_str(), 1);
    else
      unsetenv(name_.c_str());
  }
  ScopedEnvironment(const ScopedEnvironment&) = delete;
  ScopedEnvironment& operator=(const ScopedEnvironment&) = delete;

 private:
  std::string name_;
  std::optional<std::string> before_;
};

}  // namespace nanoforge::test

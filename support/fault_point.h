// Test hooks: a process that stops itself at a named point, so that the tests of resume and crash safety can
// cut it where they choose. Each area reads one variable, once: NANOFORGE_PREP_FAULT (data/prep:
// after_document, after_shard, after_record) and NANOFORGE_CHECKPOINT_FAULT (train/checkpoint: after_model,
// before_latest). Its value POINT@N dies by SIGKILL (as a kill -9 or a crash) the N-th time the process
// passes POINT, N as the area counts (a document, a shard, a step); term_POINT@N raises SIGTERM instead (the
// signal's path) and stop_POINT@N SIGSTOP (a process that provably holds what it holds until SIGCONT). Unset
// or empty: no fault.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "support/status.h"

namespace nanoforge {

class FaultPoint {
 public:
  // `value` of `variable` (nullptr: unset), one of `points`; a bad value is an error naming the variable.
  static absl::StatusOr<FaultPoint> parse(std::string_view variable, const char* value,
                                          std::initializer_list<std::string_view> points);
  // parse() of the variable as the environment holds it.
  static absl::StatusOr<FaultPoint> from_environment(std::string_view variable,
                                                     std::initializer_list<std::string_view> points);

  // True where the variable names `point` at `count`.
  bool names(std::string_view point, int64_t count) const;
  // Called the `count`-th time the process passes `point`: stops it there when the variable names them.
  void pass(std::string_view point, int64_t count) const;

  int signal_number() const { return signal_number_; }  // 0: no fault

 private:
  std::string variable_, value_, point_;
  int64_t count_ = 0;
  int signal_number_ = 0;
};

}  // namespace nanoforge

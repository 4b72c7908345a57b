// Fibers for emulated CUDA threads: each thread of a block runs on a stack of its own and gives the CPU back
// at barriers and warp-synchronous calls. On x86-64 and aarch64 a switch is a few instructions (callee-saved
// registers and the floating-point control register; no signal mask, so no system call as with swapcontext);
// other architectures use ucontext. AddressSanitizer is told of every switch, so it checks the right stack.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace nanoforge::emulator {

// A fiber's stack: mmap'ed, with an inaccessible guard page below it (an overflow faults instead of
// corrupting a neighbour). Stacks are pooled: taking one is a list pop once the pool is warm.
class FiberStack {
 public:
  static FiberStack* take();
  static void give_back(FiberStack* stack);
  // The last of `spare` (removed from it), or a new one from the pool when it is empty.
  static FiberStack* take_or(std::vector<FiberStack*>& spare) {
    if (spare.empty()) return take();
    FiberStack* stack = spare.back();
    spare.pop_back();
    return stack;
  }

  char* base() const { return base_; }  // lowest usable address
  size_t bytes() const { return bytes_; }
  // Clears AddressSanitizer's marks left by frames that never returned (a fiber abandoned after __trap).
  void forget_frames();

 private:
  FiberStack(char* base, size_t bytes) : base_(base), bytes_(bytes) {}
  char* base_;
  size_t bytes_;
  FiberStack* next_ = nullptr;
};

// The ucontext fallback's saved state (fiber.cpp), on architectures without an assembly switch.
struct UcontextFiber;
struct UcontextFiberDeleter {
  void operator()(UcontextFiber* fiber) const;
};

// A saved execution context: the stack pointer to resume from, and what AddressSanitizer needs to know about
// the stack it runs on. The OS thread's own stack has one too (stack = nullptr). Move-only: it owns the
// ucontext fallback's state, which goes with it (a launch's contexts go when the launch ends).
struct FiberContext {
  void* stack_pointer = nullptr;
  FiberStack* stack = nullptr;
  const void* asan_bottom = nullptr;  // the stack's bounds as AddressSanitizer reports and expects them
  size_t asan_bytes = 0;
  void* asan_fake_stack = nullptr;
  std::unique_ptr<UcontextFiber, UcontextFiberDeleter> ucontext;  // null where switching is in assembly
};

using FiberEntry = void (*)(void* argument);

// Prepares `context` to run entry(argument) on `stack` when first switched to, with the calling thread's
// floating-point control (rounding mode) as it is now. entry must never return: it ends with exit_fiber().
void make_fiber(FiberContext& context, FiberStack* stack, FiberEntry entry, void* argument);

// Saves the running context into `from` and resumes `to`; returns when something switches back to `from`.
void switch_fiber(FiberContext& from, FiberContext& to);

// Leaves the running fiber for good and resumes `to` (the fiber's stack may then be reused).
[[noreturn]] void exit_fiber(FiberContext& from, FiberContext& to);

// Called first thing on a new fiber: completes the switch that started it (for AddressSanitizer).
void fiber_started(FiberContext& self, FiberContext& from);

}  // namespace nanoforge::emulator

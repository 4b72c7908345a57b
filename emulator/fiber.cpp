// Fiber stacks and switches (fiber.h). The x86-64 switch pushes the six callee-saved registers and the
// SSE/x87 control words, swaps stack pointers and pops; a new fiber starts in a trampoline whose unwind
// information ends the call chain, so gdb's backtrace on a fiber stops at the emulated thread's entry.
#include "emulator/fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define NANOFORGE_FIBER_ASAN 1
#endif

namespace nanoforge::emulator {
namespace {

// Kernel frames are small (a few fragments and arrays of registers), but AddressSanitizer pads every local.
#if defined(NANOFORGE_FIBER_ASAN)
constexpr size_t kStackBytes = size_t{1} << 20;
#else
constexpr size_t kStackBytes = size_t{256} << 10;
#endif

struct StackPool {
  std::mutex mutex;
  FiberStack* free = nullptr;
};

StackPool& pool() {
  static StackPool* instance = new StackPool();  // never destroyed: fibers may outlive static destructors
  return *instance;
}

}  // namespace

FiberStack* FiberStack::take() {
  {
    StackPool& p = pool();
    std::lock_guard<std::mutex> lock(p.mutex);
    if (p.free != nullptr) {
      FiberStack* stack = p.free;
      p.free = stack->next_;
      return stack;
    }
  }
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* region = mmap(nullptr, kStackBytes + page, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (region == MAP_FAILED) {
    std::fprintf(stderr, "nanoforge CUDA emulator: cannot map a %zu-byte fiber stack\n", kStackBytes);
    std::abort();
  }
  mprotect(region, page, PROT_NONE);  // the guard page: stacks grow down into it
  return new FiberStack(static_cast<char*>(region) + page, kStackBytes);
}

void FiberStack::give_back(FiberStack* stack) {
  StackPool& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  stack->next_ = p.free;
  p.free = stack;
}

void FiberStack::forget_frames() {
#if defined(NANOFORGE_FIBER_ASAN)
  __asan_unpoison_memory_region(base_, bytes_);
#endif
}

#if defined(__x86_64__)

extern "C" void nanoforge_emulator_switch(void** save_stack_pointer, void* load_stack_pointer);
extern "C" void nanoforge_emulator_fiber_start();

// rdi: where to save this context's stack pointer; rsi: the stack pointer to resume. The saved frame, from
// the stack pointer up: MXCSR and the x87 control word (8 bytes), r12, r13, r14, r15, rbx, rbp, return
// address.
asm(R"(
  .text
  .globl nanoforge_emulator_switch
  .type nanoforge_emulator_switch, @function
nanoforge_emulator_switch:
  .cfi_startproc
  pushq %rbp
  pushq %rbx
  pushq %r15
  pushq %r14
  pushq %r13
  pushq %r12
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r12
  popq %r13
  popq %r14
  popq %r15
  popq %rbx
  popq %rbp
  ret
  .cfi_endproc
  .size nanoforge_emulator_switch, .-nanoforge_emulator_switch

  .globl nanoforge_emulator_fiber_start
  .type nanoforge_emulator_fiber_start, @function
nanoforge_emulator_fiber_start:
  .cfi_startproc
  .cfi_undefined rip
  movq %r13, %rdi
  callq *%r12
  ud2
  .cfi_endproc
  .size nanoforge_emulator_fiber_start, .-nanoforge_emulator_fiber_start
)");

void make_fiber(FiberContext& context, FiberStack* stack, FiberEntry entry, void* argument) {
  context = FiberContext{};
  context.stack = stack;
  context.asan_bottom = stack->base();
  context.asan_bytes = stack->bytes();
  // The trampoline's call must see a 16-byte aligned stack pointer: the slot above the return address is.
  auto top = reinterpret_cast<uintptr_t>(stack->base() + stack->bytes());
  top = (top & ~uintptr_t{15}) - 16;
  auto* slots = reinterpret_cast<uint64_t*>(top - 8 * sizeof(uint64_t));
  uint32_t mxcsr = 0;
  uint16_t x87_control = 0;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(x87_control));
  slots[0] = mxcsr | (uint64_t{x87_control} << 32);
  slots[1] = reinterpret_cast<uint64_t>(entry);     // r12
  slots[2] = reinterpret_cast<uint64_t>(argument);  // r13
  slots[3] = 0;                                     // r14
  slots[4] = 0;                                     // r15
  slots[5] = 0;                                     // rbx
  slots[6] = 0;                                     // rbp
  slots[7] = reinterpret_cast<uint64_t>(&nanoforge_emulator_fiber_start);
  context.stack_pointer = slots;
}

namespace {
inline void raw_switch(FiberContext& from, FiberContext& to) {
  nanoforge_emulator_switch(&from.stack_pointer, to.stack_pointer);
}
}  // namespace

#else  // ucontext: portable and slower (swapcontext saves the signal mask with a system call)

namespace {
struct StartArguments {
  FiberEntry entry;
  void* argument;
};
thread_local StartArguments starting;

void ucontext_start() {
  const StartArguments arguments = starting;
  arguments.entry(arguments.argument);
  std::abort();
}

ucontext_t* platform_of(FiberContext& context) {
  if (context.platform == nullptr) context.platform = new ucontext_t();
  return static_cast<ucontext_t*>(context.platform);
}

inline void raw_switch(FiberContext& from, FiberContext& to) {
  if (to.stack_pointer != nullptr) {  // a new fiber: hand it its entry and argument on the way
    starting = *static_cast<StartArguments*>(to.stack_pointer);
    delete static_cast<StartArguments*>(to.stack_pointer);
    to.stack_pointer = nullptr;
  }
  swapcontext(platform_of(from), platform_of(to));
}
}  // namespace

void make_fiber(FiberContext& context, FiberStack* stack, FiberEntry entry, void* argument) {
  delete static_cast<ucontext_t*>(context.platform);
  context = FiberContext{};
  context.stack = stack;
  context.asan_bottom = stack->base();
  context.asan_bytes = stack->bytes();
  ucontext_t* platform = platform_of(context);
  getcontext(platform);
  platform->uc_stack.ss_sp = stack->base();
  platform->uc_stack.ss_size = stack->bytes();
  platform->uc_link = nullptr;
  makecontext(platform, ucontext_start, 0);
  context.stack_pointer = new StartArguments{entry, argument};
}

#endif

void switch_fiber(FiberContext& from, FiberContext& to) {
#if defined(NANOFORGE_FIBER_ASAN)
  __sanitizer_start_switch_fiber(&from.asan_fake_stack, to.asan_bottom, to.asan_bytes);
#endif
  raw_switch(from, to);
#if defined(NANOFORGE_FIBER_ASAN)
  const void* bottom = nullptr;
  size_t bytes = 0;
  __sanitizer_finish_switch_fiber(from.asan_fake_stack, &bottom, &bytes);
#endif
}

void exit_fiber(FiberContext& from, FiberContext& to) {
#if defined(NANOFORGE_FIBER_ASAN)
  __sanitizer_start_switch_fiber(nullptr, to.asan_bottom, to.asan_bytes);  // nullptr: this stack is done
#endif
  raw_switch(from, to);
  std::abort();  // nothing switches back to a finished fiber
}

void fiber_started([[maybe_unused]] FiberContext& self, [[maybe_unused]] FiberContext& from) {
#if defined(NANOFORGE_FIBER_ASAN)
  __sanitizer_finish_switch_fiber(nullptr, &from.asan_bottom, &from.asan_bytes);
#endif
}

}  // namespace nanoforge::emulator

// Fiber stacks and switches (fiber.h). The assembly switches (x86-64, aarch64) save the callee-saved
// registers and the floating-point control register on the stack they leave, swap stack pointers and restore
// the same from the stack they resume; a new fiber's stack starts with such a frame, which "returns" into a
// trampoline whose unwind information ends the call chain, so gdb's backtrace on a fiber stops at the
// emulated thread's entry. Elsewhere ucontext, whose state each FiberContext owns.
#include "emulator/fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include <cstring>
#include <utility>

// The switch: assembly on x86-64 and aarch64, ucontext elsewhere (or when NANOFORGE_FIBER_FORCE_UCONTEXT is
// defined, to test and measure the fallback on those two).
#if defined(__x86_64__) && !defined(NANOFORGE_FIBER_FORCE_UCONTEXT)
#define NANOFORGE_FIBER_X86_64 1
#elif defined(__aarch64__) && !defined(NANOFORGE_FIBER_FORCE_UCONTEXT)
#define NANOFORGE_FIBER_AARCH64 1
#else
#define NANOFORGE_FIBER_UCONTEXT 1
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

#if defined(NANOFORGE_FIBER_X86_64)

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

#elif defined(NANOFORGE_FIBER_AARCH64)

extern "C" void nanoforge_emulator_switch(void** save_stack_pointer, void* load_stack_pointer);
extern "C" void nanoforge_emulator_fiber_start();

namespace {
// The frame a switch leaves on the stack, from the stack pointer up (AAPCS64's callee-saved registers:
// x19-x28, the frame pointer x29, the link register x30 and the low halves d8-d15 of v8-v15), then FPCR
// (rounding mode, flush-to-zero, default NaN), which is the thread's and not the ABI's to keep, as MXCSR on
// x86-64.
struct Aarch64SwitchFrame {
  uint64_t x19_to_x28[10];
  uint64_t frame_pointer;  // x29
  uint64_t link;           // x30: where the switch returns to
  uint64_t d8_to_d15[8];
  uint64_t fpcr;
  uint64_t padding;  // the stack pointer stays 16-byte aligned
};
static_assert(sizeof(Aarch64SwitchFrame) == 176 && sizeof(Aarch64SwitchFrame) % 16 == 0);
}  // namespace

// x0: where to save this context's stack pointer; x1: the stack pointer to resume. FPCR is written only when
// it differs: a write may serialise the pipeline, and the threads of a block almost always share one.
// `hint #34` is BTI's landing pad (a no-op without branch protection), in case the call comes through a PLT.
asm(R"(
  .text
  .globl nanoforge_emulator_switch
  .type nanoforge_emulator_switch, %function
  .p2align 4
nanoforge_emulator_switch:
  .cfi_startproc
  hint #34
  sub sp, sp, #176
  stp x19, x20, [sp, #0]
  stp x21, x22, [sp, #16]
  stp x23, x24, [sp, #32]
  stp x25, x26, [sp, #48]
  stp x27, x28, [sp, #64]
  stp x29, x30, [sp, #80]
  stp d8, d9, [sp, #96]
  stp d10, d11, [sp, #112]
  stp d12, d13, [sp, #128]
  stp d14, d15, [sp, #144]
  mrs x9, fpcr
  str x9, [sp, #160]
  mov x10, sp
  str x10, [x0]
  mov sp, x1
  ldp x19, x20, [sp, #0]
  ldp x21, x22, [sp, #16]
  ldp x23, x24, [sp, #32]
  ldp x25, x26, [sp, #48]
  ldp x27, x28, [sp, #64]
  ldp x29, x30, [sp, #80]
  ldp d8, d9, [sp, #96]
  ldp d10, d11, [sp, #112]
  ldp d12, d13, [sp, #128]
  ldp d14, d15, [sp, #144]
  ldr x10, [sp, #160]
  cmp x9, x10
  b.eq 1f
  msr fpcr, x10
1:
  add sp, sp, #176
  ret
  .cfi_endproc
  .size nanoforge_emulator_switch, .-nanoforge_emulator_switch

  .globl nanoforge_emulator_fiber_start
  .type nanoforge_emulator_fiber_start, %function
  .p2align 4
nanoforge_emulator_fiber_start:
  .cfi_startproc
  .cfi_undefined x30
  mov x0, x20
  blr x19
  brk #1
  .cfi_endproc
  .size nanoforge_emulator_fiber_start, .-nanoforge_emulator_fiber_start
)");

void make_fiber(FiberContext& context, FiberStack* stack, FiberEntry entry, void* argument) {
  context.stack = stack;
  context.asan_bottom = stack->base();
  context.asan_bytes = stack->bytes();
  context.asan_fake_stack = nullptr;
  // The first switch to the fiber pops this frame and returns into the trampoline with x19 = entry and
  // x20 = argument; the stack pointer it leaves, the stack's top, is 16-byte aligned as AAPCS64 requires.
  auto top = reinterpret_cast<uintptr_t>(stack->base() + stack->bytes()) & ~uintptr_t{15};
  auto* frame = reinterpret_cast<Aarch64SwitchFrame*>(top - sizeof(Aarch64SwitchFrame));
  std::memset(frame, 0, sizeof(Aarch64SwitchFrame));  // frame pointer 0: the end of the frame chain
  frame->x19_to_x28[0] = reinterpret_cast<uint64_t>(entry);
  frame->x19_to_x28[1] = reinterpret_cast<uint64_t>(argument);
  frame->link = reinterpret_cast<uint64_t>(&nanoforge_emulator_fiber_start);
  uint64_t fpcr = 0;
  asm volatile("mrs %0, fpcr" : "=r"(fpcr));
  frame->fpcr = fpcr;
  context.stack_pointer = frame;
}

namespace {
inline void raw_switch(FiberContext& from, FiberContext& to) {
  nanoforge_emulator_switch(&from.stack_pointer, to.stack_pointer);
}
}  // namespace

#else  // ucontext: portable and slower (swapcontext saves the signal mask with a system call)

struct UcontextFiber {
  ucontext_t context;
  FiberEntry entry = nullptr;  // set until the fiber starts
  void* argument = nullptr;
};

namespace {
// makecontext passes only ints to the function it starts: the fiber being started is handed over here.
thread_local UcontextFiber* starting = nullptr;

void ucontext_start() {
  UcontextFiber* self = starting;
  const FiberEntry entry = std::exchange(self->entry, nullptr);
  entry(self->argument);
  std::abort();
}

// The context's ucontext state, made on first use (the OS thread's context is only ever switched from).
UcontextFiber& ucontext_of(FiberContext& context) {
  if (context.ucontext == nullptr) context.ucontext.reset(new UcontextFiber());
  return *context.ucontext;
}

inline void raw_switch(FiberContext& from, FiberContext& to) {
  UcontextFiber& target = ucontext_of(to);
  if (target.entry != nullptr) starting = &target;
  swapcontext(&ucontext_of(from).context, &target.context);
}
}  // namespace

// A context made again (a launch's threads, block after block) keeps its ucontext state: one allocation per
// context for the launch, freed with the context.
void make_fiber(FiberContext& context, FiberStack* stack, FiberEntry entry, void* argument) {
  context.stack_pointer = nullptr;
  context.stack = stack;
  context.asan_bottom = stack->base();
  context.asan_bytes = stack->bytes();
  context.asan_fake_stack = nullptr;
  UcontextFiber& fiber = ucontext_of(context);
  getcontext(&fiber.context);
  fiber.context.uc_stack.ss_sp = stack->base();
  fiber.context.uc_stack.ss_size = stack->bytes();
  fiber.context.uc_link = nullptr;
  makecontext(&fiber.context, ucontext_start, 0);
  fiber.entry = entry;
  fiber.argument = argument;
}

#endif

void UcontextFiberDeleter::operator()([[maybe_unused]] UcontextFiber* fiber) const {
#if defined(NANOFORGE_FIBER_UCONTEXT)
  delete fiber;
#endif
}

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

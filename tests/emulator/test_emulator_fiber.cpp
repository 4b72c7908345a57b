// The emulator's fiber switch itself (emulator/fiber.h): many fibers interleaved keep their callee-saved
// integer and floating-point registers and their own rounding mode, a new fiber starts with the rounding mode
// of the thread that made it, and one context and stack serve fiber after fiber. The assembly switches
// (x86-64, aarch64) save these by hand: a register one of them forgets shows up here as wrong bits, not as a
// kernel test failing far away.
#include <gtest/gtest.h>

#include <bit>
#include <cfenv>
#include <cstdint>
#include <vector>

#include "emulator/fiber.h"

namespace nanoforge::emulator {
namespace {

// What accumulate() computes: enough values live across every yield that the compiler keeps them in the
// callee-saved registers (x19-x28 and d8-d15 on aarch64; rbx, rbp, r12-r15 on x86-64) or on the fiber's
// stack.
struct Sums {
  uint64_t integers[8];
  double reals[8];
};

using Yield = void (*)(void* state);

// `rounds` steps of integer and floating-point recurrences seeded by `seed`, calling yield(state) after each.
__attribute__((noinline)) Sums accumulate(uint64_t seed, int rounds, Yield yield, void* state) {
  uint64_t i0 = seed, i1 = seed * 3 + 1, i2 = seed ^ 0x9e3779b97f4a7c15u, i3 = seed << 7, i4 = ~seed,
           i5 = seed * seed, i6 = seed + 12345, i7 = seed >> 3;
  double r0 = 0.5 * static_cast<double>(seed), r1 = 1.0, r2 = 2.0, r3 = 3.0, r4 = 0.25, r5 = -1.5, r6 = 7.0,
         r7 = 1e-3 * static_cast<double>(seed);
  for (int round = 0; round < rounds; ++round) {
    i0 = i0 * 6364136223846793005u + 1442695040888963407u;
    i1 ^= i0 >> 7;
    i2 += i1 * 31;
    i3 = std::rotl(i3 ^ i2, 13);
    i4 -= i3 | 1;
    i5 ^= i4 * 17;
    i6 += i5 >> 11;
    i7 = i7 * 5 + i6;
    r0 = r0 * 1.0000001 + 0.25;
    r1 += r0 * 0.5;
    r2 = r2 * 0.999 + r1 * 1e-3;
    r3 -= r2 * 1e-4;
    r4 = r4 * 1.5 - r3 * 1e-6;
    r5 += r4 * 1e-7;
    r6 = r6 * 0.75 + r5;
    r7 += r6 / 3.0;
    yield(state);
  }
  return {{i0, i1, i2, i3, i4, i5, i6, i7}, {r0, r1, r2, r3, r4, r5, r6, r7}};
}

void no_yield(void*) {}

// One fiber of the interleaving test and the context it yields to.
struct Worker {
  FiberContext context;
  FiberContext* scheduler = nullptr;
  uint64_t seed = 0;
  int rounds = 0;
  Sums sums{};
  bool done = false;
};

void yield_to_scheduler(void* state) {
  auto* worker = static_cast<Worker*>(state);
  switch_fiber(worker->context, *worker->scheduler);
}

void run_worker(void* argument) {
  auto* worker = static_cast<Worker*>(argument);
  fiber_started(worker->context, *worker->scheduler);
  worker->sums = accumulate(worker->seed, worker->rounds, &yield_to_scheduler, worker);
  worker->done = true;
  exit_fiber(worker->context, *worker->scheduler);
}

void expect_same_bits(const Sums& got, const Sums& want) {
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(got.integers[i], want.integers[i]) << "integer " << i;
    EXPECT_EQ(std::bit_cast<uint64_t>(got.reals[i]), std::bit_cast<uint64_t>(want.reals[i])) << "real " << i;
  }
}

TEST(EmulatorFiber, ManyInterleavedFibersKeepTheirRegisters) {
  constexpr int kFibers = 64, kRounds = 200;
  FiberContext scheduler;
  std::vector<Worker> workers(kFibers);
  for (int f = 0; f < kFibers; ++f) {
    Worker& w = workers[static_cast<size_t>(f)];
    w.scheduler = &scheduler;
    w.seed = 1000 + static_cast<uint64_t>(f) * 7919;
    w.rounds = kRounds;
    make_fiber(w.context, FiberStack::take(), &run_worker, &w);
  }
  // Round robin: every fiber runs one step, then the next; the last switch to each finishes it.
  for (int round = 0; round <= kRounds; ++round) {
    for (Worker& w : workers) {
      ASSERT_FALSE(w.done);
      switch_fiber(scheduler, w.context);
    }
  }
  for (Worker& w : workers) {
    ASSERT_TRUE(w.done);
    FiberStack::give_back(w.context.stack);
    expect_same_bits(w.sums, accumulate(w.seed, w.rounds, &no_yield, nullptr));
  }
}

// 1/3 in single precision under the current rounding mode, computed at run time.
float one_third() {
  volatile float one = 1.0f, three = 3.0f;
  return one / three;
}

struct RoundingFiber {
  FiberContext context;
  FiberContext* scheduler = nullptr;
  int mode_at_start = -1;
  int mode_after_switch = -1;
  float third_after_switch = 0;
};

// Sets its own rounding mode (toward zero), lets the scheduler run, and checks it still has it.
void run_rounding_fiber(void* argument) {
  auto* fiber = static_cast<RoundingFiber*>(argument);
  fiber_started(fiber->context, *fiber->scheduler);
  fiber->mode_at_start = std::fegetround();
  std::fesetround(FE_TOWARDZERO);
  switch_fiber(fiber->context, *fiber->scheduler);
  fiber->mode_after_switch = std::fegetround();
  fiber->third_after_switch = one_third();
  exit_fiber(fiber->context, *fiber->scheduler);
}

TEST(EmulatorFiber, EachFiberKeepsItsRoundingMode) {
  // The emulator's truncating tensor-core mode rounds toward zero inside a kernel thread
  // (emulator/tensor_cores.cpp): the other threads, and the scheduler, must not inherit it.
  ASSERT_EQ(std::fegetround(), FE_TONEAREST);
  const float nearest_third = one_third();
  std::fesetround(FE_TOWARDZERO);
  const float truncated_third = one_third();
  std::fesetround(FE_UPWARD);
  FiberContext scheduler;
  RoundingFiber fibers[2];
  for (RoundingFiber& fiber : fibers) {
    fiber.scheduler = &scheduler;
    make_fiber(fiber.context, FiberStack::take(), &run_rounding_fiber, &fiber);  // made under FE_UPWARD
  }
  std::fesetround(FE_TONEAREST);
  ASSERT_NE(std::bit_cast<uint32_t>(nearest_third), std::bit_cast<uint32_t>(truncated_third));

  for (RoundingFiber& fiber : fibers) {
    switch_fiber(scheduler, fiber.context);  // the fiber sets toward-zero and switches back
    EXPECT_EQ(std::fegetround(), FE_TONEAREST) << "the scheduler took a fiber's rounding mode";
    EXPECT_EQ(std::bit_cast<uint32_t>(one_third()), std::bit_cast<uint32_t>(nearest_third));
  }
  for (RoundingFiber& fiber : fibers) {
    switch_fiber(scheduler, fiber.context);  // the fiber checks its mode and exits
    FiberStack::give_back(fiber.context.stack);
    EXPECT_EQ(fiber.mode_at_start, FE_UPWARD) << "a new fiber starts with its maker's rounding mode";
    EXPECT_EQ(fiber.mode_after_switch, FE_TOWARDZERO) << "a fiber lost its rounding mode across a switch";
    EXPECT_EQ(std::bit_cast<uint32_t>(fiber.third_after_switch), std::bit_cast<uint32_t>(truncated_third));
  }
  EXPECT_EQ(std::fegetround(), FE_TONEAREST);
}

TEST(EmulatorFiber, OneContextAndStackServeFiberAfterFiber) {
  // As the block scheduler does: a finished thread's stack and context start the next thread.
  constexpr int kFibers = 2000, kRounds = 3;
  FiberContext scheduler;
  Worker w;
  w.scheduler = &scheduler;
  w.rounds = kRounds;
  FiberStack* stack = FiberStack::take();
  for (int f = 0; f < kFibers; ++f) {
    w.seed = static_cast<uint64_t>(f);
    w.done = false;
    make_fiber(w.context, stack, &run_worker, &w);
    for (int round = 0; round <= kRounds; ++round)
      switch_fiber(scheduler, w.context);
    ASSERT_TRUE(w.done) << "fiber " << f;
    const Sums want = accumulate(w.seed, w.rounds, &no_yield, nullptr);
    ASSERT_EQ(w.sums.integers[7], want.integers[7]) << "fiber " << f;
  }
  FiberStack::give_back(stack);
}

}  // namespace
}  // namespace nanoforge::emulator

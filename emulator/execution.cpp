// The block scheduler of execution.h. The schedule ranks the block's threads; the scheduler always resumes
// the best-ranked ready thread, which runs until it waits (barrier, warp call) or exits, so the first-ranked
// warp runs as far as it can before any other starts (in order: warp 0 ahead; reversed: the last warp;
// warp-ahead: a random warp, the others in reverse) and random picks any ready thread. When no thread is
// ready, any thread not done is deadlocked. Warp calls keep the first arriver's WarpCall as the meeting
// point; the last arriver completes it on its own stack and goes on. A thread that waits hands the CPU
// straight to the next pick; the scheduler's own stack sees only exits, traps and the end of the block.
#include "emulator/execution.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "emulator/emulator.h"
#include "emulator/fiber.h"

namespace nanoforge::emulator {

thread_local constinit const ThreadBuiltins* current_builtins = nullptr;

namespace {

constexpr int kWarpSize = 32;

enum class ThreadState : uint8_t { kNotStarted, kReady, kWaiting, kDone, kTrapped };
enum class WaitKind : uint8_t { kNone, kBarrier, kWarp };

struct EmulatedThread {
  ThreadBuiltins builtins{};
  int linear = 0;
  ThreadState state = ThreadState::kNotStarted;
  FiberContext context;
  WaitKind waiting = WaitKind::kNone;
  const char* waiting_name = nullptr;
  std::source_location waiting_site;
  unsigned waiting_mask = 0;
  AsyncCopies async_copies;
};

// The ready threads of a block, picked best rank first (or at random).
class ReadySet {
 public:
  void reset(const std::vector<int>& order, bool random) {
    random_ = random;
    order_ = &order;
    rank_of_.resize(order.size());
    for (size_t rank = 0; rank < order.size(); ++rank)
      rank_of_[static_cast<size_t>(order[rank])] = static_cast<int>(rank);
    words_.assign((order.size() + 63) / 64, 0);
    pool_.clear();
    count_ = 0;
  }
  void add(int thread) {
    ++count_;
    if (random_) {
      pool_.push_back(thread);
      return;
    }
    const auto rank = static_cast<size_t>(rank_of_[static_cast<size_t>(thread)]);
    words_[rank / 64] |= uint64_t{1} << (rank % 64);
  }
  bool empty() const { return count_ == 0; }
  int pick(std::mt19937_64& random) {
    --count_;
    if (random_) {
      const size_t at = static_cast<size_t>(random() % pool_.size());
      const int thread = pool_[at];
      pool_[at] = pool_.back();
      pool_.pop_back();
      return thread;
    }
    for (size_t w = 0;; ++w) {
      if (words_[w] == 0) continue;
      const int bit = std::countr_zero(words_[w]);
      words_[w] &= words_[w] - 1;
      return (*order_)[w * 64 + static_cast<size_t>(bit)];
    }
  }

 private:
  bool random_ = false;
  const std::vector<int>* order_ = nullptr;
  std::vector<int> rank_of_;
  std::vector<uint64_t> words_;
  std::vector<int> pool_;
  int count_ = 0;
};

struct WarpState {
  unsigned present = 0;  // lanes that exist (the last warp of a block may be partial)
  unsigned exited = 0;
  std::vector<WarpCall*> pending;
};

bool same_index(const uint3& a, const uint3& b) {
  return a.x == b.x && a.y == b.y && a.z == b.z;
}

// Names and file names are string literals: the lanes of one call site pass the same pointers, so the
// comparison of characters runs only where the pointers differ (a divergent call, or a merged literal).
bool same_text(const char* a, const char* b) {
  return a == b || std::strcmp(a, b) == 0;
}

bool same_site(const std::source_location& a, const std::source_location& b) {
  return a.line() == b.line() && a.column() == b.column() && same_text(a.file_name(), b.file_name());
}

std::string short_file(const char* path) {
  const char* kernels = std::strstr(path, "kernels/");
  return kernels != nullptr ? kernels : path;
}

std::string where(const std::source_location& site) {
  return fmt::format("{}:{}", short_file(site.file_name()), site.line());
}

std::string dims(const dim3& d) {
  return fmt::format("({}, {}, {})", d.x, d.y, d.z);
}

std::string dims(const uint3& d) {
  return fmt::format("({}, {}, {})", d.x, d.y, d.z);
}

// One launch in progress on this OS thread.
class LaunchRun;
thread_local LaunchRun* current_launch = nullptr;

class LaunchRun {
 public:
  LaunchRun(const LaunchDescription& launch, Schedule schedule, uint64_t seed)
      : launch_(launch), schedule_(schedule), seed_(seed), random_(seed) {
    const dim3& b = launch.block;
    thread_count_ = static_cast<int>(b.x * b.y * b.z);
    threads_.resize(static_cast<size_t>(thread_count_));
    warps_.resize(static_cast<size_t>((thread_count_ + kWarpSize - 1) / kWarpSize));
    for (int i = 0; i < thread_count_; ++i) {
      EmulatedThread& t = threads_[static_cast<size_t>(i)];
      t.linear = i;
      t.builtins.thread_idx = {static_cast<unsigned>(i) % b.x, static_cast<unsigned>(i) / b.x % b.y,
                               static_cast<unsigned>(i) / (b.x * b.y)};
      t.builtins.block_dim = b;
      t.builtins.grid_dim = launch.grid;
      t.builtins.lane = i % kWarpSize;
      warps_[static_cast<size_t>(i / kWarpSize)].present |= 1u << (i % kWarpSize);
    }
    // Exactly the requested size, so that AddressSanitizer reports the first byte past it.
    if (posix_memalign(&dynamic_shared_, 1024, std::max<size_t>(launch.dynamic_shared_bytes, 1)) != 0) {
      std::fprintf(stderr, "nanoforge CUDA emulator: cannot allocate %zu bytes of shared memory\n",
                   launch.dynamic_shared_bytes);
      std::abort();
    }
    order_.resize(static_cast<size_t>(thread_count_));
  }

  ~LaunchRun() {
    std::free(dynamic_shared_);
    for (FiberStack* stack : spare_stacks_)
      FiberStack::give_back(stack);
  }

  LaunchOutcome run() {
    current_launch = this;
    const dim3& g = launch_.grid;
    const int64_t blocks = int64_t{g.x} * g.y * g.z;
    std::vector<int64_t> block_order;
    if (schedule_ == Schedule::kRandom) {
      block_order.resize(static_cast<size_t>(blocks));
      std::iota(block_order.begin(), block_order.end(), 0);
      std::shuffle(block_order.begin(), block_order.end(), random_);
    }
    for (int64_t i = 0; i < blocks && !outcome_.trapped; ++i) {
      int64_t b = i;
      if (schedule_ == Schedule::kReversed) b = blocks - 1 - i;
      if (schedule_ == Schedule::kRandom) b = block_order[static_cast<size_t>(i)];
      const uint3 block_idx{static_cast<unsigned>(b % g.x), static_cast<unsigned>(b / g.x % g.y),
                            static_cast<unsigned>(b / (int64_t{g.x} * g.y))};
      run_block(block_idx);
    }
    current_launch = nullptr;
    current_builtins = nullptr;
    return outcome_;
  }

  // ---- what device code calls ----

  EmulatedThread& thread() { return *running_; }

  void sync_block(std::source_location site) {
    EmulatedThread& t = thread();
    if (exited_ > 0) {
      error(fmt::format("__syncthreads() reached after {} thread(s) of the block exited (first: {}); every "
                        "thread of the block must reach each __syncthreads",
                        exited_, describe_thread(threads_[static_cast<size_t>(first_exited_)])),
            site);
    }
    if (barrier_arrived_ == 0) {
      barrier_site_ = site;
    } else if (!same_site(barrier_site_, site)) {
      error(fmt::format(
                "divergent __syncthreads(): this thread waits at {} while {} other thread(s) wait at {}",
                where(site), barrier_arrived_, where(barrier_site_)),
            site);
    }
    ++barrier_arrived_;
    if (barrier_arrived_ == thread_count_) {
      barrier_arrived_ = 0;
      for (EmulatedThread& other : threads_) {
        if (other.waiting == WaitKind::kBarrier) release(other);
      }
      return;
    }
    wait(t, WaitKind::kBarrier, "__syncthreads()", site, 0);
  }

  void warp_call(WarpCall& call, void* record) {
    EmulatedThread& t = thread();
    const int lane = t.linear % kWarpSize;
    const unsigned bit = 1u << lane;
    WarpState& w = warps_[static_cast<size_t>(t.linear / kWarpSize)];
    if ((call.mask & bit) == 0) {
      error(fmt::format("{} with mask {:#010x}, which does not name the calling lane {}", call.name,
                        call.mask, lane),
            call.site);
    }
    if ((call.mask & ~w.present) != 0) {
      error(fmt::format("{} with mask {:#010x} names lanes that do not exist (the block has {} threads, this "
                        "warp's lanes are {:#010x})",
                        call.name, call.mask, thread_count_, w.present),
            call.site);
    }
    if ((call.mask & w.exited) != 0) {
      error(
          fmt::format("{} with mask {:#010x} names lanes that have exited ({:#010x}): they can never arrive",
                      call.name, call.mask, call.mask & w.exited),
          call.site);
    }
    WarpCall* meeting = nullptr;
    for (WarpCall* pending : w.pending) {
      if ((pending->mask & call.mask) == 0) continue;
      if (pending->mask != call.mask || !same_text(pending->name, call.name) ||
          !same_site(pending->site, call.site)) {
        error(fmt::format("divergent warp-synchronous calls: lane {} calls {} with mask {:#010x} at {} while "
                          "lanes {:#010x} wait at {} with mask {:#010x} at {}",
                          lane, call.name, call.mask, where(call.site), pending->arrived, pending->name,
                          pending->mask, where(pending->site)),
              call.site);
      }
      meeting = pending;
      break;
    }
    if (meeting == nullptr) {
      meeting = &call;
      call.arrived = 0;
      w.pending.push_back(&call);
    }
    meeting->records[lane] = record;
    meeting->arrived |= bit;
    if (meeting->arrived == meeting->mask) {
      meeting->complete(*meeting);
      w.pending.erase(std::find(w.pending.begin(), w.pending.end(), meeting));
      const int warp_first = t.linear - lane;
      for (int l = 0; l < kWarpSize; ++l) {
        if ((meeting->mask >> l & 1u) == 0 || l == lane) continue;
        release(threads_[static_cast<size_t>(warp_first + l)]);
      }
      return;
    }
    wait(t, WaitKind::kWarp, call.name, call.site, call.mask);
  }

  void* dynamic_shared() { return dynamic_shared_; }
  bool in_dynamic_shared(const void* pointer, size_t bytes) const {
    const auto* begin = static_cast<const unsigned char*>(dynamic_shared_);
    const auto* p = static_cast<const unsigned char*>(pointer);
    return p >= begin && p + bytes <= begin + launch_.dynamic_shared_bytes;
  }

  [[noreturn]] void trap(std::source_location site) {
    EmulatedThread& t = thread();
    outcome_.trapped = true;
    outcome_.message =
        fmt::format("__trap() in kernel {} (launched at {}), block {}, {} at {}", launch_.kernel_name,
                    where(launch_.site), dims(t.builtins.block_idx), describe_thread(t), where(site));
    t.state = ThreadState::kTrapped;
    switch_fiber(t.context, scheduler_);
    std::abort();  // an abandoned fiber is never resumed
  }

  void note_float_atomic() { outcome_.used_float_atomics = true; }

  // For the fault handler: where the running thread is, without allocating.
  int describe_running(char* buffer, size_t bytes) const {
    if (running_ == nullptr) return 0;
    const ThreadBuiltins& b = running_->builtins;
    return std::snprintf(
        buffer, bytes,
        "nanoforge CUDA emulator: memory fault in kernel %s (launched at %s:%u), block (%u, %u, "
        "%u), thread (%u, %u, %u): an illegal address on a GPU (run under gdb to see where)\n",
        launch_.kernel_name.c_str(), launch_.site.file_name(), launch_.site.line(), b.block_idx.x,
        b.block_idx.y, b.block_idx.z, b.thread_idx.x, b.thread_idx.y, b.thread_idx.z);
  }
  uint64_t seed() const { return seed_; }

  [[noreturn]] void error(const std::string& message, std::source_location site) {
    const EmulatedThread& t = thread();
    std::fprintf(
        stderr,
        "nanoforge CUDA emulator: kernel %s (launched at %s), block %s of grid %s, %s, at %s:\n  %s\n",
        launch_.kernel_name.c_str(), where(launch_.site).c_str(), dims(t.builtins.block_idx).c_str(),
        dims(launch_.grid).c_str(), describe_thread(t).c_str(), where(site).c_str(), message.c_str());
    std::fflush(stderr);
    std::abort();
  }

 private:
  static void thread_main(void* argument) {
    auto* t = static_cast<EmulatedThread*>(argument);
    LaunchRun* run = current_launch;
    fiber_started(t->context, *run->started_from_);
    const Settings& s = settings();
    if (s.break_enabled && same_index(t->builtins.block_idx, s.break_block) &&
        same_index(t->builtins.thread_idx, s.break_thread)) {
      nanoforge_emulator_break();
    }
    run->run_body();
    run->thread_exited(*t);
    exit_fiber(t->context, run->scheduler_);
  }

  // A frame of its own that returns normally, so that AddressSanitizer sees the kernel's frames unwound.
  __attribute__((noinline)) void run_body() { launch_.invoke(launch_.arguments); }

  void thread_exited(EmulatedThread& t) {
    const int lane = t.linear % kWarpSize;
    WarpState& w = warps_[static_cast<size_t>(t.linear / kWarpSize)];
    for (const WarpCall* pending : w.pending) {
      if ((pending->mask >> lane & 1u) != 0) {
        error(fmt::format("the thread exits while lanes {:#010x} wait for it at {} with mask {:#010x} at {}",
                          pending->arrived, pending->name, pending->mask, where(pending->site)),
              pending->site);
      }
    }
    if (barrier_arrived_ > 0) {
      error(fmt::format(
                "the thread exits while {} thread(s) wait at __syncthreads() at {}: every thread of the "
                "block must reach each __syncthreads",
                barrier_arrived_, where(barrier_site_)),
            barrier_site_);
    }
    t.async_copies.uncommitted.clear();
    t.async_copies.groups.clear();
    w.exited |= 1u << lane;
    if (exited_++ == 0) first_exited_ = t.linear;
    t.state = ThreadState::kDone;
  }

  void wait(EmulatedThread& t, WaitKind kind, const char* name, std::source_location site, unsigned mask) {
    t.state = ThreadState::kWaiting;
    t.waiting = kind;
    t.waiting_name = name;
    t.waiting_site = site;
    t.waiting_mask = mask;
    give_way(t);
  }

  // Passes the CPU from `from`, which now waits, straight to the next ready thread (half the switches of a
  // detour through the scheduler), or to the scheduler when none is ready. The picks are the scheduler's
  // loop's, in the same order, so every schedule runs the threads in the same order as before.
  void give_way(EmulatedThread& from) {
    if (ready_.empty() || outcome_.trapped) {
      switch_fiber(from.context, scheduler_);
      return;
    }
    EmulatedThread& next = threads_[static_cast<size_t>(ready_.pick(random_))];
    start_if_new(next);
    started_from_ = &from.context;
    running_ = &next;
    current_builtins = &next.builtins;
    switch_fiber(from.context, next.context);
  }

  void release(EmulatedThread& t) {
    t.state = ThreadState::kReady;
    t.waiting = WaitKind::kNone;
    ready_.add(t.linear);
  }

  void start_if_new(EmulatedThread& t) {
    if (t.state != ThreadState::kNotStarted) return;
    FiberStack* stack = FiberStack::take_or(spare_stacks_);
    make_fiber(t.context, stack, &LaunchRun::thread_main, &t);
    t.state = ThreadState::kReady;
  }

  // Runs `t` until the block hands the CPU back: when a thread exits, traps, or waits with none ready (the
  // thread that switched back is running_ then, not necessarily t).
  void resume(EmulatedThread& t) {
    start_if_new(t);
    started_from_ = &scheduler_;
    running_ = &t;
    current_builtins = &t.builtins;
    switch_fiber(scheduler_, t.context);
    EmulatedThread& last = *running_;
    running_ = nullptr;
    if (last.state == ThreadState::kDone) {
      spare_stacks_.push_back(last.context.stack);  // off that stack now: the next thread to start runs on it
      last.context.stack = nullptr;
    }
  }

  void run_block(uint3 block_idx) {
    for (EmulatedThread& t : threads_) {
      t.state = ThreadState::kNotStarted;
      t.waiting = WaitKind::kNone;
      t.builtins.block_idx = block_idx;
      t.async_copies.uncommitted.clear();
      t.async_copies.groups.clear();
    }
    for (WarpState& w : warps_) {
      w.exited = 0;
      w.pending.clear();
    }
    barrier_arrived_ = 0;
    exited_ = 0;
    std::memset(dynamic_shared_, 0xFF, launch_.dynamic_shared_bytes);
    fill_order();
    ready_.reset(order_, schedule_ == Schedule::kRandom);
    for (int i = 0; i < thread_count_; ++i)
      ready_.add(i);
    while (!ready_.empty() && !outcome_.trapped)
      resume(threads_[static_cast<size_t>(ready_.pick(random_))]);
    if (outcome_.trapped) return abandon_block();
    if (exited_ != thread_count_) deadlock(block_idx);
  }

  void fill_order() {
    std::iota(order_.begin(), order_.end(), 0);
    if (schedule_ == Schedule::kReversed) std::reverse(order_.begin(), order_.end());
    if (schedule_ == Schedule::kWarpAhead) {
      const int warps = static_cast<int>(warps_.size());
      const int ahead = static_cast<int>(random_() % static_cast<uint64_t>(warps));
      std::reverse(order_.begin(), order_.end());
      std::stable_partition(order_.begin(), order_.end(),
                            [&](int index) { return index / kWarpSize == ahead; });
      std::reverse(order_.begin(), order_.begin() + std::min(kWarpSize, thread_count_ - ahead * kWarpSize));
    }
  }

  // After __trap: the block's fibers are dropped where they stand.
  void abandon_block() {
    for (EmulatedThread& t : threads_) {
      if (t.context.stack == nullptr) continue;
      t.context.stack->forget_frames();
      FiberStack::give_back(t.context.stack);
      t.context.stack = nullptr;
    }
  }

  std::string describe_thread(const EmulatedThread& t) const {
    return fmt::format("thread {} (warp {}, lane {})", dims(t.builtins.thread_idx), t.linear / kWarpSize,
                       t.linear % kWarpSize);
  }

  [[noreturn]] void deadlock(uint3 block_idx) {
    // Group consecutive threads that wait at the same place.
    std::string report;
    int first = 0;
    auto key = [&](const EmulatedThread& t) {
      if (t.state == ThreadState::kDone) return std::string("exited");
      if (t.waiting == WaitKind::kBarrier)
        return fmt::format("wait at __syncthreads() at {}", where(t.waiting_site));
      return fmt::format("wait at {} with mask {:#010x} at {}", t.waiting_name, t.waiting_mask,
                         where(t.waiting_site));
    };
    for (int i = 1; i <= thread_count_; ++i) {
      if (i < thread_count_ &&
          key(threads_[static_cast<size_t>(i)]) == key(threads_[static_cast<size_t>(first)]))
        continue;
      report +=
          fmt::format("\n    threads {}-{}: {}", first, i - 1, key(threads_[static_cast<size_t>(first)]));
      first = i;
    }
    std::fprintf(
        stderr,
        "nanoforge CUDA emulator: deadlock in kernel %s (launched at %s), block %s of grid %s (block "
        "size %s): no thread can make progress (thread indices are linear, x fastest):%s\n",
        launch_.kernel_name.c_str(), where(launch_.site).c_str(), dims(block_idx).c_str(),
        dims(launch_.grid).c_str(), dims(launch_.block).c_str(), report.c_str());
    std::fflush(stderr);
    std::abort();
  }

  const LaunchDescription& launch_;
  const Schedule schedule_;
  const uint64_t seed_;
  std::mt19937_64 random_;
  int thread_count_ = 0;
  std::vector<EmulatedThread> threads_;
  std::vector<WarpState> warps_;
  std::vector<int> order_;
  ReadySet ready_;
  std::vector<FiberStack*> spare_stacks_;  // stacks of finished threads, kept for the launch's next threads
  void* dynamic_shared_ = nullptr;
  FiberContext scheduler_;
  FiberContext* started_from_ = &scheduler_;  // the context that switched to a thread starting now
  EmulatedThread* running_ = nullptr;
  int barrier_arrived_ = 0;
  std::source_location barrier_site_;
  int exited_ = 0;
  int first_exited_ = 0;
  LaunchOutcome outcome_;
};

LaunchRun& launch_run() {
  return *current_launch;
}

}  // namespace

const char* schedule_name(Schedule schedule) {
  switch (schedule) {
    case Schedule::kInOrder:
      return "in-order";
    case Schedule::kReversed:
      return "reversed";
    case Schedule::kRandom:
      return "random";
    case Schedule::kWarpAhead:
      return "warp-ahead";
  }
  return "?";
}

namespace {

// A fault inside a kernel (a wild pointer, a fiber's stack overflowing into its guard page) names the kernel,
// block and thread before the default action ends the process. AddressSanitizer's own handler reports more,
// so under it nothing is installed.
#if !defined(__SANITIZE_ADDRESS__)
void on_fault(int signal) {
  char message[1024];
  const int length =
      current_launch != nullptr ? current_launch->describe_running(message, sizeof(message)) : 0;
  if (length > 0)
    (void)!write(STDERR_FILENO, message, static_cast<size_t>(std::min<int>(length, sizeof(message))));
  ::signal(signal, SIG_DFL);
}

#endif

void install_fault_handler() {
#if !defined(__SANITIZE_ADDRESS__)
  thread_local bool installed = false;
  if (installed) return;
  installed = true;
  static thread_local char alternate_stack[64 * 1024];
  stack_t stack{};
  stack.ss_sp = alternate_stack;
  stack.ss_size = sizeof(alternate_stack);
  sigaltstack(&stack, nullptr);
  struct sigaction action {};
  action.sa_handler = &on_fault;
  action.sa_flags = SA_ONSTACK | SA_RESETHAND;
  sigemptyset(&action.sa_mask);
  sigaction(SIGSEGV, &action, nullptr);
  sigaction(SIGBUS, &action, nullptr);
#endif
}

}  // namespace

LaunchOutcome run_launch(const LaunchDescription& launch, Schedule schedule, uint64_t seed) {
  install_fault_handler();
  LaunchRun run(launch, schedule, seed);
  return run.run();
}

void sync_block(std::source_location site) {
  launch_run().sync_block(site);
}

void warp_call(WarpCall& call, void* record) {
  launch_run().warp_call(call, record);
}

namespace {

struct SyncRecord {};

void complete_sync(WarpCall& /*call*/) {}

struct ShuffleRecord {
  int kind;
  int arg;
  int width;
  uint64_t bits;
  uint64_t result;
};

void complete_shuffle(WarpCall& call) {
  for (int lane = 0; lane < kWarpSize; ++lane) {
    if ((call.mask >> lane & 1u) == 0) continue;
    auto* record = static_cast<ShuffleRecord*>(call.records[lane]);
    const int width = record->width;
    const int segment = lane & ~(width - 1);
    int source = lane;
    switch (record->kind) {
      case 0:
        source = segment + (record->arg & (width - 1));
        break;
      case 1:
        source = lane - record->arg >= segment ? lane - record->arg : lane;
        break;
      case 2:
        source = lane + record->arg < segment + width ? lane + record->arg : lane;
        break;
      default:
        source = (lane ^ record->arg) < segment + width ? lane ^ record->arg : lane;
        break;
    }
    if ((call.mask >> source & 1u) == 0) {
      launch_run().error(
          fmt::format("{}: lane {} reads lane {}, which is not in the mask {:#010x} (its value is "
                      "undefined on a GPU)",
                      call.name, lane, source, call.mask),
          call.site);
    }
    record->result = static_cast<ShuffleRecord*>(call.records[source])->bits;
  }
}

struct BallotRecord {
  bool predicate;
  unsigned result;
};

void complete_ballot(WarpCall& call) {
  unsigned bits = 0;
  for (int lane = 0; lane < kWarpSize; ++lane) {
    if ((call.mask >> lane & 1u) != 0 && static_cast<BallotRecord*>(call.records[lane])->predicate)
      bits |= 1u << lane;
  }
  for (int lane = 0; lane < kWarpSize; ++lane) {
    if ((call.mask >> lane & 1u) != 0) static_cast<BallotRecord*>(call.records[lane])->result = bits;
  }
}

}  // namespace

void sync_warp(unsigned mask, std::source_location site) {
  WarpCall call{.name = "__syncwarp", .mask = mask, .site = site, .complete = &complete_sync};
  SyncRecord record;
  launch_run().warp_call(call, &record);
}

uint64_t shuffle(int kind, unsigned mask, uint64_t bits, int arg, int width, const char* name,
                 std::source_location site) {
  if (width < 1 || width > kWarpSize || (width & (width - 1)) != 0)
    launch_run().error(
        fmt::format("{} with width {}: the width must be a power of two up to 32", name, width), site);
  WarpCall call{.name = name, .mask = mask, .site = site, .complete = &complete_shuffle};
  ShuffleRecord record{kind, arg, width, bits, 0};
  launch_run().warp_call(call, &record);
  return record.result;
}

unsigned ballot(unsigned mask, bool predicate, const char* name, std::source_location site) {
  WarpCall call{.name = name, .mask = mask, .site = site, .complete = &complete_ballot};
  BallotRecord record{predicate, 0};
  launch_run().warp_call(call, &record);
  return record.result;
}

void* dynamic_shared_memory() {
  return launch_run().dynamic_shared();
}

bool in_dynamic_shared_memory(const void* pointer, size_t bytes) {
  return launch_run().in_dynamic_shared(pointer, bytes);
}

AsyncCopies& running_thread_async_copies() {
  return launch_run().thread().async_copies;
}

void trap(std::source_location site) {
  launch_run().trap(site);
}

void note_float_atomic() {
  launch_run().note_float_atomic();
}

void device_error(const std::string& message, std::source_location site) {
  launch_run().error(message, site);
}

uint64_t launch_seed() {
  return launch_run().seed();
}

}  // namespace nanoforge::emulator

// cp.async on the emulator (the inline-PTX helpers of kernels/cuda/mma_ptx.cuh): a copy from global to shared
// memory lands only when the issuing thread's cp.async.wait_group releases its group, which is as late as PTX
// allows, so a read of the destination before the wait (or by another thread before the barrier after it)
// sees the old bytes and makes the schedules disagree, as a missing wait does on a GPU. Per thread, not per
// warp: cp.async is not warp-synchronous.
#pragma once

#include <cstdint>
#include <source_location>

namespace nanoforge::emulator {

// cp.async.cg.shared.global [destination], [source], 16, source_bytes: queues a 16-byte copy whose last
// 16 - source_bytes bytes are zeros (source_bytes 0 or 16 here). Checks the alignment and that destination is
// the block's dynamic shared memory.
void ptx_cp_async_16(void* destination, const void* source, uint32_t source_bytes,
                     std::source_location site = std::source_location::current());
// cp.async.commit_group: the copies queued since the last commit become one group.
void ptx_cp_async_commit_group();
// cp.async.wait_group pending: lands every committed group but the `pending` newest (copies not yet
// committed stay queued).
void ptx_cp_async_wait_group(int pending);

}  // namespace nanoforge::emulator

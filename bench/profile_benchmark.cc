// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Heap profiler costs (heap_profile.h), Google Benchmark:
//   BM_ResourcePair/<rate>       MemoryResource allocate(64) + deallocate on
//                                one group, sampling off (rate 0) and at the
//                                default 512 KiB: the hot path's countdown.
//   BM_SampledAllocation/<cap>/<depth>
//                                one sampled allocation (the slow path: the
//                                decision, the stack capture, the record)
//                                and its free, every call sampled, from
//                                <depth> frames of the benchmark's own
//                                (built with frame pointers); <cap> 0 unwind
//                                tables (default), 1 frame pointers.
//   BM_UnwBacktrace/<depth>      libunwind's unw_backtrace at the same depth,
//                                for comparison (when built with libunwind).
//   BM_ExportPprof100k           HeapProfilePprof of a group with 100,000
//                                live samples (4,096 distinct stacks).
//
// Run the pairs side by side in one run (--benchmark_repetitions=5); the
// machine's load shows in the spread.

#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "umemcg/heap_profile.h"
#include "umemcg/heap_profile_pprof.h"
#include "umemcg/memory_resource.h"
#include "umemcg/umemcg.h"

#ifdef UMEMCG_BENCH_HAVE_LIBUNWIND
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#endif

namespace umemcg {
namespace {

struct Fixture {
  Fixture() {
    ctrl = Controller::Create({}).value();
    group = ctrl->CreateGroup(ctrl->root(), "bench").value();
  }
  std::unique_ptr<Controller> ctrl;
  GroupRef group;
};

Fixture& Fx() {
  static Fixture* f = new Fixture;
  return *f;
}

void BM_ResourcePair(benchmark::State& state) {
  Fixture& f = Fx();
  SetHeapProfileRate(*f.group, Bytes(static_cast<uint64_t>(state.range(0))));
  MemoryResource res(*f.group);
  for (auto _ : state) {
    void* p = res.allocate(64, 16);
    benchmark::DoNotOptimize(p);
    res.deallocate(p, 64, 16);
  }
  state.SetItemsProcessed(state.iterations());
  SetHeapProfileRate(*f.group, kDefaultHeapProfileRate);
}
BENCHMARK(BM_ResourcePair)->Arg(0)->Arg(512 * 1024);

// Recurses `depth` frames (frame pointers kept: see CMakeLists.txt) and
// then runs `fn`.
template <typename Fn>
[[gnu::noinline]] void AtDepth(int depth, Fn& fn) {
  if (depth <= 0) {
    fn();
  } else {
    AtDepth(depth - 1, fn);
  }
  benchmark::ClobberMemory();  // no tail call
}

void BM_SampledAllocation(benchmark::State& state) {
  Fixture& f = Fx();
  SetHeapProfileRate(*f.group, Bytes(1));  // every block of >= 64 B
  SetHeapProfileStackCapture(state.range(0) == 0
                                 ? StackCapture::kUnwindTables
                                 : StackCapture::kFramePointers);
  ObjCgroupRef objcg = f.group->GetObjCgroup();
  alignas(16) static char block[64];
  SeedHeapProfileThreadForTesting(1);
  uint64_t sampled = 0;
  auto one = [&] {
    for (auto _ : state) {
      if (NoteHeapAllocation(objcg.get(), block, Bytes(64))) {
        ++sampled;
        ForgetHeapAllocation(block);
      }
    }
  };
  AtDepth(static_cast<int>(state.range(1)), one);
  state.counters["sampled"] = benchmark::Counter(
      static_cast<double>(sampled), benchmark::Counter::kAvgIterations);
  SetHeapProfileStackCapture(StackCapture::kUnwindTables);
  SetHeapProfileRate(*f.group, kDefaultHeapProfileRate);
}
BENCHMARK(BM_SampledAllocation)
    ->Args({0, 8})
    ->Args({1, 8})
    ->Args({0, 32})
    ->Args({1, 32});

#ifdef UMEMCG_BENCH_HAVE_LIBUNWIND
void BM_UnwBacktrace(benchmark::State& state) {
  void* frames[64];
  auto one = [&] {
    for (auto _ : state) {
      benchmark::DoNotOptimize(unw_backtrace(frames, 64));
    }
  };
  AtDepth(static_cast<int>(state.range(0)), one);
}
BENCHMARK(BM_UnwBacktrace)->Arg(8)->Arg(32);
#endif

// 4,096 distinct stacks: 12 levels of calls, each through one of two call
// sites chosen by a bit of `path`.
void NoteB(ObjCgroup* objcg, uintptr_t addr, int depth, unsigned path);

[[gnu::noinline]] void NoteA(ObjCgroup* objcg, uintptr_t addr, int depth,
                             unsigned path) {
  if (depth == 0) {
    NoteHeapAllocation(objcg, reinterpret_cast<void*>(addr), Bytes(4096));
  } else if (path & 1) {
    NoteA(objcg, addr, depth - 1, path >> 1);
  } else {
    NoteB(objcg, addr, depth - 1, path >> 1);
  }
  benchmark::ClobberMemory();  // no tail calls
}

[[gnu::noinline]] void NoteB(ObjCgroup* objcg, uintptr_t addr, int depth,
                             unsigned path) {
  if (depth == 0) {
    NoteHeapAllocation(objcg, reinterpret_cast<void*>(addr), Bytes(4096));
  } else if (path & 1) {
    NoteA(objcg, addr, depth - 1, path >> 1);
  } else {
    NoteB(objcg, addr, depth - 1, path >> 1);
  }
  benchmark::ClobberMemory();
}

void BM_ExportPprof100k(benchmark::State& state) {
  Controller& ctrl = *Fx().ctrl;
  GroupRef g = ctrl.CreateGroup(ctrl.root(), "export").value();
  SetHeapProfileRate(*g, Bytes(1));
  ObjCgroupRef objcg = g->GetObjCgroup();
  SeedHeapProfileThreadForTesting(2);
  constexpr uintptr_t kBase = uintptr_t{1} << 44;  // addresses never used
  for (uintptr_t i = 0; i < 100000; ++i) {
    NoteA(objcg.get(), kBase + i * 64, 12, static_cast<unsigned>(i % 4096));
  }
  uint64_t live = 0;
  size_t stacks = 0;
  for (const HeapProfileEntry& e : SnapshotHeapProfile(*g).entries) {
    live += e.inuse_samples;
    ++stacks;
  }
  size_t bytes = 0;
  for (auto _ : state) {
    bytes = HeapProfilePprof(*g).size();
    benchmark::DoNotOptimize(bytes);
  }
  state.counters["live_samples"] = static_cast<double>(live);
  state.counters["stacks"] = static_cast<double>(stacks);
  state.counters["pprof_bytes"] = static_cast<double>(bytes);
  for (uintptr_t i = 0; i < 100000; ++i) {
    ForgetHeapAllocation(reinterpret_cast<void*>(kBase + i * 64));
  }
  SetHeapProfileRate(*g, kDefaultHeapProfileRate);
  (void)ctrl.RemoveGroup(*g);
}
BENCHMARK(BM_ExportPprof100k)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace
}  // namespace umemcg

BENCHMARK_MAIN();

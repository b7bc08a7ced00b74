// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Runs under LD_PRELOAD=libumemcg-preload.so (ctest sets it) and checks the
// interposer from the inside: exact byte accounting of every allocation
// function, realloc moving the charge, alignment, threads freeing each
// other's blocks, per-group charging through umemcg_preload_set_group,
// pointers that are not the interposer's, and (suite PreloadEnforce, run
// with UMEMCG_ENFORCE=1 UMEMCG_MAX=64M) allocation failure at memory.max.
//
// The program links nothing of umemcg: it finds the API with dlsym, as a
// program that wants to run with or without the preload would. Exact
// deltas are taken with no gtest macro in between (gtest allocates).

#include <dlfcn.h>
#include <errno.h>
#include <gtest/gtest.h>
#include <malloc.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "umemcg/preload.h"

extern "C" {
void* __libc_malloc(size_t size);
void __libc_free(void* p);
}

namespace {

struct Api {
  umemcg_preload_set_group_fn set_group = nullptr;
  umemcg_preload_get_stats_fn get_stats = nullptr;
  umemcg_preload_read_file_fn read_file = nullptr;
  umemcg_preload_write_file_fn write_file = nullptr;
  umemcg_preload_sync_fn sync = nullptr;
  umemcg_preload_remove_group_fn remove_group = nullptr;
  bool ok() const {
    return set_group && get_stats && read_file && write_file && sync &&
           remove_group;
  }
};

template <class Fn>
void Resolve(Fn* fn, const char* name) {
  *fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
}

const Api& api() {
  static const Api a = [] {
    Api r;
    Resolve(&r.set_group, "umemcg_preload_set_group");
    Resolve(&r.get_stats, "umemcg_preload_get_stats");
    Resolve(&r.read_file, "umemcg_preload_read_file");
    Resolve(&r.write_file, "umemcg_preload_write_file");
    Resolve(&r.sync, "umemcg_preload_sync");
    Resolve(&r.remove_group, "umemcg_preload_remove_group");
    return r;
  }();
  return a;
}

// Keeps the compiler from eliding an allocation/free pair (it may, for
// malloc and new-expressions whose result is unused).
template <class T>
T* Escape(T* p) {
  asm volatile("" : : "g"(p) : "memory");
  return p;
}

umemcg_preload_stats_t Stats() {
  umemcg_preload_stats_t s{};
  (void)api().get_stats(&s);
  return s;
}
int64_t Live() { return Stats().live_bytes; }

std::string ReadFile(const char* group, const char* file) {
  char buf[16384];
  const int err = api().read_file(group, file, buf, sizeof(buf), nullptr);
  return err == 0 ? std::string(buf) : "error " + std::to_string(err);
}

// A key's value in memory.stat / memory.events text; -1 if absent.
int64_t Key(const std::string& text, const std::string& key) {
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t eol = text.find('\n', pos);
    const std::string line = text.substr(pos, eol - pos);
    if (line.compare(0, key.size() + 1, key + " ") == 0) {
      return std::stoll(line.substr(key.size() + 1));
    }
    if (eol == std::string::npos) break;
    pos = eol + 1;
  }
  return -1;
}

int64_t SlabOf(const char* group) {
  (void)api().sync();
  return Key(ReadFile(group, "memory.stat"), "slab_unreclaimable");
}

class PreloadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(api().ok())
        << "not running under libumemcg-preload.so: run with "
           "LD_PRELOAD=<build>/lib/libumemcg-preload.so";
  }
};

TEST_F(PreloadTest, MallocFamilyChargesRequestPlusHeaderExactly) {
  const int64_t before = Live();
  void* a = Escape(malloc(1));
  void* b = Escape(malloc(100));
  void* c = Escape(calloc(10, 100));
  void* d = Escape(malloc(1 << 20));  // glibc mmaps this one
  void* e = Escape(malloc(0));
  const int64_t during = Live();
  const size_t usable_b = malloc_usable_size(b);
  const bool zeroed =
      std::all_of(static_cast<char*>(c), static_cast<char*>(c) + 1000,
                  [](char x) { return x == 0; });
  free(a);
  free(b);
  free(c);
  free(d);
  free(e);
  const int64_t after = Live();
  EXPECT_EQ(during - before, (1 + 100 + 1000 + (1 << 20) + 0) + 5 * 32);
  EXPECT_EQ(after, before);
  EXPECT_EQ(usable_b, 100u);
  EXPECT_TRUE(zeroed);
  EXPECT_NE(e, nullptr);
}

TEST_F(PreloadTest, ReallocMovesTheChargeOnGrowAndShrink) {
  const int64_t before = Live();
  char* p = static_cast<char*>(malloc(100));
  std::memset(p, 'x', 100);
  const int64_t at100 = Live();
  p = static_cast<char*>(realloc(p, 200000));  // grows (and moves)
  const int64_t at200k = Live();
  const bool kept = p[0] == 'x' && p[99] == 'x';
  p = static_cast<char*>(realloc(p, 50));  // shrinks
  const int64_t at50 = Live();
  void* q = realloc(nullptr, 10);  // = malloc
  const int64_t with_q = Live();
  void* r = realloc(q, 0);  // glibc: frees, returns NULL
  const int64_t without_q = Live();
  void* s = reallocarray(nullptr, 10, 10);
  volatile size_t huge = SIZE_MAX / 2;
  void* overflow = reallocarray(nullptr, huge, 4);
  const int overflow_errno = errno;
  free(s);
  free(p);
  const int64_t after = Live();
  EXPECT_EQ(at100 - before, 132);
  EXPECT_EQ(at200k - before, 200032);
  EXPECT_TRUE(kept);
  EXPECT_EQ(at50 - before, 82);
  EXPECT_EQ(with_q - at50, 42);
  EXPECT_EQ(r, nullptr);
  EXPECT_EQ(without_q, at50);
  EXPECT_EQ(overflow, nullptr);
  EXPECT_EQ(overflow_errno, ENOMEM);
  EXPECT_EQ(after, before);
}

TEST_F(PreloadTest, AlignedVariantsAreAlignedAndBalanced) {
  const int64_t before = Live();
  void* a = Escape(aligned_alloc(64, 100));
  void* b = nullptr;
  const int rc = posix_memalign(&b, 4096, 10);
  void* c = Escape(memalign(128, 5));
  void* d = Escape(valloc(10));
  void* e = Escape(pvalloc(10));
  char* f = Escape(new (std::align_val_t(256)) char[10]);
  void* g = Escape(aligned_alloc(32, 100));
  const int64_t during = Live();
  g = realloc(g, 100000);  // keeps its alignment
  const int64_t regrown = Live();
  void* bad = nullptr;
  const int bad_rc = posix_memalign(&bad, 24, 10);
  free(a);
  free(b);
  free(c);
  free(d);
  free(e);
  ::operator delete[](f, std::align_val_t(256));
  free(g);
  const int64_t after = Live();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % 4096, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(c) % 128, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(d) % 4096, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(e) % 4096, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(f) % 256, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(g) % 32, 0u);
  // Request + max(alignment, 32) each; pvalloc rounds to a page.
  EXPECT_EQ(during - before, (100 + 64) + (10 + 4096) + (5 + 128) +
                                 (10 + 4096) + (4096 + 4096) + (10 + 256) +
                                 (100 + 32));
  EXPECT_EQ(regrown - during, 100000 - 100);
  EXPECT_EQ(bad_rc, EINVAL);
  EXPECT_EQ(after, before);
}

TEST_F(PreloadTest, EveryOperatorNewAndDeleteIsBalanced) {
  const int64_t before = Live();
  int* a = Escape(new int(5));
  int* b = Escape(new int[100]);
  int* c = Escape(new (std::nothrow) int);
  int* d = Escape(new (std::nothrow) int[3]);
  auto* e = static_cast<char*>(::operator new(48, std::align_val_t(64)));
  auto* f = static_cast<char*>(
      ::operator new[](48, std::align_val_t(64), std::nothrow));
  const int64_t during = Live();
  delete a;
  delete[] b;
  ::operator delete(c, sizeof(int));
  ::operator delete[](d, std::nothrow);
  ::operator delete(e, 48, std::align_val_t(64));
  ::operator delete[](f, std::align_val_t(64), std::nothrow);
  const int64_t after = Live();
  EXPECT_EQ(during - before,
            (4 + 32) + (400 + 32) + (4 + 32) + (12 + 32) + 2 * (48 + 64));
  EXPECT_EQ(after, before);
}

TEST_F(PreloadTest, ForeignPointersPassThroughUnaccounted) {
  const umemcg_preload_stats_t before = Stats();
  void* f = Escape(__libc_malloc(100));  // glibc's own block: no header of ours
  const size_t usable = malloc_usable_size(f);
  free(f);
  void* g = Escape(__libc_malloc(50));
  g = realloc(g, 5000);  // stays glibc's
  std::memset(g, 1, 5000);
  const size_t usable_g = malloc_usable_size(g);
  free(g);
  const umemcg_preload_stats_t after = Stats();
  EXPECT_GE(usable, 100u);
  EXPECT_GE(usable_g, 5000u);
  EXPECT_EQ(after.foreign_frees - before.foreign_frees, 3u);
  EXPECT_EQ(after.live_bytes, before.live_bytes);
}

TEST_F(PreloadTest, DoubleFreeIsNotUnchargedTwice) {
  // glibc rejects the second free (abort); the first one alone uncharged.
  EXPECT_DEATH(
      {
        void* p = Escape(malloc(64));
        free(p);
        const int64_t live = Live();
        free(p);
        if (Live() != live) std::_Exit(3);  // would mean a double uncharge
      },
      "");
}

TEST_F(PreloadTest, SetGroupChargesThatGroupAndThreadsFreeEachOther) {
  constexpr int kBlocks = 1000;
  std::vector<void*> from_a(kBlocks), from_b(kBlocks);
  auto fill = [](const char* group, std::vector<void*>* out) {
    (void)api().set_group(group);
    for (int i = 0; i < kBlocks; ++i) (*out)[i] = malloc(16 + i % 512);
    (void)api().set_group(nullptr);
  };
  std::thread ta(fill, "probe/a", &from_a);
  std::thread tb(fill, "probe/b", &from_b);
  ta.join();
  tb.join();
  int64_t bytes = 0;
  for (int i = 0; i < kBlocks; ++i) bytes += 16 + i % 512 + 32;
  EXPECT_EQ(SlabOf("probe/a"), bytes);
  EXPECT_EQ(SlabOf("probe/b"), bytes);
  EXPECT_EQ(SlabOf("probe"), 2 * bytes);
  // Each thread frees the other's blocks (no group assigned there).
  auto drain = [](std::vector<void*>* blocks) {
    for (void* p : *blocks) free(p);
  };
  std::thread fa(drain, &from_b);
  std::thread fb(drain, &from_a);
  fa.join();
  fb.join();
  EXPECT_EQ(SlabOf("probe/a"), 0);
  EXPECT_EQ(SlabOf("probe/b"), 0);
  EXPECT_EQ(ReadFile("probe/a", "memory.current"), "0\n");
  EXPECT_EQ(ReadFile("probe/b", "memory.current"), "0\n");
  EXPECT_EQ(api().set_group("../x"), EINVAL);
  EXPECT_EQ(api().set_group("a//b"), EINVAL);
}

TEST_F(PreloadTest, FreeAfterTheGroupIsGoneUnchargesTheParent) {
  ASSERT_EQ(api().set_group("gone/child"), 0);
  void* p = Escape(malloc(3000));
  ASSERT_EQ(api().set_group(nullptr), 0);
  EXPECT_EQ(SlabOf("gone/child"), 3032);
  EXPECT_EQ(api().remove_group("gone"), EBUSY);  // has a child
  ASSERT_EQ(api().remove_group("gone/child"), 0);
  EXPECT_EQ(SlabOf("gone/child"), -1);  // no such group any more
  EXPECT_EQ(SlabOf("gone"), 3032);
  // Freed on another thread after the owner is gone: the parent is
  // uncharged, to the byte and to the page.
  std::thread([p] { free(p); }).join();
  EXPECT_EQ(SlabOf("gone"), 0);
  EXPECT_EQ(ReadFile("gone", "memory.current"), "0\n");
  // The same path makes a new group.
  ASSERT_EQ(api().set_group("gone/child"), 0);
  void* q = Escape(malloc(10));
  ASSERT_EQ(api().set_group(nullptr), 0);
  EXPECT_EQ(SlabOf("gone/child"), 42);
  free(q);
}

TEST_F(PreloadTest, FilesAreWritable) {
  ASSERT_EQ(api().set_group("limits"), 0);
  ASSERT_EQ(api().set_group(nullptr), 0);
  EXPECT_EQ(api().write_file("limits", "memory.max", "10M"), 0);
  EXPECT_EQ(ReadFile("limits", "memory.max"), "10485760\n");
  EXPECT_EQ(api().write_file("limits", "memory.max", "bogus"), EINVAL);
  EXPECT_EQ(api().write_file("nope", "memory.max", "1M"), ENOENT);
}

// ---- UMEMCG_ENFORCE=1 UMEMCG_MAX=64M (a separate ctest entry) ----

class PreloadEnforceTest : public PreloadTest {
 protected:
  void SetUp() override {
    PreloadTest::SetUp();
    if (Stats().enforce == 0) GTEST_SKIP() << "needs UMEMCG_ENFORCE=1";
  }
};

TEST_F(PreloadEnforceTest, MallocFailsWithEnomemAndNewThrowsAtMax) {
  const umemcg_preload_stats_t before = Stats();
  std::vector<void*> blocks;
  blocks.reserve(1000);
  int err = 0;
  for (int i = 0; i < 1000; ++i) {
    void* p = Escape(malloc(1 << 20));
    if (p == nullptr) {
      err = errno;
      break;
    }
    blocks.push_back(p);
  }
  // 64 MiB max, some of it used by the test runner already.
  EXPECT_LE(blocks.size(), 64u);
  EXPECT_GE(blocks.size(), 32u);
  EXPECT_EQ(err, ENOMEM);
  EXPECT_EQ(Escape(calloc(1, 1 << 20)), nullptr);
  EXPECT_THROW(delete[] Escape(new char[1 << 20]), std::bad_alloc);
  EXPECT_EQ(Escape(new (std::nothrow) char[1 << 20]), nullptr);
  // A refused realloc leaves the old block intact and charged.
  char* keep = static_cast<char*>(blocks.back());
  keep[0] = 'k';
  EXPECT_EQ(realloc(keep, 8 << 20), nullptr);
  EXPECT_EQ(keep[0], 'k');
  EXPECT_GT(Stats().charge_failures, before.charge_failures);
  EXPECT_GT(Key(ReadFile("", "memory.events"), "max"), 0);
  for (void* p : blocks) free(p);
  // Room again.
  void* again = Escape(malloc(1 << 20));
  EXPECT_NE(again, nullptr);
  free(again);
}

}  // namespace

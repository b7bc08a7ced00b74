// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// A program for preload_resident_test.sh, run under libumemcg-preload.so:
// maps a 64 MiB private anonymous region and touches it step by step,
// then releases parts with madvise(MADV_DONTNEED) and munmap, printing
// what the preload charges for mappings (umemcg_preload_get_stats
// mapped_bytes, and memory.current of "process") after each step, and
// checking it against what the mode promises:
//
//   resident  the charge follows the touched pages: it reaches them
//             within the scanner's period (polled for up to 30 s: the
//             machine may be loaded), and falls at once after madvise and
//             munmap; an mremap move carries it, a shrink gives back the
//             cut pages' part.
//   at-mmap   the whole region is charged from mmap to munmap.
//   limit     (resident, UMEMCG_ENFORCE=1, UMEMCG_MAX=32M) touching 48 MiB
//             is charged past the limit; then a new mmap fails with ENOMEM
//             and malloc(1 MiB) returns NULL; after MADV_DONTNEED of the
//             region both succeed again.
//   slowpath  (resident, UMEMCG_ENFORCE=1, UMEMCG_MAX=32M, no scanner run)
//             a refused heap charge counts the mappings again, so pages
//             released by a raw madvise system call give their charge back
//             and the allocation succeeds.
//
// Usage: resident_prog resident|at-mmap|limit|slowpath. Exit 0: every
// check held.

#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "umemcg/preload.h"

#define MIB (1024L * 1024L)

static umemcg_preload_get_stats_fn get_stats;
static umemcg_preload_read_file_fn read_file;
static int failures;

static int64_t Mapped(void) {
  umemcg_preload_stats_t s;
  if (get_stats(&s) != 0) return -1;
  return s.mapped_bytes;
}

static long long Current(void) {
  char buf[64];
  if (read_file(NULL, "memory.current", buf, sizeof(buf), NULL) != 0) {
    return -1;
  }
  return atoll(buf);
}

static void Show(const char* step) {
  printf("%-24s mapped=%lld MiB current=%lld MiB\n", step,
         (long long)(Mapped() / MIB), Current() / MIB);
  fflush(stdout);
}

static void Check(int ok, const char* step, const char* what) {
  if (!ok) {
    printf("FAIL %s: %s (mapped %lld bytes)\n", step, what,
           (long long)Mapped());
    failures++;
  }
}

// Waits until the mapping charge is within [lo, hi] MiB (the scanner's
// next period), at most 30 s.
static int WaitMapped(long lo, long hi) {
  for (int i = 0; i < 3000; ++i) {
    const int64_t m = Mapped();
    if (m >= lo * MIB && m <= hi * MIB) return 1;
    usleep(10000);
  }
  return 0;
}

static void Touch(char* p, long from_mib, long to_mib) {
  for (long off = from_mib * MIB; off < to_mib * MIB; off += 4096) p[off] = 1;
}

static int Resident(void) {
  char* p = mmap(NULL, 64 * MIB, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return 1;
  // Page by page: transparent huge pages would round the counts up.
  (void)madvise(p, 64 * MIB, MADV_NOHUGEPAGE);
  Show("mapped 64 MiB");
  Check(Mapped() < 2 * MIB, "mmap", "untouched pages charged");
  Touch(p, 0, 16);
  Check(WaitMapped(16, 18), "touch 16", "charge did not reach 16 MiB");
  Show("touched 16 MiB");
  Touch(p, 16, 48);
  Check(WaitMapped(48, 50), "touch 48", "charge did not reach 48 MiB");
  Show("touched 48 MiB");
  // madvise recounts at once: no wait.
  (void)madvise(p, 32 * MIB, MADV_DONTNEED);
  Show("DONTNEED first 32 MiB");
  Check(Mapped() >= 16 * MIB && Mapped() <= 18 * MIB, "dontneed",
        "charge did not fall to 16 MiB");
  // Unmapping part of the region gives back its resident pages only.
  (void)munmap(p + 32 * MIB, 8 * MIB);
  Show("munmap 32..40 MiB");
  Check(Mapped() >= 8 * MIB && Mapped() <= 10 * MIB, "munmap part",
        "charge did not fall to 8 MiB");
  (void)munmap(p, 64 * MIB);
  Show("munmap all");
  Check(Mapped() < 2 * MIB, "munmap", "charge left after munmap");
  // mremap: a move carries the charge, growth is charged when touched, a
  // shrink gives back what the cut pages held.
  p = mmap(NULL, 8 * MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
           -1, 0);
  if (p == MAP_FAILED) return 1;
  (void)madvise(p, 8 * MIB, MADV_NOHUGEPAGE);
  Touch(p, 0, 8);
  Check(WaitMapped(8, 10), "touch 8", "charge did not reach 8 MiB");
  p = mremap(p, 8 * MIB, 32 * MIB, MREMAP_MAYMOVE);
  if (p == MAP_FAILED) return 1;
  (void)madvise(p, 32 * MIB, MADV_NOHUGEPAGE);
  Show("mremap to 32 MiB");
  Check(Mapped() >= 8 * MIB && Mapped() <= 10 * MIB, "mremap grow",
        "charge not carried");
  Touch(p, 8, 24);
  Check(WaitMapped(24, 26), "touch 24", "growth not charged");
  Show("touched 24 MiB");
  p = mremap(p, 32 * MIB, 4 * MIB, 0);
  if (p == MAP_FAILED) return 1;
  Show("mremap to 4 MiB");
  Check(Mapped() >= 4 * MIB && Mapped() <= 6 * MIB, "mremap shrink",
        "charge did not fall to 4 MiB");
  (void)munmap(p, 4 * MIB);
  Check(Mapped() < 2 * MIB, "munmap", "charge left after munmap");
  return 0;
}

static int AtMmap(void) {
  char* p = mmap(NULL, 64 * MIB, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return 1;
  Show("mapped 64 MiB");
  Check(Mapped() == 64 * MIB, "mmap", "not charged in full");
  Touch(p, 0, 48);
  usleep(300000);
  Show("touched 48 MiB");
  Check(Mapped() == 64 * MIB, "touch", "charge changed");
  (void)madvise(p, 32 * MIB, MADV_DONTNEED);
  Show("DONTNEED first 32 MiB");
  Check(Mapped() == 64 * MIB, "dontneed", "charge changed");
  (void)munmap(p, 64 * MIB);
  Show("munmap all");
  Check(Mapped() == 0, "munmap", "charge left after munmap");
  return 0;
}

static int Limit(void) {
  char* p = mmap(NULL, 64 * MIB, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  Check(p != MAP_FAILED, "mmap", "64 MiB refused below the limit");
  if (p == MAP_FAILED) return 1;
  (void)madvise(p, 64 * MIB, MADV_NOHUGEPAGE);
  Touch(p, 0, 48);
  Check(WaitMapped(48, 50), "touch 48", "growth past max not charged");
  Show("touched 48 MiB (max 32)");
  void* q = mmap(NULL, MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                 -1, 0);
  Check(q == MAP_FAILED && errno == ENOMEM, "mmap over max",
        "a new mapping was not refused");
  void* b = malloc(MIB);
  Check(b == NULL, "malloc over max", "a heap block was not refused");
  free(b);
  (void)madvise(p, 48 * MIB, MADV_DONTNEED);
  Show("DONTNEED 48 MiB");
  q = mmap(NULL, MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
           0);
  Check(q != MAP_FAILED, "mmap after release", "still refused");
  b = malloc(MIB);
  Check(b != NULL, "malloc after release", "still refused");
  free(b);
  if (q != MAP_FAILED) (void)munmap(q, MIB);
  (void)munmap(p, 64 * MIB);
  return 0;
}

// The charge slow path's check (resident, UMEMCG_ENFORCE=1, UMEMCG_MAX=32M
// and a scanner period longer than the run): pages released behind the
// hooks' back (a raw madvise system call) give their charge back when a
// heap charge is refused, and the charge then succeeds.
static int SlowPath(void) {
  umemcg_preload_sync_fn sync =
      (umemcg_preload_sync_fn)dlsym(RTLD_DEFAULT, "umemcg_preload_sync");
  char* p = mmap(NULL, 64 * MIB, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED || sync == NULL) return 1;
  (void)madvise(p, 64 * MIB, MADV_NOHUGEPAGE);
  Touch(p, 0, 48);
  sync();  // counts the pages now (the scanner will not run)
  Show("touched 48 MiB, synced");
  Check(Mapped() >= 48 * MIB, "sync", "touched pages not counted");
  void* b = malloc(MIB);
  Check(b == NULL, "malloc over max", "a heap block was not refused");
  free(b);
  (void)syscall(SYS_madvise, p, 48 * MIB, MADV_DONTNEED);
  b = malloc(MIB);
  Show("raw DONTNEED, malloc");
  Check(b != NULL, "malloc after raw release",
        "refused: released pages kept their charge");
  Check(Mapped() < 2 * MIB, "malloc after raw release",
        "released pages still charged");
  free(b);
  (void)munmap(p, 64 * MIB);
  return 0;
}

int main(int argc, char** argv) {
  get_stats = (umemcg_preload_get_stats_fn)dlsym(RTLD_DEFAULT,
                                                 "umemcg_preload_get_stats");
  read_file = (umemcg_preload_read_file_fn)dlsym(RTLD_DEFAULT,
                                                 "umemcg_preload_read_file");
  if (argc != 2 || get_stats == NULL || read_file == NULL) {
    fprintf(stderr,
            "usage: resident_prog resident|at-mmap|limit|slowpath, "
            "under libumemcg-preload.so\n");
    return 2;
  }
  int r = 2;
  if (strcmp(argv[1], "resident") == 0) r = Resident();
  if (strcmp(argv[1], "at-mmap") == 0) r = AtMmap();
  if (strcmp(argv[1], "limit") == 0) r = Limit();
  if (strcmp(argv[1], "slowpath") == 0) r = SlowPath();
  if (r != 0) return r;
  printf("%s: %d failures\n", argv[1], failures);
  return failures == 0 ? 0 : 1;
}

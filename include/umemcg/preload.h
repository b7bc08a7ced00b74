/* Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
 *
 * libumemcg-preload.so: account (and optionally limit) the memory of an
 * unmodified program by LD_PRELOAD. It interposes malloc, calloc, realloc,
 * reallocarray, free, aligned_alloc, posix_memalign, memalign, valloc,
 * pvalloc, malloc_usable_size, mallopt and every operator new / delete
 * (plain, array, sized, aligned, nothrow) on top of glibc's allocator
 * (__libc_malloc and friends: no dlsym on the allocation path), and mmap,
 * mmap64, munmap, mremap, mprotect, pkey_mprotect, brk and sbrk for private
 * anonymous mappings. docs/preload.md has the design and the numbers.
 *
 *   UMEMCG_MAX=512M UMEMCG_ENFORCE=1 UMEMCG_REPORT=stderr \
 *     LD_PRELOAD=build/release/lib/libumemcg-preload.so  sort big.txt
 *
 * Groups. The library makes its own Controller with one group, "process",
 * under the root; each thread's blocks and mappings are charged to the
 * group it was assigned with umemcg_preload_set_group() (a path below
 * "process") or moved to through the mount's cgroup.threads /
 * cgroup.procs (UMEMCG_MOUNT, docs/preload.md), by default to "process"
 * itself. UMEMCG_MAX is memory.max of
 * "process", so it bounds the whole program. Blocks allocated before the
 * library finished initialising, and the library's own allocations, are
 * charged to nothing ("unaccounted" below).
 *
 * Blocks. Every block gets a 16-byte header in front of it recording the
 * owner objcg and a check word mixing a per-process secret (AT_RANDOM) with
 * the block's address and owner; the bytes charged are glibc's chunk (the
 * heap bytes the block takes, header included). free() on any thread
 * uncharges the recorded owner; after the owner's group was removed, its
 * parent (kernel objcg reparenting). A pointer whose check word does not
 * match (from before the preload, from __libc_malloc, from another
 * allocator) is passed to glibc unchanged; only the 16 bytes before an
 * aligned pointer are read, which glibc's own free() reads too. Sizes,
 * alignment rules (per glibc version), errno and the diagnostics of invalid
 * and double frees are glibc's; malloc_usable_size() is never smaller than
 * glibc's. Documented limit: a foreign pointer whose 16 preceding bytes
 * equal a valid check word by chance is taken as ours (probability 2^-64
 * per free for data the program does not derive from the secret).
 *
 * jemalloc mode (UMEMCG_HEAP=jemalloc, with libjemalloc.so.2 preloaded
 * behind this library: LD_PRELOAD="libumemcg-preload.so libjemalloc.so.2").
 * No header: every block comes from jemalloc, from an arena per group
 * (libumemcg-jemalloc's, include/umemcg/jemalloc.h) charged page by page
 * as "anon" for the pages it commits. Decided by the first allocation
 * call, so all blocks of a process are of one kind; without jemalloc
 * loaded, a warning and the header mode. jemalloc stays optional: the
 * library references its functions weakly. Usable sizes are jemalloc's;
 * UMEMCG_PROFILE and the per-block report figures are header-mode only.
 *
 * Mappings. Private anonymous memory is charged as vm.overcommit_memory=2
 * commits it, in pages ("anon" in memory.stat): a writable mapping when it
 * is made, a PROT_NONE or read-only one when mprotect makes it writable;
 * unmapping (munmap, MAP_FIXED over it, mremap shrinking or moving it)
 * uncharges exactly. File-backed and shared mappings are not charged.
 *
 * Environment (read once, at load):
 *   UMEMCG_MAX=<size|max>     memory.max of "process" (kernel syntax: 512M)
 *   UMEMCG_HIGH=<size|max>    memory.high of "process" (events only; the
 *                             preload never sleeps inside malloc)
 *   UMEMCG_ENFORCE=1          over memory.max, malloc & co return NULL with
 *                             errno ENOMEM, operator new throws
 *                             std::bad_alloc (nothrow new returns NULL),
 *                             mmap/mremap/mprotect/sbrk fail with ENOMEM;
 *                             without it charges are forced past max and
 *                             only counted (memory.events "max").
 *   UMEMCG_REPORT=stderr|<path>  at exit, one line of accounting figures
 *                             (umemcg_preload_report) to stderr (even if
 *                             the program closed it at exit) or <path>.
 *   UMEMCG_GROUP=<name>       the group's name instead of "process".
 *   UMEMCG_HEAP=header|jemalloc  the heap mode (default header; above).
 *   UMEMCG_MOUNT=<dir>        mount the group tree as files (FUSE), and
 *   UMEMCG_METRICS=<ip:port>  serve Prometheus metrics: both load the
 *                             operations module libumemcg-preload-ops.so
 *                             (next to this library, or UMEMCG_PRELOAD_OPS)
 *                             and are taken out of the environment, so
 *                             children do not act on them; a setting that
 *                             cannot take effect is reported with its cause.
 *
 * Programs find the functions below with dlsym(RTLD_DEFAULT, name), so they
 * run unchanged without the preload. Conventions as in umemcg/c.h: 0 or a
 * positive errno; ENODEV when the preload is not initialised.
 *
 * Thread safety: every function may be called from any thread. None may be
 * called from inside malloc (the preload's own hooks never do).
 */

#ifndef UMEMCG_PRELOAD_H_
#define UMEMCG_PRELOAD_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Charges the calling thread's future blocks to group `path` below
 * "process" ("tenant-a", "tenants/a"), creating missing groups. NULL or ""
 * returns the thread to "process". Blocks keep the owner they were
 * allocated with. A move of the thread through cgroup.threads or
 * cgroup.procs does the same: the later of the two wins (this call drops a
 * move the thread has not picked up yet, and a move written after it
 * applies from the thread's next allocation). EINVAL: bad path; ENOSPC: more
 * than 256 groups were assigned over the process's life (each assigned group's
 * objcg stays pinned for the process's lifetime, so frees never outlive their
 * owner). */
int umemcg_preload_set_group(const char* path);
typedef int (*umemcg_preload_set_group_fn)(const char* path);

/* Removes group `path` below "process" (kernel: rmdir). Its blocks stay
 * charged to it until freed; from now on it is its parent that they and
 * the threads still assigned to it charge (objcg reparenting). EBUSY: it
 * has child groups; ENOENT: no such group. */
int umemcg_preload_remove_group(const char* path);
typedef int (*umemcg_preload_remove_group_fn)(const char* path);

/* Figures as the interposer counts them. Exact when no thread allocates or
 * frees concurrently. Bytes of blocks are glibc chunk bytes. */
typedef struct umemcg_preload_stats {
  int64_t live_bytes;        /* bytes charged for live blocks */
  int64_t live_blocks;       /* live blocks charged to a group */
  int64_t unaccounted_bytes; /* live blocks charged to nothing */
  uint64_t charge_failures;  /* allocations refused (UMEMCG_ENFORCE) */
  uint64_t foreign_frees;    /* free/realloc of pointers not ours */
  int enforce;               /* UMEMCG_ENFORCE in effect */
  int64_t mapped_bytes;      /* anonymous mappings charged now */
  int64_t reserved_bytes;    /* tracked mappings not charged (PROT_NONE) */
  int64_t mapped_ranges;     /* entries of the mapping table */
} umemcg_preload_stats_t;
int umemcg_preload_get_stats(umemcg_preload_stats_t* out);
typedef int (*umemcg_preload_get_stats_fn)(umemcg_preload_stats_t* out);

/* Reads memory file `file` ("memory.current", "memory.stat", ...) of the
 * group `group` below "process" (NULL or "" = "process" itself) into `buf`
 * (NUL-terminated, truncated to `len`); *out_len (may be NULL) gets the
 * full length. */
int umemcg_preload_read_file(const char* group, const char* file, char* buf,
                             size_t len, size_t* out_len);
typedef int (*umemcg_preload_read_file_fn)(const char*, const char*, char*,
                                           size_t, size_t*);
/* Writes `text` to memory file `file` of `group` (as above). */
int umemcg_preload_write_file(const char* group, const char* file,
                              const char* text);
typedef int (*umemcg_preload_write_file_fn)(const char*, const char*,
                                            const char*);

/* Drains every per-CPU stock of the preload's controller (pages and
 * object bytes with their cached statistic deltas) and flushes the
 * statistics, so memory.current and memory.stat read next are exact at
 * quiescence. With UMEMCG_MAP_CHARGE=resident it first counts the
 * mappings' resident pages again (the report does too). */
int umemcg_preload_sync(void);
typedef int (*umemcg_preload_sync_fn)(void);

/* Drains the stocks and writes one line to `fd`:
 *   umemcg-preload: pid=N live_bytes=N accounted_bytes=N live_blocks=N
 *   unaccounted_bytes=N mapped_bytes=N anon_bytes=N reserved_bytes=N
 *   usage_pages=N peak_pages=N max_events=N charge_failures=N
 *   foreign_frees=N
 * accounted_bytes is the object-accounted byte statistic of "process"
 * (memory.stat slab_unreclaimable, hierarchical): it equals live_bytes at
 * quiescence; anon_bytes (memory.stat anon) equals mapped_bytes likewise.
 * peak_pages is memory.peak of "process". In jemalloc mode the per-block
 * figures are 0 and the line ends with heap=jemalloc heap_charged_bytes=N
 * heap_active_bytes=N heap_dirty_bytes=N heap_unaccounted_bytes=N (the
 * "process" arena's charged, active and dirty pages, and jemalloc's
 * automatic arenas, charged to nothing). With UMEMCG_MAP_CHARGE=resident
 * it ends with map_charge=resident resident_forced=N (mapped_bytes are
 * then the mappings' resident pages as last counted; resident_forced
 * counts recounts whose growth was charged past a refused charge). */
int umemcg_preload_report(int fd);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* UMEMCG_PRELOAD_H_ */

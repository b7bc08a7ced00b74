/* Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
 *
 * The umemcg C API: plain C99 (also valid C++), for C, Rust, Go, Python
 * (ctypes/cffi) and anything with an FFI. Conventions:
 *
 *  (1) Every function returns int: 0 on success or a positive errno value
 *      (EINVAL bad argument or syntax, EBADF a stale or released handle,
 *      ENOENT no such group or file, EEXIST, EBUSY, ENODEV removed group,
 *      ENOMEM charge refused, EAGAIN, EACCES, ERANGE). umemcg_strerror()
 *      describes a code.
 *  (2) Results come back through trailing out-parameters, written only on
 *      success. Pointer arguments must be non-NULL unless documented as
 *      "may be NULL"; a NULL where one is required returns EINVAL.
 *  (3) Handles (umemcg_controller_t*, umemcg_group_t*, umemcg_objcg_t*,
 *      umemcg_reclaimer_t*, umemcg_file_t*)
 *      are opaque tokens, not pointers to memory: using one after it was
 *      released (or after its controller was destroyed) returns EBADF and
 *      is never a use-after-free. Each handle returned must be released
 *      exactly once with the matching *_release / *_destroy call.
 *  (4) Strings are NUL-terminated UTF-8. Names are at most 255 bytes.
 *      umemcg_file_write takes bytes and a length, as write(2) does.
 *  (5) Every function may be called from any thread. Callbacks (reclaimer,
 *      OOM, events) run on the thread that triggered them, except those of
 *      the memory.high reclaim after charges that may not block: with
 *      UMEMCG_HIGH_WORK_THREAD (the default) they run on the controller's
 *      worker thread, with UMEMCG_HIGH_WORK_MANUAL on the thread calling
 *      umemcg_run_high_work.
 *
 * Sizes are pages (4096 bytes) unless a name says bytes.
 */

#ifndef UMEMCG_C_H_
#define UMEMCG_C_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define UMEMCG_C_EXPORT __attribute__((visibility("default")))
#else
#define UMEMCG_C_EXPORT
#endif

typedef struct umemcg_controller umemcg_controller_t;
typedef struct umemcg_group umemcg_group_t;
typedef struct umemcg_reclaimer umemcg_reclaimer_t;
typedef struct umemcg_objcg umemcg_objcg_t;
typedef struct umemcg_file umemcg_file_t;

/* ---- Controller ---- */

/* CPU sources (see umemcg/cpu.h). */
enum {
  UMEMCG_CPU_AUTO = 0,
  UMEMCG_CPU_RSEQ,
  UMEMCG_CPU_GETCPU,
  UMEMCG_CPU_FAKE
};

typedef struct umemcg_options {
  int batch;                     /* 1..4096, default 64 */
  int stock_slots;               /* 1..16, default 7 */
  int cpu_source;                /* UMEMCG_CPU_*, default AUTO */
  int nr_cpus;                   /* 0 = possible CPUs */
  int recursive_protection;      /* 0/1 */
  int local_events;              /* 0/1 */
  int obj_stock_slots;           /* 1..16, default 5 */
  int64_t stats_flush_period_ms; /* periodic stats flusher; 0 = none, 2000 */
  int high_work;                 /* UMEMCG_HIGH_WORK_*, default THREAD */
  /* 0/1, default 1: each group's own memory charged to its parent, as
   * "percpu" (ControllerOptions::charge_group_metadata) */
  int charge_group_metadata;
} umemcg_options_t;

/* Who reclaims for memory.high after charges that may not block leave a
 * group over it (see HighWorkMode in umemcg/controller.h): a worker thread
 * of the controller, the application (umemcg_run_high_work), or nobody. */
enum {
  UMEMCG_HIGH_WORK_THREAD = 0,
  UMEMCG_HIGH_WORK_MANUAL,
  UMEMCG_HIGH_WORK_NONE
};

/* Fills *options with the defaults. */
UMEMCG_C_EXPORT void umemcg_options_init(umemcg_options_t* options);
/* options may be NULL (defaults). */
UMEMCG_C_EXPORT int umemcg_controller_create(const umemcg_options_t* options,
                                             umemcg_controller_t** out);
/* Releases every group and reclaimer handle of the controller (they then
 * return EBADF), waits for calls in flight on them, and frees it. */
UMEMCG_C_EXPORT int umemcg_controller_destroy(umemcg_controller_t* ctrl);
/* Runs the queued memory.high work on the calling thread; *ran (may be
 * NULL) receives the number of groups it ran for. */
UMEMCG_C_EXPORT int umemcg_run_high_work(umemcg_controller_t* ctrl,
                                         size_t* ran);

/* ---- Groups ---- */

/* A new handle to the root group. */
UMEMCG_C_EXPORT int umemcg_group_root(umemcg_controller_t* ctrl,
                                      umemcg_group_t** out);
UMEMCG_C_EXPORT int umemcg_group_create(umemcg_group_t* parent,
                                        const char* name, umemcg_group_t** out);
/* "a/b/c" from the root ("" is the root). */
UMEMCG_C_EXPORT int umemcg_group_lookup(umemcg_controller_t* ctrl,
                                        const char* path, umemcg_group_t** out);
/* Takes the group offline (EBUSY with children); the handle stays valid. */
UMEMCG_C_EXPORT int umemcg_group_remove(umemcg_group_t* group);
UMEMCG_C_EXPORT int umemcg_group_release(umemcg_group_t* group);
/* The group's path, as umemcg_read_file returns text. */
UMEMCG_C_EXPORT int umemcg_group_path(umemcg_group_t* group, char* buf,
                                      size_t len, size_t* needed);

/* ---- Charging ---- */

enum {
  UMEMCG_CHARGE_MAY_RECLAIM = 1u << 0,
  UMEMCG_CHARGE_NO_RETRY = 1u << 1,
  UMEMCG_CHARGE_RETRY_MAYFAIL = 1u << 2,
  UMEMCG_CHARGE_NOFAIL = 1u << 3,
  UMEMCG_CHARGE_HIGH = 1u << 4,
  UMEMCG_CHARGE_NO_THROTTLE = 1u << 5,
};

/* ENOMEM when the charge does not fit; then, if refused_by is not NULL, it
 * receives a new handle to the refusing group. */
UMEMCG_C_EXPORT int umemcg_try_charge(umemcg_group_t* group, uint64_t nr_pages,
                                      uint32_t flags,
                                      umemcg_group_t** refused_by);
/* Through this CPU's stock (socket/kmem style). */
UMEMCG_C_EXPORT int umemcg_uncharge(umemcg_group_t* group, uint64_t nr_pages);
/* Straight to the counters (folio style). */
UMEMCG_C_EXPORT int umemcg_uncharge_direct(umemcg_group_t* group,
                                           uint64_t nr_pages);
/* Returns the subtree's pages cached in every CPU's stock. */
UMEMCG_C_EXPORT int umemcg_drain_all(umemcg_group_t* subtree);

/* ---- Object (byte) accounting ---- */

/* A new handle to the group's objcg (what accounted objects keep: after
 * the group is removed its objcg charges the nearest live ancestor).
 * ENODEV once the group was removed. */
UMEMCG_C_EXPORT int umemcg_objcg_get(umemcg_group_t* group,
                                     umemcg_objcg_t** out);
UMEMCG_C_EXPORT int umemcg_objcg_put(umemcg_objcg_t* objcg);
/* Charges `bytes` and adds them to the byte statistic `item` ("slab_
 * unreclaimable" when NULL, or "slab_reclaimable"); flags as for
 * umemcg_try_charge. ENOMEM when it does not fit. */
UMEMCG_C_EXPORT int umemcg_obj_charge(umemcg_objcg_t* objcg, uint64_t bytes,
                                      uint32_t flags, const char* item);
UMEMCG_C_EXPORT int umemcg_obj_uncharge(umemcg_objcg_t* objcg, uint64_t bytes,
                                        const char* item);

/* ---- Statistics ---- */

/* Built-in statistic items in memory.stat order, generated from
 * stat_items.def (UMEMCG_STAT_ANON, UMEMCG_STAT_SLAB_RECLAIMABLE, ...). */
enum umemcg_stat_item {
#define UMEMCG_STAT_ITEM(name, key, unit, c_name) UMEMCG_STAT_##c_name,
#include "umemcg/stat_items.def"
#undef UMEMCG_STAT_ITEM
  UMEMCG_STAT_NR_BUILTIN
};

/* item: a memory.stat key ("anon", "slab_reclaimable", "pgfault", ...);
 * delta in the item's unit (pages, bytes or events). */
UMEMCG_C_EXPORT int umemcg_mod_state(umemcg_group_t* group, const char* item,
                                     int64_t delta);
/* The same by constant (UMEMCG_STAT_*); EINVAL for anything else. */
UMEMCG_C_EXPORT int umemcg_mod_state_item(umemcg_group_t* group, int item,
                                          int64_t delta);
UMEMCG_C_EXPORT int umemcg_count_event(umemcg_group_t* group, const char* item,
                                       uint64_t count);
/* Brings the group's statistics up to date (exact afterwards). */
UMEMCG_C_EXPORT int umemcg_flush(umemcg_group_t* group);

/* ---- Files (cgroup-v2 memory.* semantics, see umemcg/files.h) ---- */

/* Copies the file's text and a NUL into buf when it fits (len includes
 * the NUL) and returns 0; else returns ERANGE. *needed (may be NULL)
 * receives the size the text needs, NUL included, either way. */
UMEMCG_C_EXPORT int umemcg_read_file(umemcg_group_t* group, const char* name,
                                     char* buf, size_t len, size_t* needed);
UMEMCG_C_EXPORT int umemcg_write_file(umemcg_group_t* group, const char* name,
                                      const char* text);

/* ---- Threads (cgroup.threads / cgroup.procs, see umemcg/active.h) ---- */

/* Makes the calling thread known by its TID (gettid) to the cgroup.threads
 * and cgroup.procs files of every controller, without giving it a group
 * (RegisterThread in umemcg/active.h); idempotent, returns 0. It stays known
 * until it exits. Until then a TID written to a group's cgroup.threads
 * (umemcg_write_file) is ESRCH; afterwards the write moves the thread: its
 * allocations through the C++ active-group API charge that group from its
 * next lookup on. A thread without a group is listed in the root's
 * cgroup.threads (of every controller until it is moved into one). */
UMEMCG_C_EXPORT int umemcg_register_thread(void);

/* ---- Heap profiles (see umemcg/heap_profile.h) ---- */

/* Sets the group's heap sampling interval in bytes (0: off; it applies to
 * the descendants without their own). */
UMEMCG_C_EXPORT int umemcg_set_heap_profile_rate(umemcg_group_t* group,
                                                 uint64_t bytes);
/* Process-wide: whether page charges (umemcg_try_charge, umemcg_uncharge,
 * umemcg_uncharge_direct) feed the heap profiler (default off; see
 * SetHeapProfilePageCharges in umemcg/heap_profile.h). */
UMEMCG_C_EXPORT void umemcg_set_heap_profile_page_charges(int on);
/* Copies the group's heap profile (subtree != 0: with its descendants) as
 * the installed encoder writes it (libumemcg-profile's
 * InstallHeapProfileFiles: a gzipped pprof file) into buf when it fits
 * and returns 0; else ERANGE. No NUL is added. *needed (may be NULL)
 * receives the size either way; each call encodes afresh, so the size may
 * change between calls (retry on ERANGE). ENOTSUP when no encoder is
 * installed. */
UMEMCG_C_EXPORT int umemcg_heap_profile(umemcg_group_t* group, int subtree,
                                        void* buf, size_t len, size_t* needed);

/* Open files: what an open file descriptor is to a cgroup file, for what
 * is per handle (a memory.peak write resets the peak seen through that
 * handle only). A handle is used by one call at a time (calls on it from
 * several threads are serialized). A fork() while another thread is inside
 * a call on a handle leaves that handle busy in the child: the child must
 * not use it (other handles, and every other function, work there). */
enum { UMEMCG_WRITE_NONBLOCK = 1u << 0 }; /* the O_NONBLOCK of a write */

/* ENOENT unknown file (or absent on the root), ENODEV removed group. */
UMEMCG_C_EXPORT int umemcg_file_open(umemcg_group_t* group, const char* name,
                                     umemcg_file_t** out);
/* As umemcg_read_file; EACCES on a write-only file. */
UMEMCG_C_EXPORT int umemcg_file_read(umemcg_file_t* file, char* buf, size_t len,
                                     size_t* needed);
/* One write(2) of `len` bytes (buf may be NULL when len is 0): as in the
 * kernel, the value ends at the first NUL ("reset\n\0" is "reset\n") and a
 * zero-length write does nothing. flags: 0 or UMEMCG_WRITE_NONBLOCK
 * (memory.max / memory.high then only set the limit, memory.reclaim is
 * EAGAIN). 0 means all `len` bytes were taken. */
UMEMCG_C_EXPORT int umemcg_file_write(umemcg_file_t* file, const void* buf,
                                      size_t len, uint32_t flags);
UMEMCG_C_EXPORT int umemcg_file_close(umemcg_file_t* file);
/* memory.pressure: a write of "some|full <threshold_us> <window_us>" arms a
 * trigger on the handle (EINVAL malformed or out of range, EBUSY when one
 * is armed) until it is closed. This sets *fired to 1 if the trigger fired
 * since the last call (clearing it; poll(2)'s POLLPRI), else 0. EINVAL
 * when no trigger is armed on the handle. */
UMEMCG_C_EXPORT int umemcg_file_pressure_event(umemcg_file_t* file, int* fired);

/* ---- Callbacks ---- */

typedef struct umemcg_reclaimer_ops {
  /* Pages the reclaimer could free now. */
  uint64_t (*reclaimable)(void* ctx);
  /* Free up to target pages (uncharging them); return pages freed. Must
   * not create or remove groups or change reclaimers. */
  uint64_t (*reclaim)(void* ctx, uint64_t target);
} umemcg_reclaimer_ops_t;

/* ops is copied; ctx must stay valid until umemcg_reclaimer_release
 * returns (afterwards the callbacks are not running and never will). */
UMEMCG_C_EXPORT int umemcg_reclaimer_add(umemcg_group_t* group,
                                         const umemcg_reclaimer_ops_t* ops,
                                         void* ctx, umemcg_reclaimer_t** out);
UMEMCG_C_EXPORT int umemcg_reclaimer_release(umemcg_reclaimer_t* reclaimer);

/* Called when a charge cannot fit after reclaim. over_limit and
 * kill_group (may be NULL) are borrowed handles valid during the call.
 * Return nonzero if memory was released; *killed (may be left NULL) names
 * the group whose memory was released: one killed task there (an oom_kill
 * event in its memory.events, hierarchically). The handle only has to be
 * valid when the handler returns; the group is held from then on, even if
 * the handle is released or the group removed right after. More victims
 * (an oom.group sweep, several tasks): umemcg_oom_report_kill. With a
 * nonzero return, each memory.oom.group subtree holding a victim gets one
 * oom_group_kill event. */
typedef int (*umemcg_oom_fn)(void* ctx, umemcg_group_t* over_limit,
                             umemcg_group_t* kill_group, uint64_t nr_pages,
                             umemcg_group_t** killed);
/* From inside an OOM handler, on its thread: reports `tasks` (> 0) killed
 * tasks in `victim` (oom_kill += tasks there, hierarchically), e.g. each
 * member of an oom.group sweep. May be called many times; adds to
 * *killed. EINVAL outside a handler or with tasks 0. */
UMEMCG_C_EXPORT int umemcg_oom_report_kill(umemcg_group_t* victim,
                                           uint64_t tasks);
/* Per controller; fn NULL removes it. ctx must outlive the registration. */
UMEMCG_C_EXPORT int umemcg_set_oom_handler(umemcg_controller_t* ctrl,
                                           umemcg_oom_fn fn, void* ctx);
/* Per group override for its subtree; fn NULL restores the default. */
UMEMCG_C_EXPORT int umemcg_group_set_oom_handler(umemcg_group_t* group,
                                                 umemcg_oom_fn fn, void* ctx);

/* event: a memory.events key ("max", "oom", ...); local: 1 for the
 * .local count of the group the event was raised on. group is borrowed. */
typedef void (*umemcg_event_fn)(void* ctx, umemcg_group_t* group,
                                const char* event, int local);
UMEMCG_C_EXPORT int umemcg_set_event_callback(umemcg_group_t* group,
                                              umemcg_event_fn fn, void* ctx);

/* ---- Errors ---- */

/* A static description of an errno value returned by this API. */
UMEMCG_C_EXPORT const char* umemcg_strerror(int err);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* UMEMCG_C_H_ */

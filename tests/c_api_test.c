/* Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
 *
 * The C API, tested in C (compiled as C99): every function, its success
 * path and its error paths, including stale and released handles. */

#define _GNU_SOURCE /* nanosleep, syscall */

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "umemcg/umemcg.h"

static int passed = 0;
static int failed = 0;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (cond) {                                                                \
      ++passed;                                                                \
    } else {                                                                   \
      ++failed;                                                                \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                          \
  } while (0)

#define CHECK_ERR(expr, err)                                                 \
  do {                                                                       \
    int got_ = (expr);                                                       \
    if (got_ == (err)) {                                                     \
      ++passed;                                                              \
    } else {                                                                 \
      ++failed;                                                              \
      fprintf(stderr, "%s:%d: %s returned %d (%s), expected %d\n", __FILE__, \
              __LINE__, #expr, got_, umemcg_strerror(got_), (err));          \
    }                                                                        \
  } while (0)

static int read_text(umemcg_group_t* g, const char* file, char* buf,
                     size_t len) {
  size_t needed = 0;
  return umemcg_read_file(g, file, buf, len, &needed);
}

/* A reclaimer holding `held` pages of `group`. */
struct cache {
  umemcg_group_t* group;
  uint64_t held;
  int calls;
};

static uint64_t cache_reclaimable(void* ctx) {
  return ((struct cache*)ctx)->held;
}

static uint64_t cache_reclaim(void* ctx, uint64_t target) {
  struct cache* c = (struct cache*)ctx;
  uint64_t n = target < c->held ? target : c->held;
  c->held -= n;
  c->calls++;
  umemcg_uncharge_direct(c->group, n);
  return n;
}

struct oom_state {
  int calls;
  umemcg_group_t* victim;
};

static int on_oom(void* ctx, umemcg_group_t* over_limit,
                  umemcg_group_t* kill_group, uint64_t nr_pages,
                  umemcg_group_t** killed) {
  struct oom_state* s = (struct oom_state*)ctx;
  (void)kill_group;
  (void)nr_pages;
  s->calls++;
  if (s->victim == NULL) return 0;
  umemcg_uncharge_direct(s->victim, 4);
  *killed = over_limit;
  return 1;
}

static int events_seen = 0;
static void on_event(void* ctx, umemcg_group_t* group, const char* event,
                     int local) {
  (void)ctx;
  (void)group;
  (void)local;
  if (strcmp(event, "max") == 0) events_seen++;
}

static void test_controller(void) {
  umemcg_options_t o;
  umemcg_controller_t* ctrl = NULL;
  umemcg_options_init(&o);
  CHECK(o.batch == 64 && o.stock_slots == 7 && o.obj_stock_slots == 5);
  CHECK(o.stats_flush_period_ms == 2000);
  o.stats_flush_period_ms = -1;
  CHECK_ERR(umemcg_controller_create(&o, &ctrl), EINVAL);
  o.stats_flush_period_ms = 2000;
  o.obj_stock_slots = 0;
  CHECK_ERR(umemcg_controller_create(&o, &ctrl), EINVAL);
  o.obj_stock_slots = 5;
  CHECK_ERR(umemcg_controller_create(&o, NULL), EINVAL);
  o.batch = 5000; /* 1..4096 */
  CHECK_ERR(umemcg_controller_create(&o, &ctrl), EINVAL);
  o.batch = 64;
  o.cpu_source = 99;
  CHECK_ERR(umemcg_controller_create(&o, &ctrl), EINVAL);
  CHECK_ERR(umemcg_controller_create(NULL, &ctrl), 0);
  CHECK_ERR(umemcg_controller_destroy(ctrl), 0);
  CHECK_ERR(umemcg_controller_destroy(ctrl), EBADF); /* released */
  CHECK_ERR(umemcg_controller_destroy(NULL), EINVAL);
  CHECK_ERR(umemcg_controller_destroy((umemcg_controller_t*)(uintptr_t)12345),
            EBADF); /* never valid */
}

static void test_groups_and_charges(void) {
  umemcg_options_t o;
  umemcg_controller_t* ctrl = NULL;
  umemcg_group_t *root = NULL, *a = NULL, *b = NULL, *found = NULL,
                 *refused = NULL;
  char buf[4096];
  size_t needed = 0;
  umemcg_options_init(&o);
  CHECK(o.charge_group_metadata == 1);
  o.cpu_source = UMEMCG_CPU_FAKE;
  o.nr_cpus = 2;
  o.charge_group_metadata = 0; /* exact page counts below */
  CHECK_ERR(umemcg_controller_create(&o, &ctrl), 0);
  CHECK_ERR(umemcg_group_root(ctrl, &root), 0);
  CHECK_ERR(umemcg_group_root(NULL, &root), EINVAL);
  CHECK_ERR(umemcg_group_create(root, "a", &a), 0);
  CHECK_ERR(umemcg_group_create(a, "b", &b), 0);
  CHECK_ERR(umemcg_group_create(root, "a", &found), EEXIST);
  CHECK_ERR(umemcg_group_create(root, "x/y", &found), EINVAL);
  CHECK_ERR(umemcg_group_create(root, "", &found), EINVAL);
  CHECK_ERR(umemcg_group_create(root, NULL, &found), EINVAL);
  CHECK_ERR(umemcg_group_create(NULL, "c", &found), EINVAL);
  memset(buf, 'n', 300);
  buf[300] = '\0';
  CHECK_ERR(umemcg_group_create(root, buf, &found), ENAMETOOLONG);
  buf[256] = '\0';
  CHECK_ERR(umemcg_group_create(root, buf, &found), ENAMETOOLONG);
  buf[255] = '\0'; /* NAME_MAX itself is fine */
  CHECK_ERR(umemcg_group_create(root, buf, &found), 0);
  CHECK_ERR(umemcg_group_release(found), 0);
  CHECK_ERR(umemcg_group_create(root, ".", &found), EINVAL);
  CHECK_ERR(umemcg_group_create(root, "..", &found), EINVAL);
  CHECK_ERR(umemcg_group_create(root, "x\ny", &found), EINVAL);
  CHECK_ERR(umemcg_group_create(a, "memory.max", &found), EEXIST);
  CHECK_ERR(umemcg_group_create(a, "cgroup.subtree_control", &found), EEXIST);
  CHECK(strcmp(umemcg_strerror(ENAMETOOLONG), "unknown error") != 0);
  CHECK(strcmp(umemcg_strerror(E2BIG), "unknown error") != 0);
  CHECK_ERR(umemcg_group_lookup(ctrl, "a/b", &found), 0);
  CHECK_ERR(umemcg_group_path(found, buf, sizeof(buf), &needed), 0);
  CHECK(strcmp(buf, "a/b") == 0 && needed == 4);
  CHECK_ERR(umemcg_group_path(found, buf, 2, &needed), ERANGE);
  CHECK(needed == 4);
  CHECK_ERR(umemcg_group_release(found), 0);
  CHECK_ERR(umemcg_group_release(found), EBADF);
  CHECK_ERR(umemcg_group_path(found, buf, sizeof(buf), NULL), EBADF);
  CHECK_ERR(umemcg_group_lookup(ctrl, "a/zz", &found), ENOENT);
  CHECK_ERR(umemcg_group_lookup(ctrl, NULL, &found), EINVAL);

  /* Limits through files, charges, refusals. */
  CHECK_ERR(umemcg_write_file(a, "memory.max", "64K"), 0);
  CHECK_ERR(umemcg_try_charge(b, 16, 0, &refused), 0);
  CHECK_ERR(umemcg_try_charge(b, 1, 0, &refused), ENOMEM);
  CHECK_ERR(umemcg_group_path(refused, buf, sizeof(buf), NULL), 0);
  CHECK(strcmp(buf, "a") == 0);
  CHECK_ERR(umemcg_group_release(refused), 0);
  CHECK_ERR(umemcg_try_charge(b, 1, UMEMCG_CHARGE_HIGH, NULL), 0); /* forced */
  CHECK_ERR(umemcg_try_charge(b, 1, 1u << 9, NULL), EINVAL);
  CHECK_ERR(umemcg_try_charge(NULL, 1, 0, NULL), EINVAL);
  CHECK_ERR(read_text(a, "memory.current", buf, sizeof(buf)), 0);
  CHECK(strcmp(buf, "69632\n") == 0);
  CHECK_ERR(umemcg_uncharge(b, 1), 0);
  CHECK_ERR(umemcg_uncharge_direct(b, 16), 0);
  CHECK_ERR(umemcg_uncharge(b, UINT64_MAX), EINVAL);
  CHECK_ERR(umemcg_uncharge_direct(NULL, 1), EINVAL);
  CHECK_ERR(umemcg_drain_all(root), 0);
  CHECK_ERR(umemcg_drain_all(NULL), EINVAL);
  CHECK_ERR(read_text(a, "memory.current", buf, sizeof(buf)), 0);
  CHECK(strcmp(buf, "0\n") == 0);

  /* Files: read sizes, errors. */
  CHECK_ERR(umemcg_read_file(a, "memory.max", buf, 3, &needed), ERANGE);
  CHECK(needed == strlen("65536\n") + 1);
  CHECK_ERR(umemcg_read_file(a, "memory.max", NULL, 0, &needed), ERANGE);
  CHECK_ERR(umemcg_read_file(a, "memory.max", buf, needed, NULL), 0);
  CHECK(strcmp(buf, "65536\n") == 0);
  CHECK_ERR(umemcg_read_file(a, "memory.nope", buf, sizeof(buf), NULL), ENOENT);
  CHECK_ERR(umemcg_read_file(root, "memory.current", buf, sizeof(buf), NULL),
            ENOENT);
  CHECK_ERR(umemcg_read_file(a, NULL, buf, sizeof(buf), NULL), EINVAL);
  CHECK_ERR(umemcg_write_file(a, "memory.max", "1GB"), EINVAL);
  CHECK_ERR(umemcg_write_file(a, "memory.max", "\xff"), EINVAL);
  { /* over one page: E2BIG, as kernfs (atomic_write_len = PAGE_SIZE) */
    static char big[4098];
    memset(big, '1', 4097);
    big[4097] = '\0';
    CHECK_ERR(umemcg_write_file(a, "memory.max", big), E2BIG);
    big[0] = 'x';
    big[4096] = '\0';
    CHECK_ERR(umemcg_write_file(a, "memory.max", big), EINVAL);
  }
  CHECK_ERR(umemcg_write_file(a, "memory.current", "0"), EACCES);
  CHECK_ERR(umemcg_write_file(a, "memory.max", NULL), EINVAL);
  CHECK_ERR(umemcg_write_file(a, "memory.reclaim", "1M"), EAGAIN);
  CHECK_ERR(umemcg_write_file(a, "memory.oom.group", "99999999999"), ERANGE);

  /* Statistics. */
  CHECK_ERR(umemcg_mod_state(b, "anon", 2), 0);
  CHECK_ERR(umemcg_count_event(b, "pgfault", 3), 0);
  CHECK_ERR(umemcg_mod_state_item(b, UMEMCG_STAT_ANON, 1), 0);
  CHECK_ERR(umemcg_mod_state_item(b, UMEMCG_STAT_ANON, -1), 0);
  CHECK_ERR(umemcg_mod_state_item(b, UMEMCG_STAT_NR_BUILTIN, 1), EINVAL);
  CHECK_ERR(umemcg_mod_state_item(b, -1, 1), EINVAL);
  CHECK_ERR(umemcg_mod_state_item(NULL, UMEMCG_STAT_ANON, 1), EINVAL);
  CHECK_ERR(umemcg_mod_state(b, "no_such_item", 1), EINVAL);
  CHECK_ERR(umemcg_mod_state(b, NULL, 1), EINVAL);
  CHECK_ERR(umemcg_count_event(b, "pgfault", UINT64_MAX), EINVAL);
  CHECK_ERR(umemcg_flush(a), 0);
  CHECK_ERR(read_text(a, "memory.stat", buf, sizeof(buf)), 0);
  CHECK(strncmp(buf, "anon 8192\n", 10) == 0);
  CHECK(strstr(buf, "pgfault 3\n") != NULL);

  /* Objects: bytes charged through the objcg, kept across removal. */
  {
    umemcg_objcg_t* oc = NULL;
    CHECK_ERR(umemcg_objcg_get(b, &oc), 0);
    CHECK_ERR(umemcg_objcg_get(b, NULL), EINVAL);
    CHECK_ERR(umemcg_obj_charge(oc, 100, 0, NULL), 0);
    CHECK_ERR(umemcg_obj_charge(oc, 50, 0, "slab_reclaimable"), 0);
    CHECK_ERR(umemcg_obj_charge(oc, 1, 0, "anon"), EINVAL); /* not bytes */
    CHECK_ERR(umemcg_obj_charge(oc, 1, 0, "nope"), EINVAL);
    CHECK_ERR(umemcg_obj_charge(oc, UINT64_MAX, 0, NULL), EINVAL);
    /* Slab deltas are cached per CPU (under a page): drain, then flush. */
    CHECK_ERR(umemcg_drain_all(a), 0);
    CHECK_ERR(umemcg_flush(a), 0);
    CHECK_ERR(read_text(a, "memory.stat", buf, sizeof(buf)), 0);
    CHECK(strstr(buf, "slab_reclaimable 50\nslab_unreclaimable 100\n") != NULL);
    CHECK_ERR(umemcg_obj_uncharge(oc, 100, NULL), 0);
    CHECK_ERR(umemcg_obj_uncharge(oc, 50, "slab_reclaimable"), 0);
    CHECK_ERR(umemcg_obj_uncharge(oc, 1, "x"), EINVAL);
    CHECK_ERR(umemcg_objcg_put(oc), 0);
    CHECK_ERR(umemcg_objcg_put(oc), EBADF);
    CHECK_ERR(umemcg_obj_charge(oc, 1, 0, NULL), EBADF);
    CHECK_ERR(umemcg_objcg_put(NULL), EINVAL);
  }

  /* Removal: busy parent, removed group refuses charges, handle stays. */
  CHECK_ERR(umemcg_group_remove(a), EBUSY);
  CHECK_ERR(umemcg_group_remove(b), 0);
  CHECK_ERR(umemcg_group_remove(b), ENODEV);
  CHECK_ERR(umemcg_try_charge(b, 1, 0, NULL), ENODEV);
  CHECK_ERR(umemcg_mod_state(b, "anon", -2), ENODEV);
  CHECK_ERR(umemcg_mod_state_item(b, UMEMCG_STAT_PGFAULT, 1), ENODEV);
  CHECK_ERR(umemcg_write_file(b, "memory.max", "1M"), ENODEV);
  CHECK_ERR(umemcg_group_remove(root), EINVAL);
  {
    umemcg_objcg_t* oc = NULL;
    CHECK_ERR(umemcg_objcg_get(b, &oc), ENODEV);
  }
  CHECK_ERR(umemcg_group_release(b), 0);
  CHECK_ERR(umemcg_try_charge(b, 1, 0, NULL), EBADF);

  /* Destroying the controller invalidates its handles. */
  CHECK_ERR(umemcg_controller_destroy(ctrl), 0);
  CHECK_ERR(umemcg_try_charge(a, 1, 0, NULL), EBADF);
  CHECK_ERR(umemcg_group_release(a), EBADF);
  CHECK_ERR(umemcg_group_release(root), EBADF);
  CHECK_ERR(umemcg_group_lookup(ctrl, "a", &found), EBADF);
}

static void test_callbacks(void) {
  umemcg_options_t o;
  umemcg_controller_t* ctrl = NULL;
  umemcg_group_t *root = NULL, *g = NULL;
  umemcg_reclaimer_t* r = NULL;
  struct cache c;
  struct oom_state oom;
  umemcg_reclaimer_ops_t ops;
  umemcg_reclaimer_ops_t bad_ops;
  char buf[512];
  umemcg_options_init(&o);
  o.charge_group_metadata = 0; /* exact page counts */
  o.cpu_source = UMEMCG_CPU_FAKE;
  o.nr_cpus = 2;
  CHECK_ERR(umemcg_controller_create(&o, &ctrl), 0);
  CHECK_ERR(umemcg_group_root(ctrl, &root), 0);
  CHECK_ERR(umemcg_group_create(root, "g", &g), 0);

  /* A reclaimer makes room for a charge over memory.max. */
  ops.reclaimable = cache_reclaimable;
  ops.reclaim = cache_reclaim;
  bad_ops.reclaimable = NULL;
  bad_ops.reclaim = cache_reclaim;
  c.group = g;
  c.held = 0;
  c.calls = 0;
  CHECK_ERR(umemcg_reclaimer_add(g, &ops, &c, &r), 0);
  CHECK_ERR(umemcg_reclaimer_add(g, &bad_ops, &c, &r), EINVAL);
  CHECK_ERR(umemcg_reclaimer_add(g, NULL, &c, &r), EINVAL);
  CHECK_ERR(umemcg_write_file(g, "memory.max", "400K"), 0);
  CHECK_ERR(umemcg_try_charge(g, 100, UMEMCG_CHARGE_MAY_RECLAIM, NULL), 0);
  c.held = 100;
  CHECK_ERR(umemcg_try_charge(g, 8, UMEMCG_CHARGE_MAY_RECLAIM, NULL), 0);
  CHECK(c.calls >= 1 && c.held < 100);
  CHECK_ERR(umemcg_reclaimer_release(r), 0);
  CHECK_ERR(umemcg_reclaimer_release(r), EBADF);
  CHECK_ERR(umemcg_reclaimer_release(NULL), EINVAL);

  /* Events. */
  events_seen = 0;
  CHECK_ERR(umemcg_set_event_callback(g, on_event, NULL), 0);
  CHECK_ERR(umemcg_write_file(g, "memory.max", "0"), 0);
  CHECK_ERR(umemcg_try_charge(g, 1, UMEMCG_CHARGE_HIGH, NULL), 0); /* max */
  CHECK(events_seen == 2); /* local + hierarchical on g */
  CHECK_ERR(umemcg_set_event_callback(g, NULL, NULL), 0);
  CHECK_ERR(umemcg_set_event_callback(NULL, on_event, NULL), EINVAL);

  /* OOM: a handler that frees memory lets the charge through. */
  oom.calls = 0;
  oom.victim = g;
  CHECK_ERR(umemcg_write_file(g, "memory.max", "max"), 0);
  CHECK_ERR(umemcg_drain_all(root), 0);
  CHECK_ERR(umemcg_read_file(g, "memory.current", buf, sizeof(buf), NULL), 0);
  {
    unsigned long long cur = 0;
    sscanf(buf, "%llu", &cur);
    CHECK_ERR(umemcg_uncharge_direct(g, cur / 4096), 0);
  }
  CHECK_ERR(umemcg_try_charge(g, 4, 0, NULL), 0);
  CHECK_ERR(umemcg_write_file(g, "memory.max", "16K"), 0);
  CHECK_ERR(umemcg_set_oom_handler(ctrl, on_oom, &oom), 0);
  CHECK_ERR(umemcg_try_charge(g, 1, UMEMCG_CHARGE_MAY_RECLAIM, NULL), 0);
  CHECK(oom.calls == 1);
  CHECK_ERR(umemcg_read_file(g, "memory.events", buf, sizeof(buf), NULL), 0);
  CHECK(strstr(buf, "oom 2\noom_kill 1\n") != NULL); /* + the max write */
  oom.victim = NULL;
  CHECK_ERR(umemcg_group_set_oom_handler(g, on_oom, &oom), 0);
  CHECK_ERR(umemcg_try_charge(g, 4, UMEMCG_CHARGE_MAY_RECLAIM, NULL), ENOMEM);
  CHECK(oom.calls == 2);
  CHECK_ERR(umemcg_group_set_oom_handler(g, NULL, NULL), 0);
  CHECK_ERR(umemcg_set_oom_handler(ctrl, NULL, NULL), 0);
  CHECK_ERR(umemcg_set_oom_handler(NULL, on_oom, &oom), EINVAL);
  CHECK_ERR(umemcg_uncharge_direct(g, 1), 0);

  CHECK(strcmp(umemcg_strerror(EBADF), "stale or released handle") == 0);
  CHECK(strcmp(umemcg_strerror(12345), "unknown error") == 0);

  /* Destroy with live group handles: they are released for us. */
  CHECK_ERR(umemcg_controller_destroy(ctrl), 0);
  CHECK_ERR(umemcg_group_release(g), EBADF);
}

/* An oom.group sweep: the handler kills one task in each of three
 * members of the kill group and reports each. */
struct sweep {
  umemcg_group_t* member[3];
  int calls;
  int report_errors;
};

static int on_oom_sweep(void* ctx, umemcg_group_t* over_limit,
                        umemcg_group_t* kill_group, uint64_t nr_pages,
                        umemcg_group_t** killed) {
  struct sweep* s = (struct sweep*)ctx;
  int i;
  (void)over_limit;
  (void)nr_pages;
  s->calls++;
  if (kill_group == NULL) return 0;
  for (i = 0; i < 3; ++i) umemcg_uncharge_direct(s->member[i], 1);
  *killed = s->member[0]; /* the chosen victim */
  if (umemcg_oom_report_kill(s->member[1], 1) != 0) s->report_errors++;
  if (umemcg_oom_report_kill(s->member[2], 1) != 0) s->report_errors++;
  if (umemcg_oom_report_kill(s->member[2], 0) != EINVAL) s->report_errors++;
  return 1;
}

static long long event_count(umemcg_group_t* g, const char* file,
                             const char* key) {
  char buf[512];
  const char* p;
  long long v = -1;
  if (read_text(g, file, buf, sizeof(buf)) != 0) return -1;
  p = strstr(buf, key);
  if (p != NULL) sscanf(p + strlen(key), " %lld", &v);
  return v;
}

/* A handler that kills its victim outright: reports it, frees its
 * memory, removes the group and releases the handle before returning. The
 * kill is still counted (the report took its own reference), nothing is
 * used after the release (ASan), and the tree stays consistent. */
struct remover {
  umemcg_group_t* victim;
  int calls;
  int errors;
};

static int on_oom_remove(void* ctx, umemcg_group_t* over_limit,
                         umemcg_group_t* kill_group, uint64_t nr_pages,
                         umemcg_group_t** killed) {
  struct remover* r = (struct remover*)ctx;
  (void)over_limit;
  (void)kill_group;
  (void)nr_pages;
  (void)killed; /* left NULL: the victim is reported below */
  r->calls++;
  if (r->victim == NULL) return 0;
  if (umemcg_oom_report_kill(r->victim, 1) != 0) r->errors++;
  if (umemcg_uncharge_direct(r->victim, 2) != 0) r->errors++;
  if (umemcg_group_remove(r->victim) != 0) r->errors++;
  if (umemcg_group_release(r->victim) != 0) r->errors++;
  r->victim = NULL;
  return 1;
}

static void test_oom_handler_removes_victim(void) {
  umemcg_options_t o;
  umemcg_controller_t* ctrl = NULL;
  umemcg_group_t *root = NULL, *a = NULL, *v = NULL, *w = NULL;
  struct remover r;
  umemcg_options_init(&o);
  o.charge_group_metadata = 0; /* exact page counts */
  o.cpu_source = UMEMCG_CPU_FAKE;
  o.nr_cpus = 2;
  CHECK_ERR(umemcg_controller_create(&o, &ctrl), 0);
  CHECK_ERR(umemcg_group_root(ctrl, &root), 0);
  CHECK_ERR(umemcg_group_create(root, "a", &a), 0);
  CHECK_ERR(umemcg_write_file(a, "memory.max", "12K"), 0);
  CHECK_ERR(umemcg_group_create(a, "v", &v), 0);
  CHECK_ERR(umemcg_group_create(a, "w", &w), 0);
  CHECK_ERR(umemcg_try_charge(v, 2, 0, NULL), 0);
  CHECK_ERR(umemcg_try_charge(w, 1, 0, NULL), 0);
  memset(&r, 0, sizeof(r));
  r.victim = v;
  CHECK_ERR(umemcg_set_oom_handler(ctrl, on_oom_remove, &r), 0);
  CHECK_ERR(umemcg_try_charge(w, 2, UMEMCG_CHARGE_MAY_RECLAIM, NULL), 0);
  CHECK(r.calls == 1);
  CHECK(r.errors == 0);
  CHECK(event_count(a, "memory.events", "oom_kill") == 1);
  CHECK(event_count(a, "memory.events", "oom ") == 1);
  CHECK_ERR(umemcg_uncharge_direct(w, 3), 0);
  CHECK_ERR(umemcg_group_release(w), 0);
  CHECK_ERR(umemcg_group_release(a), 0);
  CHECK_ERR(umemcg_controller_destroy(ctrl), 0);
}

static void test_oom_victims(void) {
  umemcg_options_t o;
  umemcg_controller_t* ctrl = NULL;
  umemcg_group_t *root = NULL, *a = NULL;
  struct sweep s;
  char name[8];
  int i;
  umemcg_options_init(&o);
  o.charge_group_metadata = 0; /* exact page counts */
  o.cpu_source = UMEMCG_CPU_FAKE;
  o.nr_cpus = 2;
  CHECK_ERR(umemcg_controller_create(&o, &ctrl), 0);
  CHECK_ERR(umemcg_group_root(ctrl, &root), 0);
  CHECK_ERR(umemcg_group_create(root, "a", &a), 0);
  CHECK_ERR(umemcg_write_file(a, "memory.max", "12K"), 0);
  CHECK_ERR(umemcg_write_file(a, "memory.oom.group", "1"), 0);
  memset(&s, 0, sizeof(s));
  for (i = 0; i < 3; ++i) {
    snprintf(name, sizeof(name), "m%d", i);
    CHECK_ERR(umemcg_group_create(a, name, &s.member[i]), 0);
    CHECK_ERR(umemcg_try_charge(s.member[i], 1, 0, NULL), 0);
  }
  CHECK_ERR(umemcg_oom_report_kill(s.member[0], 1), EINVAL); /* no OOM */
  CHECK_ERR(umemcg_set_oom_handler(ctrl, on_oom_sweep, &s), 0);
  CHECK_ERR(umemcg_try_charge(s.member[0], 1, UMEMCG_CHARGE_MAY_RECLAIM, NULL),
            0);
  CHECK(s.calls == 1);
  CHECK(s.report_errors == 0);
  /* One oom_kill per killed task, where it ran and hierarchically. */
  for (i = 0; i < 3; ++i) {
    CHECK(event_count(s.member[i], "memory.events.local", "oom_kill") == 1);
    CHECK(event_count(s.member[i], "memory.events", "oom_kill") == 1);
  }
  CHECK(event_count(a, "memory.events", "oom_kill") == 3);
  CHECK(event_count(a, "memory.events.local", "oom_kill") == 0);
  /* One oom_group_kill, on the oom.group subtree. */
  CHECK(event_count(a, "memory.events", "oom_group_kill") == 1);
  CHECK(event_count(a, "memory.events.local", "oom_group_kill") == 1);
  CHECK(event_count(s.member[0], "memory.events", "oom_group_kill") == 0);
  CHECK_ERR(umemcg_uncharge_direct(s.member[0], 1), 0);
  CHECK_ERR(umemcg_controller_destroy(ctrl), 0);
}

/* Open files (the kernel selftest test_memcg_current_peak from C):
 * per-handle memory.peak resets written as write(fd, "reset\n\0", 7),
 * generation-checked handles, errors. */
static void test_files(void) {
  static const char reset[] = "reset\n"; /* sizeof: 7, the NUL included */
  umemcg_options_t o;
  umemcg_controller_t* ctrl = NULL;
  umemcg_group_t *root = NULL, *g = NULL;
  umemcg_file_t *fd = NULL, *fd2 = NULL, *f = NULL;
  char buf[256];
  size_t needed = 0;
  umemcg_options_init(&o);
  o.charge_group_metadata = 0; /* exact page counts */
  o.cpu_source = UMEMCG_CPU_FAKE;
  o.nr_cpus = 2;
  o.batch = 1; /* no stock surplus in the peaks */
  CHECK_ERR(umemcg_controller_create(&o, &ctrl), 0);
  CHECK_ERR(umemcg_group_root(ctrl, &root), 0);
  CHECK_ERR(umemcg_group_create(root, "g", &g), 0);

  CHECK_ERR(umemcg_try_charge(g, 10, 0, NULL), 0);
  CHECK_ERR(umemcg_uncharge_direct(g, 6), 0); /* usage 4, peak 10 */
  CHECK_ERR(umemcg_file_open(g, "memory.peak", &fd), 0);
  CHECK_ERR(umemcg_file_open(g, "memory.peak", &fd2), 0);
  CHECK_ERR(umemcg_file_write(fd, reset, sizeof(reset), 0), 0);
  CHECK_ERR(umemcg_file_read(fd, buf, sizeof(buf), &needed), 0);
  CHECK(strcmp(buf, "16384\n") == 0 && needed == 7);
  CHECK_ERR(umemcg_file_read(fd2, buf, sizeof(buf), NULL), 0);
  CHECK(strcmp(buf, "40960\n") == 0); /* fd2 never wrote: global peak */
  CHECK_ERR(read_text(g, "memory.peak", buf, sizeof(buf)), 0);
  CHECK(strcmp(buf, "40960\n") == 0);
  CHECK_ERR(umemcg_file_read(fd, buf, 3, &needed), ERANGE);
  CHECK(needed == 7);
  /* Zero bytes: nothing happens (the peak is not reset). */
  CHECK_ERR(umemcg_try_charge(g, 2, 0, NULL), 0);
  CHECK_ERR(umemcg_uncharge_direct(g, 2), 0);
  CHECK_ERR(umemcg_file_write(fd, NULL, 0, 0), 0);
  CHECK_ERR(umemcg_file_read(fd, buf, sizeof(buf), NULL), 0);
  CHECK(strcmp(buf, "24576\n") == 0);

  /* Values end at the first NUL; non-blocking writes only set limits. */
  CHECK_ERR(umemcg_file_open(g, "memory.max", &f), 0);
  CHECK_ERR(umemcg_file_write(f, "1M\0junk", 7, 0), 0);
  CHECK_ERR(umemcg_file_read(f, buf, sizeof(buf), NULL), 0);
  CHECK(strcmp(buf, "1048576\n") == 0);
  CHECK_ERR(umemcg_file_write(f, "8K", 2, UMEMCG_WRITE_NONBLOCK), 0);
  CHECK_ERR(read_text(g, "memory.current", buf, sizeof(buf)), 0);
  CHECK(strcmp(buf, "16384\n") == 0); /* over the new max: not reclaimed */
  CHECK_ERR(umemcg_file_write(f, "1X", 2, 0), EINVAL);
  CHECK_ERR(umemcg_file_write(f, "1M", 2, 1u << 7), EINVAL);
  CHECK_ERR(umemcg_file_write(f, NULL, 1, 0), EINVAL);
  CHECK_ERR(umemcg_file_write(NULL, "1", 1, 0), EINVAL);
  CHECK_ERR(umemcg_file_read(NULL, buf, sizeof(buf), NULL), EINVAL);
  CHECK_ERR(umemcg_file_write(f, "max", 3, 0), 0);
  CHECK_ERR(umemcg_file_close(f), 0);
  CHECK_ERR(umemcg_file_close(f), EBADF);
  CHECK_ERR(umemcg_file_read(f, buf, sizeof(buf), NULL), EBADF);
  CHECK_ERR(umemcg_file_write(f, "1", 1, 0), EBADF);
  CHECK_ERR(umemcg_file_close(NULL), EINVAL);

  /* Open errors and access. */
  CHECK_ERR(umemcg_file_open(g, "memory.nope", &f), ENOENT);
  CHECK_ERR(umemcg_file_open(root, "memory.max", &f), ENOENT);
  CHECK_ERR(umemcg_file_open(g, NULL, &f), EINVAL);
  CHECK_ERR(umemcg_file_open(g, "memory.max", NULL), EINVAL);
  CHECK_ERR(umemcg_file_open(NULL, "memory.max", &f), EINVAL);
  CHECK_ERR(umemcg_file_open(g, "memory.reclaim", &f), 0);
  CHECK_ERR(umemcg_file_read(f, buf, sizeof(buf), NULL), EACCES);
  CHECK_ERR(umemcg_file_write(f, "1M", 2, UMEMCG_WRITE_NONBLOCK), EAGAIN);
  CHECK_ERR(umemcg_file_close(f), 0);
  CHECK_ERR(umemcg_file_open(g, "memory.current", &f), 0);
  CHECK_ERR(umemcg_file_write(f, "0", 1, 0), EACCES);
  CHECK_ERR(umemcg_file_close(f), 0);

  /* The cgroup core files. */
  CHECK_ERR(read_text(g, "cgroup.controllers", buf, sizeof(buf)), 0);
  CHECK(strcmp(buf, "memory\n") == 0);
  CHECK_ERR(umemcg_write_file(root, "cgroup.subtree_control", "+memory"), 0);
  CHECK_ERR(umemcg_write_file(root, "cgroup.subtree_control", "-memory"),
            EBUSY);
  CHECK_ERR(read_text(root, "cgroup.stat", buf, sizeof(buf)), 0);
  CHECK(strcmp(buf, "nr_descendants 1\nnr_dying_descendants 0\n") == 0);
  CHECK_ERR(read_text(g, "cgroup.events", buf, sizeof(buf)), 0);
  CHECK(strcmp(buf, "populated 1\nfrozen 0\n") == 0);

  /* A removed group: reads and writes ENODEV; the handle stays valid. */
  CHECK_ERR(umemcg_uncharge_direct(g, 4), 0);
  CHECK_ERR(umemcg_group_remove(g), 0);
  CHECK_ERR(umemcg_file_read(fd, buf, sizeof(buf), NULL), ENODEV);
  CHECK_ERR(umemcg_file_write(fd, reset, sizeof(reset), 0), ENODEV);
  CHECK_ERR(umemcg_file_open(g, "memory.peak", &f), ENODEV);
  CHECK_ERR(umemcg_file_close(fd), 0);

  /* Destroying the controller releases the handles still open. */
  CHECK_ERR(umemcg_controller_destroy(ctrl), 0);
  CHECK_ERR(umemcg_file_read(fd2, buf, sizeof(buf), NULL), EBADF);
  CHECK_ERR(umemcg_file_close(fd2), EBADF);
}

/* A reclaimer that stalls its charger 200 ms (real time). */
static uint64_t slow_reclaim(void* ctx, uint64_t target) {
  struct timespec ts = {0, 200 * 1000 * 1000};
  nanosleep(&ts, NULL);
  return cache_reclaim(ctx, target);
}

/* memory.pressure: the file, and a trigger armed on a file handle. */
static void test_pressure(void) {
  umemcg_options_t o;
  umemcg_controller_t* ctrl = NULL;
  umemcg_group_t *root = NULL, *g = NULL;
  umemcg_reclaimer_t* r = NULL;
  umemcg_file_t* f = NULL;
  umemcg_reclaimer_ops_t ops;
  struct cache c;
  char buf[256];
  int fired = -1;
  umemcg_options_init(&o);
  o.charge_group_metadata = 0; /* exact page counts */
  o.cpu_source = UMEMCG_CPU_FAKE;
  o.nr_cpus = 2;
  o.batch = 1;
  CHECK_ERR(umemcg_controller_create(&o, &ctrl), 0);
  CHECK_ERR(umemcg_group_root(ctrl, &root), 0);
  CHECK_ERR(umemcg_group_create(root, "g", &g), 0);
  CHECK_ERR(read_text(g, "memory.pressure", buf, sizeof(buf)), 0);
  CHECK(strcmp(buf,
               "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
               "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n") == 0);

  CHECK_ERR(umemcg_file_open(g, "memory.pressure", &f), 0);
  CHECK_ERR(umemcg_file_pressure_event(f, &fired), EINVAL); /* none armed */
  CHECK_ERR(umemcg_file_write(f, "some 1 100", 10, 0), EINVAL);
  CHECK_ERR(umemcg_file_write(f, "some 150000 1000000", 19, 0), 0);
  CHECK_ERR(umemcg_file_write(f, "some 150000 1000000", 19, 0), EBUSY);
  CHECK_ERR(umemcg_file_pressure_event(f, &fired), 0);
  CHECK(fired == 0);

  ops.reclaimable = cache_reclaimable;
  ops.reclaim = slow_reclaim;
  c.group = g;
  c.held = 0;
  c.calls = 0;
  CHECK_ERR(umemcg_reclaimer_add(g, &ops, &c, &r), 0);
  CHECK_ERR(umemcg_write_file(g, "memory.max", "40K"), 0);
  CHECK_ERR(umemcg_try_charge(g, 10, 0, NULL), 0);
  c.held = 10;
  CHECK_ERR(umemcg_try_charge(g, 1, UMEMCG_CHARGE_MAY_RECLAIM, NULL), 0);
  CHECK(c.calls == 1);
  CHECK_ERR(umemcg_file_pressure_event(f, &fired), 0);
  CHECK(fired == 1);
  CHECK_ERR(umemcg_file_pressure_event(f, &fired), 0);
  CHECK(fired == 0); /* taken */
  CHECK_ERR(umemcg_file_pressure_event(NULL, &fired), EINVAL);
  CHECK_ERR(umemcg_file_close(f), 0);
  CHECK_ERR(umemcg_file_pressure_event(f, &fired), EBADF);
  CHECK_ERR(umemcg_reclaimer_release(r), 0);
  CHECK_ERR(umemcg_controller_destroy(ctrl), 0);
}

/* memory.high work run by the application (UMEMCG_HIGH_WORK_MANUAL). */
static void test_high_work(void) {
  umemcg_options_t o;
  umemcg_controller_t* ctrl = NULL;
  umemcg_group_t *root = NULL, *g = NULL;
  umemcg_reclaimer_t* r = NULL;
  umemcg_reclaimer_ops_t ops;
  struct cache c;
  size_t ran = 99;
  umemcg_options_init(&o);
  o.charge_group_metadata = 0; /* exact page counts */
  CHECK(o.high_work == UMEMCG_HIGH_WORK_THREAD);
  o.cpu_source = UMEMCG_CPU_FAKE;
  o.nr_cpus = 2;
  o.batch = 8;
  o.high_work = 7;
  CHECK_ERR(umemcg_controller_create(&o, &ctrl), EINVAL);
  o.high_work = UMEMCG_HIGH_WORK_MANUAL;
  CHECK_ERR(umemcg_controller_create(&o, &ctrl), 0);
  CHECK_ERR(umemcg_group_root(ctrl, &root), 0);
  CHECK_ERR(umemcg_group_create(root, "g", &g), 0);
  CHECK_ERR(umemcg_write_file(g, "memory.high", "32K"), 0);
  c.group = g;
  c.held = 0;
  c.calls = 0;
  ops.reclaimable = cache_reclaimable;
  ops.reclaim = cache_reclaim;
  CHECK_ERR(umemcg_reclaimer_add(g, &ops, &c, &r), 0);
  CHECK_ERR(umemcg_try_charge(g, 64, 0, NULL), 0); /* cannot block */
  c.held = 64;
  CHECK(c.calls == 0);
  CHECK_ERR(umemcg_run_high_work(ctrl, &ran), 0);
  CHECK(ran == 1 && c.calls == 1);
  CHECK_ERR(umemcg_run_high_work(ctrl, NULL), 0);
  CHECK_ERR(umemcg_run_high_work(NULL, &ran), EINVAL);
  CHECK_ERR(umemcg_reclaimer_release(r), 0);
  CHECK_ERR(umemcg_uncharge_direct(g, c.held), 0);
  CHECK_ERR(umemcg_controller_destroy(ctrl), 0);
  CHECK_ERR(umemcg_run_high_work(ctrl, &ran), EBADF);
}

/* The percpu line of a memory.stat text; -1 if absent. */
static long long stat_percpu(const char* text) {
  const char* p = strstr(text, "\npercpu ");
  return p == NULL ? -1 : atoll(p + 8);
}

/* charge_group_metadata: a group's own memory is charged to its parent (a
 * child of the root charges nothing), shown as percpu; off: nothing. */
static void test_group_metadata(void) {
  int on;
  for (on = 0; on <= 1; ++on) {
    umemcg_options_t o;
    umemcg_controller_t* ctrl = NULL;
    umemcg_group_t *root = NULL, *a = NULL, *b = NULL;
    char buf[8192];
    umemcg_options_init(&o);
    o.nr_cpus = 2;
    o.cpu_source = UMEMCG_CPU_FAKE;
    o.charge_group_metadata = on;
    CHECK_ERR(umemcg_controller_create(&o, &ctrl), 0);
    CHECK_ERR(umemcg_group_root(ctrl, &root), 0);
    CHECK_ERR(umemcg_group_create(root, "a", &a), 0);
    CHECK_ERR(umemcg_group_create(a, "b", &b), 0);
    CHECK_ERR(umemcg_flush(a), 0); /* memory.stat may lag otherwise */
    CHECK_ERR(read_text(a, "memory.stat", buf, sizeof(buf)), 0);
    if (on) {
      CHECK(stat_percpu(buf) > 0);
      CHECK_ERR(read_text(a, "memory.current", buf, sizeof(buf)), 0);
      CHECK(atoll(buf) > 0);
    } else {
      CHECK(stat_percpu(buf) == 0);
      CHECK_ERR(read_text(a, "memory.current", buf, sizeof(buf)), 0);
      CHECK(atoll(buf) == 0);
    }
    CHECK_ERR(umemcg_group_release(b), 0);
    CHECK_ERR(umemcg_group_release(a), 0);
    CHECK_ERR(umemcg_group_release(root), 0);
    CHECK_ERR(umemcg_controller_destroy(ctrl), 0);
  }
}

/* Whether `tid` is a line of the group's cgroup.threads. */
static int lists_tid(umemcg_group_t* g, long tid) {
  char buf[4096];
  char line[32];
  if (read_text(g, "cgroup.threads", buf, sizeof(buf)) != 0) return 0;
  snprintf(line, sizeof(line), "%ld\n", tid);
  for (const char* p = buf; (p = strstr(p, line)) != NULL; ++p) {
    if (p == buf || p[-1] == '\n') return 1;
  }
  return 0;
}

/* umemcg_register_thread on a thread of its own (no other test registers
 * it): unknown to cgroup.threads before, listed in the root after, and
 * movable by its TID. */
static void* register_thread_body(void* arg) {
  umemcg_controller_t* ctrl = NULL;
  umemcg_group_t* root = NULL;
  umemcg_group_t* a = NULL;
  const long tid = syscall(SYS_gettid);
  char id[32];
  (void)arg;
  snprintf(id, sizeof(id), "%ld", tid);
  CHECK_ERR(umemcg_controller_create(NULL, &ctrl), 0);
  CHECK_ERR(umemcg_group_root(ctrl, &root), 0);
  CHECK_ERR(umemcg_group_create(root, "a", &a), 0);
  CHECK_ERR(umemcg_write_file(a, "cgroup.threads", id), ESRCH);
  CHECK(!lists_tid(root, tid));
  CHECK_ERR(umemcg_register_thread(), 0);
  CHECK_ERR(umemcg_register_thread(), 0); /* idempotent */
  CHECK(lists_tid(root, tid));
  CHECK_ERR(umemcg_write_file(a, "cgroup.threads", id), 0);
  CHECK(lists_tid(a, tid));
  CHECK(!lists_tid(root, tid));
  /* Back to the root: the move's references on `a` go with the thread. */
  CHECK_ERR(umemcg_write_file(root, "cgroup.threads", id), 0);
  CHECK(lists_tid(root, tid));
  CHECK_ERR(umemcg_group_release(a), 0);
  CHECK_ERR(umemcg_group_release(root), 0);
  return ctrl;
}

static void test_register_thread(void) {
  pthread_t t;
  void* ctrl = NULL;
  /* The counters are the thread's until it is joined: checked after. */
  const int created = pthread_create(&t, NULL, register_thread_body, NULL);
  const int joined = created == 0 ? pthread_join(t, &ctrl) : -1;
  CHECK(created == 0);
  CHECK(joined == 0);
  /* After the thread's exit: nothing of it pins a group. */
  if (ctrl != NULL) {
    CHECK_ERR(umemcg_controller_destroy((umemcg_controller_t*)ctrl), 0);
  }
}

int main(void) {
  test_controller();
  test_groups_and_charges();
  test_callbacks();
  test_oom_victims();
  test_oom_handler_removes_victim();
  test_files();
  test_pressure();
  test_high_work();
  test_group_metadata();
  test_register_thread();
  printf("c_api: %d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}

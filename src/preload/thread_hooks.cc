// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// pthread_create of libumemcg-preload.so: glibc's, except for threads
// created from inside umemcg (the calling thread is marked inside umemcg,
// ThreadState::in_hook), which are marked inside umemcg for their whole
// life.
//
// Why. Those are the operations module's threads (the FUSE workers and the
// metrics server, started by the preload's constructor with its thread
// marked, and the workers they start in turn): they run umemcg's own code
// on the preload's controller, through the module's copy of libumemcg, for
// their whole life. Code of the preload's own copy always runs marked, so
// what it allocates is charged to nothing and never re-enters the charge
// path; the module's threads need the same, or an allocation made while
// they hold one of the controller's locks or run its stock drain (a
// memory.max write drains and reclaims) charges through the preload, whose
// charge path under UMEMCG_ENFORCE waits for that very drain or lock: the
// program's memory.max write through the mount never returned. Their
// allocations count as unaccounted_bytes in the exit report.
//
// The program's own threads start through RunProgramThread once the
// runtime is up: each is registered in the thread registry (threads.cc)
// before its start routine runs, so cgroup.threads lists it at once.

#include <dlfcn.h>
#include <pthread.h>

#include <atomic>

#include "preload/preload_internal.h"
#include "preload/runtime.h"

extern "C" {
void* __libc_malloc(size_t size);
void __libc_free(void* p);
}

namespace umemcg::preload {
namespace {

using CreateFn = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*),
                         void*);

// glibc's pthread_create, found once (racing first calls find the same).
std::atomic<CreateFn> g_real_create{nullptr};

CreateFn RealCreate() {
  CreateFn f = g_real_create.load(std::memory_order_acquire);
  if (__builtin_expect(f == nullptr, 0)) {
    HookGuard guard;  // dlsym may allocate
    f = reinterpret_cast<CreateFn>(dlsym(RTLD_NEXT, "pthread_create"));
    g_real_create.store(f, std::memory_order_release);
  }
  return f;
}

struct InternalStart {
  void* (*fn)(void*);
  void* arg;
};

// A thread of the program: known to the thread registry from its start
// (threads.cc), before it runs any of its own code.
void* RunProgramThread(void* p) {
  const InternalStart start = *static_cast<InternalStart*>(p);
  __libc_free(p);
  RegisterThreadIfNew();
  return start.fn(start.arg);
}

void* RunInternal(void* p) {
  const InternalStart start = *static_cast<InternalStart*>(p);
  __libc_free(p);
  // Never decremented: the thread runs umemcg's code until it ends.
  ++tls_state.in_hook;
  return start.fn(start.arg);
}

}  // namespace
}  // namespace umemcg::preload

extern "C" int pthread_create(pthread_t* thread, const pthread_attr_t* attr,
                              void* (*fn)(void*), void* arg) {
  using namespace umemcg::preload;
  const CreateFn real = RealCreate();
  if (real == nullptr) return EAGAIN;
  const bool internal = tls_state.in_hook != 0;
  // Before the runtime is up a program thread registers at its first
  // allocation or mapping instead (threads.cc).
  if (!internal && g_runtime.load(std::memory_order_acquire) == nullptr) {
    return real(thread, attr, fn, arg);
  }
  auto* start =
      static_cast<InternalStart*>(__libc_malloc(sizeof(InternalStart)));
  if (start == nullptr) return EAGAIN;
  start->fn = fn;
  start->arg = arg;
  const int r =
      real(thread, attr, internal ? &RunInternal : &RunProgramThread, start);
  if (r != 0) __libc_free(start);
  return r;
}

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Threads the library starts for itself (the stats flusher, the high
// worker, the pressure poller and killer, the cluster node's thread, the
// FUSE and metrics servers' threads) start with every signal blocked, as
// the kernel's own threads take no user signals. A process-directed signal
// (SIGCHLD, SIGINT, a timer's) then reaches one of the application's
// threads, never a thread of ours: an application that blocks a signal in
// the thread waiting for it (bash blocks SIGCHLD around waitpid) would
// otherwise have its handler run on our thread, racing its own
// bookkeeping (bash under the preload with UMEMCG_MOUNT hung in waitpid,
// its children reaped by the handler on a FUSE thread).
//
// Thread safety: StartThread may be called from any thread; the caller's
// own signal mask is restored before it returns.

#ifndef UMEMCG_SRC_PORT_THREAD_H_
#define UMEMCG_SRC_PORT_THREAD_H_

#include <pthread.h>
#include <signal.h>

#include <thread>
#include <utility>

namespace umemcg::internal {

// A std::thread running `fn` with every signal blocked (inherited from
// the mask set around its creation). Throws as std::thread's constructor.
template <typename F>
std::thread StartThread(F&& fn) {
  struct MaskScope {
    sigset_t old;
    MaskScope() {
      sigset_t all;
      sigfillset(&all);
      pthread_sigmask(SIG_SETMASK, &all, &old);
    }
    ~MaskScope() { pthread_sigmask(SIG_SETMASK, &old, nullptr); }
  } scope;
  return std::thread(std::forward<F>(fn));
}

}  // namespace umemcg::internal

#endif  // UMEMCG_SRC_PORT_THREAD_H_

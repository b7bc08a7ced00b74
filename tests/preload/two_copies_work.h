// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The work two_copies_test runs through each copy of libumemcg in its
// process: the test binary's own (linked statically) and the private copy
// inside two_copies_module.so (loaded with dlopen), each on a controller
// the other copy created. Compiled into both.

#ifndef UMEMCG_TESTS_PRELOAD_TWO_COPIES_WORK_H_
#define UMEMCG_TESTS_PRELOAD_TWO_COPIES_WORK_H_

#include <cstddef>

#include "threads/thread_registry.h"
#include "umemcg/controller.h"

namespace umemcg::two_copies {

// What one copy saw; `error` is empty when every check held.
struct WorkResult {
  // This copy's rseq area offset (port/rseq.h) and glibc's.
  long copy_offset = 0;
  long glibc_offset = 0;
  bool rseq_commits = false;  // this copy's RseqCommitAvailable()
  char error[512] = "";
};

// Charges and uncharges pages and bytes through the per-CPU stocks (their
// rseq hit paths), drains them, then writes memory.high and memory.max of
// `group` below its usage and restores them, checking after each step that
// the calling thread's TCB word at thread pointer + 8 (glibc's dtv) is
// unchanged and the charges are exact.
void Work(Controller& ctrl, Group& group, WorkResult* out);

}  // namespace umemcg::two_copies

extern "C" {
// two_copies_module.so's entry points (its own copy of libumemcg).
typedef void (*two_copies_work_fn)(umemcg::Controller* ctrl,
                                   umemcg::Group* group,
                                   umemcg::two_copies::WorkResult* out);
typedef umemcg::Controller* (*two_copies_create_fn)(void);
typedef void (*two_copies_use_registry_fn)(
    const umemcg::internal::ThreadRegistryOps* ops);
typedef int (*two_copies_write_file_fn)(umemcg::Group* group, const char* file,
                                        const char* text);
typedef void (*two_copies_read_file_fn)(umemcg::Group* group, const char* file,
                                        char* buf, size_t len);
}

#endif  // UMEMCG_TESTS_PRELOAD_TWO_COPIES_WORK_H_

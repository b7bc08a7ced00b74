// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// ExternalLimit: a limit on one group's usage that is kept outside the
// controller, such as a node's lease of a cluster-wide quota
// (src/cluster/). It is the charge path's only hook for such limits:
//
//   - ChargeSlow, after the page counters accepted a batch, asks every
//     group on the way up that has a limit attached whether the new usage
//     is admitted (Admits: local, never blocks). If not, the limit may grow
//     (Grow: for a lease, a round trip to the server, only when the charge
//     may block); a refusal then behaves exactly like a memory.max refusal
//     at that group: the batch is given back, the group is `limited_by`,
//     reclaim, stock draining, retries and OOM handling follow. Only
//     kUnavailable (the limit's owner cannot be reached) differs: no OOM
//     handling, and the charge fails with kAgain instead of
//     kResourceExhausted.
//   - Forced charges (kNoFail, kHigh, from inside a reclaimer) go past the
//     limit as they go past max; OnForced tells the limit.
//   - The limit may add memory files to its group (FileSpec): the file
//     interface lists, reads and writes them through it.
//
// Cost when nothing is attached: one relaxed load of a process-wide count
// per slow-path batch (ExternalLimits::Active). The stock hit paths never
// look.
//
// Thread safety: Admits, Grow, OnForced, ReadFile and WriteFile are called
// concurrently from any charging thread. Attach and Detach may be called
// from any thread; Detach returns only once no thread is inside the limit
// any more (each call is bracketed by an in-flight count), so the owner may
// free it right after.

#ifndef UMEMCG_SRC_EXTERNAL_LIMIT_H_
#define UMEMCG_SRC_EXTERNAL_LIMIT_H_

#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "umemcg/export.h"
#include "umemcg/group.h"
#include "umemcg/status.h"

namespace umemcg::internal {

// The outcome of ExternalLimit::Grow.
enum class ExternalVerdict : uint8_t {
  kGranted,      // the limit now admits the usage asked for
  kRefused,      // the limit's owner refused (e.g. over the cluster max)
  kUnavailable,  // could not ask (no blocking allowed, or unreachable)
};

class ExternalLimit {
 public:
  // A memory file the limit adds to its group. Static storage: the name
  // must outlive every file handle.
  struct FileSpec {
    const char* name;
    bool readable;
    bool writable;
  };

  ExternalLimit() = default;
  virtual ~ExternalLimit() = default;
  ExternalLimit(const ExternalLimit&) = delete;
  ExternalLimit& operator=(const ExternalLimit&) = delete;

  // True if the group's usage `usage` (pages, including the batch just
  // charged) is within the limit. Never blocks, never allocates.
  virtual bool Admits(uint64_t usage) = 0;
  // Makes room so that `usage` pages are admitted. With `may_block` it may
  // wait (a bounded time) for a remote decision; without it it must decide
  // locally and may only start asynchronous work. `reclaimed`: this charge
  // already ran reclaim for the group (a limit near its owner's max may
  // refuse before that, so that local reclaim comes first).
  virtual ExternalVerdict Grow(uint64_t usage, bool may_block,
                               bool reclaimed) = 0;
  // Pages the limit admits now beyond `usage` (0 when none), for the
  // "did reclaim make enough room" check.
  virtual uint64_t Margin(uint64_t usage) = 0;
  // A charge went past the limit by force.
  virtual void OnForced() {}

  // Memory files the limit adds to its group.
  virtual std::span<const FileSpec> Files() const { return {}; }
  virtual StatusOr<std::string> ReadFile(std::string_view name) {
    return Status(StatusCode::kNotFound, std::string(name));
  }
  // `may_block`: false for the kernel's O_NONBLOCK writes.
  virtual Status WriteFile(std::string_view name, std::string_view text,
                           bool may_block) {
    (void)text;
    (void)may_block;
    return Status(StatusCode::kNotFound, std::string(name));
  }

 private:
  friend class ExternalLimits;
  // Threads inside the limit through its group (see Detach).
  std::atomic<int64_t> in_flight_{0};
};

// The charge path's and the file interface's view of attached limits.
class ExternalLimits {
 public:
  // Attaches `limit` to `group` (not owned). kInvalidArgument for the root,
  // kFailedPrecondition if the group is offline, kBusy if a limit is
  // already attached. Attach and Detach are exported from libumemcg.so for
  // libumemcg-cluster.so; they are not public API.
  UMEMCG_EXPORT static Status Attach(Group& group, ExternalLimit* limit);
  // Detaches `limit` from `group` and waits until no thread is inside it
  // through the group. kNotFound if it is not the attached one.
  UMEMCG_EXPORT static Status Detach(Group& group, ExternalLimit* limit);
  // The limit attached to `group`, if any (for observers; may be detached
  // right after).
  static bool Attached(const Group& group);

  // True when some limit is attached anywhere in the process (relaxed: a
  // charge racing with the first Attach may miss it, as a charge racing
  // with a memory.max write may pass the old max).
  static bool Active() { return active_.load(std::memory_order_relaxed) != 0; }

  // After the counters of `g` and its ancestors accepted `batch` pages:
  // returns the closest group on the way up whose limit refuses the new
  // usage even after Grow, or null. `*verdict` is the refusing limit's
  // verdict (in: the previous refusal's, kept once the asks are used up).
  // A blocking Grow is tried only while *blocking_asks > 0 (each use
  // decrements it), so one charge waits for a remote answer a bounded
  // number of times.
  static Group* Check(Group* g, bool may_block, bool reclaimed,
                      int* blocking_asks, ExternalVerdict* verdict);
  // min(counter margin, limit margin) of `g` (kernel: mem_cgroup_margin).
  static uint64_t Margin(Group* g);
  // A forced charge of `g`: tells every limit on the way up.
  static void NotifyForced(Group* g);

  // The limit's owner reports `group` over it by `excess` pages (a cluster
  // over its max): handled like a lowered memory.max (memory_max_write):
  // a max event, the subtree's stocks drained, reclaim until `excess`
  // pages are freed or kMaxReclaimRetries rounds free nothing, then, with
  // `may_oom`, OOM handling while it makes progress. Returns the pages the
  // group's usage fell by. From a thread that may block, never from a
  // reclaimer. Exported for libumemcg-cluster.so; not public API.
  UMEMCG_EXPORT static uint64_t ReclaimExcess(Group& group, uint64_t excess,
                                              bool may_oom);

  // The attached limit's files, for the file interface. FindFile returns
  // null when `group` has no limit or the limit has no such file.
  static const ExternalLimit::FileSpec* FindFile(Group& group,
                                                 std::string_view name);
  static void AppendFileNames(const Group& group,
                              std::vector<std::string>* names);
  static StatusOr<std::string> ReadFile(Group& group, std::string_view name);
  static Status WriteFile(Group& group, std::string_view name,
                          std::string_view text, bool may_block);

 private:
  // Enters the limit attached to `g` (null if none); the caller Leaves it.
  static ExternalLimit* Enter(const Group& g);
  static void Leave(ExternalLimit* limit);

  static std::atomic<int64_t> active_;
};

}  // namespace umemcg::internal

#endif  // UMEMCG_SRC_EXTERNAL_LIMIT_H_

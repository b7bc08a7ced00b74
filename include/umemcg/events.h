// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Memory events (cgroup-v2 memory.events / memory.events.local). Each group
// counts every event twice: locally (raised on this group) and
// hierarchically (raised on this group or any descendant). Hierarchical
// propagation stops below the root and is switched off by the controller's
// local_events option (the memory_localevents mount option).
//
//   kLow          reclaimed while below its effective memory.low
//   kHigh         reclaimed because usage was over memory.high
//   kMax          a charge hit memory.max (per attempt), or was forced past it
//   kOom          the charge path or a memory.max write invoked OOM handling
//   kOomKill      a task killed by the OOM handler in this group: one per
//                 killed task the handler reports (OomOutcome::killed and
//                 victims), including each member of an oom.group sweep
//   kOomGroupKill the OOM handler killed a whole memory.oom.group subtree
//                 (once per subtree and OOM, however many members died)

#ifndef UMEMCG_EVENTS_H_
#define UMEMCG_EVENTS_H_

#include <cstddef>
#include <optional>
#include <string_view>

#include "umemcg/export.h"

namespace umemcg {

enum class MemoryEvent : int {
  kLow = 0,
  kHigh,
  kMax,
  kOom,
  kOomKill,
  kOomGroupKill,
};
inline constexpr size_t kNumMemoryEvents = 6;

// The memory.events key: "low", "high", "max", "oom", "oom_kill",
// "oom_group_kill".
UMEMCG_EXPORT const char* MemoryEventName(MemoryEvent event);
UMEMCG_EXPORT std::optional<MemoryEvent> ParseMemoryEvent(
    std::string_view name);

}  // namespace umemcg

#endif  // UMEMCG_EVENTS_H_

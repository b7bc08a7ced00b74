// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0

#include "umemcg/events.h"

namespace umemcg {
namespace {

constexpr const char* kEventNames[kNumMemoryEvents] = {
    "low", "high", "max", "oom", "oom_kill", "oom_group_kill"};

}  // namespace

const char* MemoryEventName(MemoryEvent event) {
  const auto i = static_cast<size_t>(event);
  return i < kNumMemoryEvents ? kEventNames[i] : "?";
}

std::optional<MemoryEvent> ParseMemoryEvent(std::string_view name) {
  for (size_t i = 0; i < kNumMemoryEvents; ++i) {
    if (name == kEventNames[i]) return static_cast<MemoryEvent>(i);
  }
  return std::nullopt;
}

}  // namespace umemcg

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Memory events: names, RaiseEvent (memcg_memory_event()) and the event
// callbacks and observers it calls.
//
// RaiseEvent runs inside charges that must never block, and those may run
// in a signal handler that interrupted its own thread anywhere, a charge or
// an event included (docs/architecture.md, Decisions). So it takes no lock
// and allocates nothing: the group callbacks and the observer list are
// raw pointers loaded atomically, kept alive by a count of RaiseEvent calls
// in flight (Controller::event_readers_). An updater (SetEventCallback,
// Add/RemoveObserver; never on a charge path) swaps the pointer, then
// keeps the old object on the controller's retired list until it sees the
// count at zero: the updater's swap precedes its read of the count (both
// seq_cst), so a RaiseEvent that loaded the old pointer incremented the
// count before that read and is either seen (not freed) or finished. The
// count is per controller, so under a steady stream of events retired
// objects wait for the next update that sees a quiet moment, or for the
// controller's destruction. In a fork child, a count left by a parent's
// thread never drops: retired objects are then kept (never freed there).

#include "umemcg/events.h"

#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "controller_impl.h"
#include "port/fork.h"
#include "umemcg/controller.h"
#include "umemcg/group.h"

namespace umemcg {
namespace {

constexpr const char* kEventNames[kNumMemoryEvents] = {
    "low", "high", "max", "oom", "oom_kill", "oom_group_kill"};

// One RaiseEvent in flight (seq_cst: see the file comment).
class EventReadScope {
 public:
  explicit EventReadScope(std::atomic<uint64_t>& readers) : readers_(readers) {
    readers_.fetch_add(1, std::memory_order_seq_cst);
  }
  ~EventReadScope() { readers_.fetch_sub(1, std::memory_order_seq_cst); }
  EventReadScope(const EventReadScope&) = delete;
  EventReadScope& operator=(const EventReadScope&) = delete;

 private:
  std::atomic<uint64_t>& readers_;
};

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

namespace internal {

void ControllerImpl::RaiseEvent(Group* g, MemoryEvent event, uint64_t count) {
  Controller& c = *g->controller_;
  // A group without the memory controller has no memcg of its own: the
  // kernel counts its tasks' events (an OOM kill) at the nearest ancestor
  // that has one. Limits of such a group are reset, so only a victim the
  // OOM handler reports can land here. The root always has it.
  while (!g->has_memory_controller()) g = g->parent_;
  const int e = static_cast<int>(event);
  // The counts first: an event counts even when its callback throws.
  g->events_local_[e].fetch_add(count, std::memory_order_relaxed);
  const bool local_only = c.info().local_events;
  // Hierarchical counts stop below the root.
  for (Group* m = g; m != nullptr && !m->is_root(); m = m->parent_) {
    m->events_[e].fetch_add(count, std::memory_order_relaxed);
    if (local_only) break;
  }
  EventReadScope reading(c.event_readers_);
  // seq_cst loads: see the file comment.
  if (const EventCallback* cb = g->event_callback_.load(); cb && *cb) {
    (*cb)(*g, event, true);
  }
  for (Group* m = g; m != nullptr && !m->is_root(); m = m->parent_) {
    if (const EventCallback* cb = m->event_callback_.load(); cb && *cb) {
      (*cb)(*m, event, false);
    }
    if (local_only) break;
  }
  if (const Controller::ObserverList* observers = c.event_observers_.load()) {
    for (const auto& o : *observers) o->OnMemoryEvent(*g, event);
  }
}

std::vector<std::shared_ptr<const void>> ControllerImpl::RetireForEvents(
    Controller& c, std::shared_ptr<const void> old) {
  std::vector<std::shared_ptr<const void>> freed;
  if (old != nullptr) c.retired_for_events_.push_back(std::move(old));
  // seq_cst, after the caller's seq_cst swap: see the file comment.
  if (!c.retired_for_events_.empty() && c.event_readers_.load() == 0) {
    freed.swap(c.retired_for_events_);
  }
  return freed;
}

std::vector<std::shared_ptr<const void>> ControllerImpl::PublishObservers(
    Controller& c, std::shared_ptr<const Controller::ObserverList> list) {
  c.event_observers_.store(list.get());  // seq_cst: see the file comment
  return RetireForEvents(c, ForkSafeExchange(c.observers_, std::move(list)));
}

}  // namespace internal

void Group::SetEventCallback(EventCallback callback) {
  std::shared_ptr<const void> old(event_callback_.exchange(
      callback ? new EventCallback(std::move(callback)) : nullptr));
  std::vector<std::shared_ptr<const void>> freed;  // after the unlock
  std::lock_guard<std::mutex> lock(controller_->observers_mu_);
  freed =
      internal::ControllerImpl::RetireForEvents(*controller_, std::move(old));
}

}  // namespace umemcg

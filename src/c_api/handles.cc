// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0

#include "c_api/handles.h"

#include <thread>

#include "port/fork.h"

namespace umemcg::internal {

namespace {

// The Uses this thread holds (a list through the Use objects themselves).
constinit thread_local HandleTable::Use* tls_uses = nullptr;

}  // namespace

// Fork handlers: the table's mutexes are held only for list updates, so
// they are taken before fork; user counts are repaired in the child.
class HandleTable::ForkHandler final : public ForkParticipant {
 public:
  explicit ForkHandler(HandleTable* table) : table_(table) {}
  void PrepareFork() override {
    table_->owners_mu_.lock();
    table_->mu_.lock();
  }
  void ParentAfterFork() override {
    table_->mu_.unlock();
    table_->owners_mu_.unlock();
  }
  void ChildAfterFork() override {
    table_->ChildAfterFork();
    table_->mu_.unlock();
    table_->owners_mu_.unlock();
  }

 private:
  HandleTable* const table_;
};

HandleTable& HandleTable::Global() {
  static HandleTable* table = [] {
    auto* t = new HandleTable();  // never destroyed
    static ForkHandler fork_handler(t);
    RegisterForFork(&fork_handler);
    return t;
  }();
  return *table;
}

void HandleTable::ChildAfterFork() {
  // REQUIRES: mu_ held (by this thread, from PrepareFork). Only this
  // thread exists: relaxed accesses.
  bool any = false;
  for (uint32_t index = 0; index < next_; ++index) {
    Slot* s = SlotAt(index);
    uint64_t w = s->word.load(std::memory_order_relaxed);
    const uint64_t users = w & kUserMask;
    if (users == 0) continue;
    uint64_t mine = 0;
    for (const Use* u = tls_uses; u != nullptr; u = u->next_) {
      if (u->table_ == this && u->slot_ == index) ++mine;
    }
    if (mine == users) continue;
    w = (w & ~kUserMask) | mine;
    s->word.store(w, std::memory_order_relaxed);
    if ((w & kReleased) != 0 && mine == 0) any = true;
  }
  if (any) free_after_fork_.store(true, std::memory_order_relaxed);
}

void HandleTable::FreeAfterFork() {
  std::vector<std::pair<uint32_t, uint64_t>> dead;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!free_after_fork_.load(std::memory_order_relaxed)) return;
    free_after_fork_.store(false, std::memory_order_relaxed);
    for (uint32_t index = 0; index < next_; ++index) {
      Slot* s = SlotAt(index);
      const uint64_t w = s->word.load(std::memory_order_acquire);
      // Released with no user: nobody can acquire, release or drop it, so
      // it is ours to free.
      if ((w & kReleased) != 0 && (w & kUserMask) == 0 &&
          s->payload.load(std::memory_order_acquire) != nullptr) {
        dead.emplace_back(index, w);
      }
    }
  }
  // Outside mu_ (Free takes it; a payload may destroy a controller).
  for (const auto& [index, w] : dead) Free(index, w);
}

HandleTable::Use::Use(Use&& o) noexcept : table_(o.table_), slot_(o.slot_) {
  if (table_ == nullptr) return;
  // Take o's place in this thread's list.
  prev_ = o.prev_;
  next_ = o.next_;
  if (prev_ != nullptr) {
    prev_->next_ = this;
  } else {
    tls_uses = this;
  }
  if (next_ != nullptr) next_->prev_ = this;
  o.table_ = nullptr;
  o.prev_ = o.next_ = nullptr;
}

void HandleTable::Use::Link() {
  prev_ = nullptr;
  next_ = tls_uses;
  if (next_ != nullptr) next_->prev_ = this;
  tls_uses = this;
}

void HandleTable::Use::Unlink() {
  if (prev_ != nullptr) {
    prev_->next_ = next_;
  } else {
    tls_uses = next_;
  }
  if (next_ != nullptr) next_->prev_ = prev_;
  prev_ = next_ = nullptr;
}

HandleTable::Slot* HandleTable::SlotAt(uint32_t index) const {
  Slot* chunk = chunks_[index >> kChunkBits].load(std::memory_order_acquire);
  return chunk == nullptr ? nullptr : &chunk[index & (kChunkSize - 1)];
}

uintptr_t HandleTable::Add(std::unique_ptr<HandlePayload> payload) {
  FreeAfterForkIfNeeded();
  uint32_t index;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!free_.empty()) {
      index = free_.back();
      free_.pop_back();
    } else {
      if (next_ >= kChunkSize * kMaxChunks) return 0;
      index = next_++;
      if ((index & (kChunkSize - 1)) == 0) {
        // Release: publishes the constructed slots to Acquire's load.
        chunks_[index >> kChunkBits].store(new Slot[kChunkSize],
                                           std::memory_order_release);
      }
    }
  }
  Slot* s = SlotAt(index);
  s->payload.store(payload.release(), std::memory_order_release);
  // A free slot's word is (generation, released = 0, users = 0): the
  // handle is live as soon as it is returned.
  const uint64_t gen =
      s->word.load(std::memory_order_acquire) >> kGenerationShift;
  return static_cast<uintptr_t>((gen << 24) | (index + 1));
}

HandleTable::Use HandleTable::Acquire(uintptr_t handle) {
  FreeAfterForkIfNeeded();
  Use use;
  const uint32_t index = static_cast<uint32_t>(handle & 0xffffff);
  if (index == 0 || index > kChunkSize * kMaxChunks) return use;
  Slot* s = SlotAt(index - 1);
  if (s == nullptr) return use;
  const uint64_t gen = static_cast<uint64_t>(handle) >> 24;
  uint64_t w = s->word.load(std::memory_order_acquire);
  do {
    if ((w >> kGenerationShift) != gen || (w & kReleased) != 0 ||
        (w & kUserMask) == kUserMask) {
      return use;
    }
  } while (!s->word.compare_exchange_weak(w, w + 1, std::memory_order_acquire,
                                          std::memory_order_acquire));
  use.table_ = this;
  use.slot_ = index - 1;
  use.Link();
  return use;
}

HandlePayload* HandleTable::Use::payload() const {
  return table_->SlotAt(slot_)->payload.load(std::memory_order_acquire);
}

HandleTable::Use::~Use() {
  if (table_ != nullptr) {
    Unlink();
    table_->DropUser(slot_);
  }
}

void HandleTable::DropUser(uint32_t index) {
  Slot* s = SlotAt(index);
  const uint64_t w = s->word.fetch_sub(1, std::memory_order_acq_rel) - 1;
  if ((w & kReleased) != 0 && (w & kUserMask) == 0) Free(index, w);
}

bool HandleTable::Release(uintptr_t handle) {
  FreeAfterForkIfNeeded();
  const uint32_t index = static_cast<uint32_t>(handle & 0xffffff);
  if (index == 0 || index > kChunkSize * kMaxChunks) return false;
  Slot* s = SlotAt(index - 1);
  if (s == nullptr) return false;
  const uint64_t gen = static_cast<uint64_t>(handle) >> 24;
  uint64_t w = s->word.load(std::memory_order_acquire);
  do {
    if ((w >> kGenerationShift) != gen || (w & kReleased) != 0) return false;
  } while (!s->word.compare_exchange_weak(
      w, w | kReleased, std::memory_order_acq_rel, std::memory_order_acquire));
  if ((w & kUserMask) == 0) Free(index - 1, w | kReleased);
  return true;
}

void HandleTable::Free(uint32_t index, uint64_t word) {
  Slot* s = SlotAt(index);
  delete s->payload.exchange(nullptr, std::memory_order_acq_rel);
  // Next generation, live-able again (released and users cleared). The
  // generation wraps after 2^39 reuses of one slot.
  const uint64_t next_gen = ((word >> kGenerationShift) + 1) &
                            ((uint64_t{1} << (64 - kGenerationShift)) - 1);
  s->word.store(next_gen << kGenerationShift, std::memory_order_release);
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(index);
}

}  // namespace umemcg::internal

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0

#include "c_api/handles.h"

#include <thread>

namespace umemcg::internal {

HandleTable& HandleTable::Global() {
  static HandleTable* table = new HandleTable();  // never destroyed
  return *table;
}

HandleTable::Slot* HandleTable::SlotAt(uint32_t index) const {
  Slot* chunk = chunks_[index >> kChunkBits].load(std::memory_order_acquire);
  return chunk == nullptr ? nullptr : &chunk[index & (kChunkSize - 1)];
}

uintptr_t HandleTable::Add(std::unique_ptr<HandlePayload> payload) {
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
  return use;
}

HandlePayload* HandleTable::Use::payload() const {
  return table_->SlotAt(slot_)->payload.load(std::memory_order_acquire);
}

HandleTable::Use::~Use() {
  if (table_ != nullptr) table_->DropUser(slot_);
}

void HandleTable::DropUser(uint32_t index) {
  Slot* s = SlotAt(index);
  const uint64_t w = s->word.fetch_sub(1, std::memory_order_acq_rel) - 1;
  if ((w & kReleased) != 0 && (w & kUserMask) == 0) Free(index, w);
}

bool HandleTable::Release(uintptr_t handle) {
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

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// HandleTable: generation-checked handles for the C API, so that a stale
// or released handle is an error (EBADF), never a use-after-free.
//
// A handle is an opaque integer (slot index + 1 in the low 24 bits,
// generation above) cast to a pointer type; it is never dereferenced. Each
// slot has one atomic word: [generation:39][released:1][users:24]. A call
// "acquires" its handle (generation matches, not released: users + 1) for
// its duration and releases it at the end; Release marks the handle dead
// and whoever brings users to 0 on a dead slot frees the payload, bumps
// the generation and returns the slot to the free list. Slots live in
// fixed chunks that never move.
//
// fork(): the table registers fork handlers (port/fork.h). A call in
// flight on another thread at fork time leaves its handle's user count
// raised in the child, where no thread will ever drop it: the handle could
// never be freed, and destroying its controller would wait forever. Each
// thread therefore keeps a list of the Uses it holds (on its stack); in
// the child, every slot's count is set to the forking thread's own Uses of
// it, and a released handle left with no user is freed on the child's
// next call into the table (not in the handler: freeing may destroy a
// controller).
//
// Thread safety: all methods are safe from any thread.

#ifndef UMEMCG_SRC_C_API_HANDLES_H_
#define UMEMCG_SRC_C_API_HANDLES_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace umemcg::internal {

// What a slot holds; the table owns it and deletes it on free.
struct HandlePayload {
  virtual ~HandlePayload() = default;
};

class HandleTable {
 public:
  static HandleTable& Global();

  // Stores `payload` and returns its handle (0 when the table is full).
  uintptr_t Add(std::unique_ptr<HandlePayload> payload);
  // Marks the handle released. Returns false if it was not live. The
  // payload is freed once no call uses it any more.
  bool Release(uintptr_t handle);

  // A live handle in use for the scope's duration. Lives on the stack of
  // the thread that acquired it (linked into that thread's list).
  class Use {
   public:
    Use() = default;
    Use(Use&& o) noexcept;
    Use& operator=(Use&&) = delete;
    ~Use();
    explicit operator bool() const { return table_ != nullptr; }
    HandlePayload* payload() const;

   private:
    friend class HandleTable;
    void Link();
    void Unlink();
    HandleTable* table_ = nullptr;
    uint32_t slot_ = 0;
    Use* prev_ = nullptr;  // this thread's list of live Uses
    Use* next_ = nullptr;
  };
  // Acquires `handle`; the Use is empty if the handle is stale or invalid.
  Use Acquire(uintptr_t handle);

  // A mutex for the bookkeeping of the table's users (the C API's
  // per-controller handle registries): fork-safe with the table.
  std::mutex& owners_mu() { return owners_mu_; }

 private:
  static constexpr int kChunkBits = 12;
  static constexpr uint32_t kChunkSize = 1u << kChunkBits;
  static constexpr uint32_t kMaxChunks = 4096;  // 16M handles
  static constexpr uint64_t kUserMask = (1u << 24) - 1;
  static constexpr uint64_t kReleased = uint64_t{1} << 24;
  static constexpr int kGenerationShift = 25;

  struct Slot {
    std::atomic<uint64_t> word{uint64_t{1} << kGenerationShift};
    std::atomic<HandlePayload*> payload{nullptr};
  };

  Slot* SlotAt(uint32_t index) const;
  void DropUser(uint32_t index);
  void Free(uint32_t index, uint64_t word);

  // Fork handling (see above).
  class ForkHandler;
  friend class ForkHandler;
  void ChildAfterFork();
  // Frees released handles whose users were threads of the parent.
  void FreeAfterForkIfNeeded() {
    // Relaxed: set by the child's fork handler before any other thread of
    // the child exists; re-checked under mu_.
    if (free_after_fork_.load(std::memory_order_relaxed)) FreeAfterFork();
  }
  void FreeAfterFork();
  std::atomic<bool> free_after_fork_{false};

  std::atomic<Slot*> chunks_[kMaxChunks] = {};
  std::mutex owners_mu_;
  std::mutex mu_;  // guards free_ and chunk allocation
  std::vector<uint32_t> free_;
  uint32_t next_ = 0;
};

}  // namespace umemcg::internal

#endif  // UMEMCG_SRC_C_API_HANDLES_H_

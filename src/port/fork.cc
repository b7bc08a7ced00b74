// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0

#include "port/fork.h"

#include <pthread.h>

#include <atomic>
#include <mutex>

#include "umemcg/check.h"

namespace umemcg::internal {

namespace {
constexpr int kSharedPtrStripes = 32;
}  // namespace

// The registered participants: two intrusive lists (the ordinary ones,
// then the innermost ones) guarded by `mu`, which the prepare handler holds
// until the parent's or the child's handler.
struct ForkRegistry {
  static std::mutex mu;
  static ForkParticipant* head;        // guarded by mu
  static ForkParticipant* tail;        // guarded by mu
  static ForkParticipant* inner_head;  // guarded by mu
  static ForkParticipant* inner_tail;  // guarded by mu
  static std::atomic<uint64_t> generation;
  static std::mutex stripes[kSharedPtrStripes];  // see SharedPtrStripe

  static void Link(ForkParticipant*& first, ForkParticipant*& last,
                   ForkParticipant* participant) {
    participant->prev_ = last;
    participant->next_ = nullptr;
    if (last != nullptr) {
      last->next_ = participant;
    } else {
      first = participant;
    }
    last = participant;
  }

  static void Unlink(ForkParticipant*& first, ForkParticipant*& last,
                     ForkParticipant* participant) {
    if (participant->prev_ != nullptr) {
      participant->prev_->next_ = participant->next_;
    } else {
      first = participant->next_;
    }
    if (participant->next_ != nullptr) {
      participant->next_->prev_ = participant->prev_;
    } else {
      last = participant->prev_;
    }
    participant->prev_ = participant->next_ = nullptr;
  }

  static void Prepare() {
    mu.lock();
    for (ForkParticipant* p = head; p != nullptr; p = p->next_) {
      p->PrepareFork();
    }
    for (ForkParticipant* p = inner_head; p != nullptr; p = p->next_) {
      p->PrepareFork();
    }
    for (std::mutex& m : stripes) m.lock();
  }
  static void Parent() {
    for (std::mutex& m : stripes) m.unlock();
    for (ForkParticipant* p = inner_tail; p != nullptr; p = p->prev_) {
      p->ParentAfterFork();
    }
    for (ForkParticipant* p = tail; p != nullptr; p = p->prev_) {
      p->ParentAfterFork();
    }
    mu.unlock();
  }
  static void Child() {
    // Relaxed: only this thread exists.
    generation.fetch_add(1, std::memory_order_relaxed);
    // Locked by this same thread in Prepare (the child's copies of them).
    for (std::mutex& m : stripes) m.unlock();
    for (ForkParticipant* p = inner_tail; p != nullptr; p = p->prev_) {
      p->ChildAfterFork();
    }
    for (ForkParticipant* p = tail; p != nullptr; p = p->prev_) {
      p->ChildAfterFork();
    }
    // Locked by this same thread in Prepare (the child's copy of it).
    mu.unlock();
  }
};

constinit std::mutex ForkRegistry::mu;
constinit ForkParticipant* ForkRegistry::head = nullptr;
constinit ForkParticipant* ForkRegistry::tail = nullptr;
constinit ForkParticipant* ForkRegistry::inner_head = nullptr;
constinit ForkParticipant* ForkRegistry::inner_tail = nullptr;
constinit std::atomic<uint64_t> ForkRegistry::generation{0};
constinit std::mutex ForkRegistry::stripes[kSharedPtrStripes];

std::mutex& SharedPtrStripe(const void* slot) {
  // Slots are at least 16 bytes apart: drop the low bits, then mix.
  const auto p = reinterpret_cast<uintptr_t>(slot) >> 4;
  return ForkRegistry::stripes[(p ^ (p >> 7)) % kSharedPtrStripes];
}

namespace {

constinit thread_local HeldAcrossCallback* tls_held = nullptr;

void InstallHandlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    UMEMCG_CHECK(pthread_atfork(&ForkRegistry::Prepare, &ForkRegistry::Parent,
                                &ForkRegistry::Child) == 0);
  });
}

}  // namespace

void RegisterForFork(ForkParticipant* participant) {
  InstallHandlers();
  std::lock_guard<std::mutex> lock(ForkRegistry::mu);
  ForkRegistry::Link(ForkRegistry::head, ForkRegistry::tail, participant);
}

void RegisterInnermostForFork(ForkParticipant* participant) {
  InstallHandlers();
  std::lock_guard<std::mutex> lock(ForkRegistry::mu);
  participant->innermost_ = true;
  ForkRegistry::Link(ForkRegistry::inner_head, ForkRegistry::inner_tail,
                     participant);
}

void UnregisterForFork(ForkParticipant* participant) {
  std::lock_guard<std::mutex> lock(ForkRegistry::mu);
  if (participant->innermost_) {
    ForkRegistry::Unlink(ForkRegistry::inner_head, ForkRegistry::inner_tail,
                         participant);
  } else {
    ForkRegistry::Unlink(ForkRegistry::head, ForkRegistry::tail, participant);
  }
}

uint64_t ForkGeneration() {
  // Relaxed: changes only in a child's handler, before any other thread
  // of that child exists.
  return ForkRegistry::generation.load(std::memory_order_relaxed);
}

HeldAcrossCallback::HeldAcrossCallback(const void* lock)
    : lock_(lock), prev_(tls_held) {
  tls_held = this;
}

HeldAcrossCallback::~HeldAcrossCallback() { tls_held = prev_; }

int HeldAcrossCallback::CountHeldByThisThread(const void* lock) {
  int n = 0;
  for (const HeldAcrossCallback* h = tls_held; h != nullptr; h = h->prev_) {
    if (h->lock_ == lock) ++n;
  }
  return n;
}

}  // namespace umemcg::internal

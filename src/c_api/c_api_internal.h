// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// What the C API's translation units share (c_api.cc, files.cc): the
// per-controller registry of handles, the payload bases, group handle
// lookup and string checks. Private to src/c_api/.

#ifndef UMEMCG_SRC_C_API_C_API_INTERNAL_H_
#define UMEMCG_SRC_C_API_C_API_INTERNAL_H_

#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>

#include "c_api/handles.h"
#include "umemcg/c.h"
#include "umemcg/group.h"
#include "umemcg/status.h"

namespace umemcg::internal::capi {

inline constexpr size_t kMaxNameBytes = 255;
inline constexpr size_t kMaxTextBytes = 1 << 20;

inline int Err(const Status& s) { return umemcg::ErrnoOf(s.code()); }
inline int Err(StatusCode c) { return umemcg::ErrnoOf(c); }

// The handles created under one controller, so destroy can release them.
struct Registry {
  // The table's owners mutex: one for every registry, fork-safe with it.
  std::mutex& mu = HandleTable::Global().owners_mu();
  std::unordered_set<uintptr_t> handles;  // guarded by mu
  std::atomic<int64_t> live{0};           // payloads not yet freed
};

// Base of payloads owned by a controller.
struct OwnedPayload : HandlePayload {
  explicit OwnedPayload(std::shared_ptr<Registry> r) : registry(std::move(r)) {
    registry->live.fetch_add(1, std::memory_order_relaxed);
  }
  ~OwnedPayload() override {
    {
      std::lock_guard<std::mutex> lock(registry->mu);
      registry->handles.erase(handle);
    }
    registry->live.fetch_sub(1, std::memory_order_release);
  }
  std::shared_ptr<Registry> registry;
  uintptr_t handle = 0;
};

struct GroupPayload final : OwnedPayload {
  GroupPayload(std::shared_ptr<Registry> r, GroupRef g)
      : OwnedPayload(std::move(r)), group(std::move(g)) {}
  ~GroupPayload() override { group.reset(); }
  GroupRef group;
};

template <typename T>
inline T* As(const HandleTable::Use& use) {
  return use ? dynamic_cast<T*>(use.payload()) : nullptr;
}

inline uintptr_t Register(const std::shared_ptr<Registry>& registry,
                          std::unique_ptr<OwnedPayload> payload) {
  OwnedPayload* p = payload.get();
  // Not under registry->mu: a failed Add destroys the payload, whose
  // destructor takes that lock.
  const uintptr_t h = HandleTable::Global().Add(std::move(payload));
  if (h == 0) return 0;
  // Nobody knows h yet, so p is still alive.
  p->handle = h;
  std::lock_guard<std::mutex> lock(registry->mu);
  registry->handles.insert(h);
  return h;
}

// A new handle to `g` under `registry`; 0 when the table is full.
inline uintptr_t NewGroupHandle(const std::shared_ptr<Registry>& registry,
                                Group* g) {
  return Register(registry,
                  std::make_unique<GroupPayload>(registry, GroupRef(g)));
}

template <typename T>
inline T* FromHandle(uintptr_t h) {
  return reinterpret_cast<T*>(h);
}
inline uintptr_t ToHandle(const void* p) {
  return reinterpret_cast<uintptr_t>(p);
}

inline bool ValidString(const char* s, size_t max_bytes) {
  if (s == nullptr) return false;
  const size_t n = strnlen(s, max_bytes + 1);
  return n <= max_bytes;
}

struct GroupUse {
  HandleTable::Use use;
  GroupPayload* payload = nullptr;
  Group* group() const { return payload->group.get(); }
};

inline GroupUse AcquireGroup(umemcg_group_t* h) {
  GroupUse g{HandleTable::Global().Acquire(ToHandle(h))};
  g.payload = As<GroupPayload>(g.use);
  return g;
}

inline int CheckGroupArg(umemcg_group_t* h, const GroupUse& g) {
  if (h == nullptr) return EINVAL;
  return g.payload == nullptr ? EBADF : 0;
}

inline int CopyOut(const std::string& text, char* buf, size_t len,
                   size_t* needed) {
  if (needed != nullptr) *needed = text.size() + 1;
  if (buf == nullptr && len != 0) return EINVAL;
  if (len < text.size() + 1) return ERANGE;
  std::memcpy(buf, text.data(), text.size());
  buf[text.size()] = '\0';
  return 0;
}

}  // namespace umemcg::internal::capi

#endif  // UMEMCG_SRC_C_API_C_API_INTERNAL_H_

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// MemoryResource: the slab-hook pair of memcontrol.c for pmr blocks. Kernel:
// memcg_slab_post_alloc_hook() charges obj_full_size() and stores the objcg
// in the slab's obj_exts; memcg_slab_free_hook() uncharges the stored objcg.
// Here the objcg is stored in a header in front of the block.

#include "umemcg/memory_resource.h"

#include <algorithm>
#include <cstdint>
#include <new>

#include "profile/sampler.h"
#include "umemcg/check.h"

namespace umemcg {
namespace {

// Sits right before the pointer handed out. `owner` holds an ObjCgroupRef
// (kHoldsRef set: the block pins its owner) or a plain ObjCgroup* (the
// resource's reference pins it, or null: charged to nothing).
struct BlockHeader {
  alignas(ObjCgroupRef) unsigned char owner[sizeof(ObjCgroupRef)];
  uint64_t size_flags;  // charged bytes | kHoldsRef | kSampled
};
static_assert(sizeof(ObjCgroupRef) == sizeof(ObjCgroup*));
static_assert(sizeof(BlockHeader) == 16);
constexpr uint64_t kHoldsRef = uint64_t{1} << 63;
// The heap profiler recorded the block (src/profile/sampler.h): its free
// drops the sample. Unsampled frees never reach the profiler.
constexpr uint64_t kSampled = uint64_t{1} << 62;
constexpr uint64_t kSizeMask = kSampled - 1;
constexpr size_t kMinAlign = 16;  // >= sizeof(BlockHeader), a power of two

BlockHeader* HeaderOf(const void* p) {
  return reinterpret_cast<BlockHeader*>(const_cast<void*>(p)) - 1;
}

ObjCgroup* OwnerIn(BlockHeader* h) {
  if (h->size_flags & kHoldsRef) {
    return std::launder(reinterpret_cast<ObjCgroupRef*>(h->owner))->get();
  }
  return *std::launder(reinterpret_cast<ObjCgroup**>(h->owner));
}

}  // namespace

MemoryResource::MemoryResource(Group& group, MemoryResourceOptions options)
    : upstream_(options.upstream != nullptr ? options.upstream
                                            : std::pmr::new_delete_resource()),
      flags_(options.flags),
      item_(options.item),
      active_(false),
      fixed_(ObjCgroupFor(group)) {}

MemoryResource::MemoryResource(ChargeActiveGroupTag, Group* fallback,
                               MemoryResourceOptions options)
    : upstream_(options.upstream != nullptr ? options.upstream
                                            : std::pmr::new_delete_resource()),
      flags_(options.flags),
      item_(options.item),
      active_(true),
      fixed_(fallback != nullptr ? ObjCgroupFor(*fallback) : ObjCgroupRef()) {}

void* MemoryResource::do_allocate(size_t bytes, size_t alignment) {
  const size_t align = std::max(alignment, kMinAlign);
  if (bytes > SIZE_MAX - align || bytes + align > kSizeMask) {
    throw std::bad_alloc();
  }
  const size_t total = bytes + align;

  ObjCgroup* owner = active_ ? ActiveObjCgroup() : nullptr;
  if (owner == nullptr) owner = fixed_.get();
  const bool holds_ref = owner != nullptr && owner != fixed_.get();
  if (owner != nullptr) {
    ChargeResult r = owner->Charge(Bytes(total), flags_, item_);
    if (!r.ok()) throw std::bad_alloc();
  }
  void* raw;
  try {
    raw = upstream_->allocate(total, align);
  } catch (...) {
    if (owner != nullptr) owner->Uncharge(Bytes(total), item_);
    throw;
  }
  void* p = static_cast<char*>(raw) + align;
  BlockHeader* h = HeaderOf(p);
  if (holds_ref) {
    // The active scope (or default) holds a reference, so taking one is
    // allowed (ObjCgroupRef's REQUIRES).
    new (h->owner) ObjCgroupRef(owner);
  } else {
    new (h->owner) ObjCgroup*(owner);
  }
  uint64_t sampled = 0;
  // One thread-local subtraction and a branch unless the countdown expired.
  if (owner != nullptr && profile::CountdownExpired(total) &&
      profile::SampleSlow(owner, p, total, __builtin_return_address(0))) {
    sampled = kSampled;
  }
  h->size_flags = total | (holds_ref ? kHoldsRef : 0) | sampled;
  return p;
}

void MemoryResource::do_deallocate(void* p, size_t bytes, size_t alignment) {
  const size_t align = std::max(alignment, kMinAlign);
  BlockHeader* h = HeaderOf(p);
  const uint64_t total = h->size_flags & kSizeMask;
  // pmr requires the allocation's size and alignment back.
  UMEMCG_DCHECK(total == bytes + align);
  (void)bytes;
  ObjCgroup* owner = OwnerIn(h);
  if (h->size_flags & kSampled) profile::Forget(p);
  // Uncharges the owner recorded at allocation: after its group's removal
  // the objcg points at the parent, which is uncharged instead.
  if (owner != nullptr) owner->Uncharge(Bytes(total), item_);
  if (h->size_flags & kHoldsRef) {
    std::launder(reinterpret_cast<ObjCgroupRef*>(h->owner))->~ObjCgroupRef();
  }
  upstream_->deallocate(static_cast<char*>(p) - align, total, align);
}

bool MemoryResource::do_is_equal(
    const std::pmr::memory_resource& other) const noexcept {
  return this == &other;
}

ObjCgroup* MemoryResource::OwnerOf(const void* p) {
  return OwnerIn(HeaderOf(p));
}

size_t MemoryResource::ChargedSizeOf(const void* p) {
  return HeaderOf(p)->size_flags & kSizeMask;
}

MemoryResource& DefaultActiveResource() {
  // Leaked on purpose: usable from static destructors and at thread exit.
  static MemoryResource* const resource =
      new MemoryResource(kChargeActiveGroup, nullptr);
  return *resource;
}

}  // namespace umemcg

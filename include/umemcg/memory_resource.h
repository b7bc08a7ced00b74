// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// MemoryResource: a std::pmr::memory_resource that charges every block to a
// group through the group's ObjCgroup (byte accounting through the per-CPU
// object stock, obj_cgroup.h), and Allocator<T>, the same for containers
// without pmr. The kernel counterpart is the slab hook pair
// memcg_slab_post_alloc_hook / memcg_slab_free_hook: the owner is recorded
// with the object, so a free uncharges the group that was charged, whichever
// thread frees it and even after that group was removed (its objcg then
// points to the parent, which is uncharged instead).
//
//   umemcg::MemoryResource res(*tenant);              // fixed group
//   std::pmr::unordered_map<int, std::pmr::string> m(&res);
//
//   umemcg::MemoryResource per_request(umemcg::kChargeActiveGroup,
//                                      &ctrl->root());  // active group
//
// Block layout. Each block is preceded by a 16-byte header (the owner objcg
// and the charged size) placed so that the returned pointer has the
// requested alignment: the upstream block is `bytes + max(alignment, 16)`
// bytes aligned to max(alignment, 16), and that whole size is charged (the
// header is the tenant's overhead, as the kernel charges obj_full_size()).
//
// Owner lifetime. In fixed mode the resource holds the objcg reference its
// blocks rely on (the pmr contract: a resource outlives its blocks). In
// active mode a block whose owner is not the fallback's objcg takes its own
// reference (one atomic increment on the objcg's reference line at
// allocation, one decrement at deallocation), since the scope that named
// the owner may be gone when the block is freed.
//
// Failure. A charge runs the full charge path allowed by the options' flags
// (default: reclaimers, draining all stocks, retries, the OOM handler); if it
// still does not fit, allocate() throws std::bad_alloc (the pmr convention)
// and nothing stays charged. An upstream exception is passed on after the
// charge is undone.
//
// Thread safety: a MemoryResource may be used from any number of threads at
// once; a block may be deallocated on a thread other than the allocating
// one. allocate/deallocate take no lock of their own; the charge path
// behaves as ObjCgroup::Charge (no blocking lock on a stock hit).

#ifndef UMEMCG_MEMORY_RESOURCE_H_
#define UMEMCG_MEMORY_RESOURCE_H_

#include <cstddef>
#include <limits>
#include <memory_resource>
#include <new>
#include <type_traits>

#include "umemcg/active.h"
#include "umemcg/export.h"
#include "umemcg/group.h"
#include "umemcg/obj_cgroup.h"
#include "umemcg/stats.h"

namespace umemcg {

struct MemoryResourceOptions {
  // Where the memory comes from. Null: std::pmr::new_delete_resource().
  // Not owned; must outlive the resource.
  std::pmr::memory_resource* upstream = nullptr;
  // How hard a charge may try (group.h). kChargeDefault reclaims and may
  // sleep for memory.high; add ChargeFlags::kNoThrottle for event loops.
  ChargeFlags flags = kChargeDefault;
  // The byte statistic charged blocks are counted in (memory.stat).
  StatItem item = StatItem::kSlabUnreclaimable;
};

// Selects the active-group constructor.
struct ChargeActiveGroupTag {
  explicit ChargeActiveGroupTag() = default;
};
inline constexpr ChargeActiveGroupTag kChargeActiveGroup{};

class UMEMCG_EXPORT MemoryResource final : public std::pmr::memory_resource {
 public:
  // Charges every block to `group` (its nearest ancestor's objcg if it is
  // already removed). The resource holds a reference until destroyed.
  explicit MemoryResource(Group& group, MemoryResourceOptions options = {});
  // Charges each block to the allocating thread's active group
  // (ActiveObjCgroup(), active.h), or to `fallback` when there is none; with
  // a null fallback such blocks are charged to nothing (owner null).
  MemoryResource(ChargeActiveGroupTag, Group* fallback,
                 MemoryResourceOptions options = {});
  // REQUIRES: every block allocated here was deallocated.
  ~MemoryResource() override = default;

  MemoryResource(const MemoryResource&) = delete;
  MemoryResource& operator=(const MemoryResource&) = delete;

  // The fixed group's objcg, or the fallback's (null when none).
  ObjCgroup* objcg() const { return fixed_.get(); }
  bool charges_active_group() const { return active_; }

  // The objcg a live block `p` of some MemoryResource is charged to (null
  // when charged to nothing) and the bytes charged for it.
  // REQUIRES: `p` came from allocate() on a MemoryResource, not yet freed.
  static ObjCgroup* OwnerOf(const void* p);
  static size_t ChargedSizeOf(const void* p);

 protected:
  void* do_allocate(size_t bytes, size_t alignment) override;
  void do_deallocate(void* p, size_t bytes, size_t alignment) override;
  bool do_is_equal(
      const std::pmr::memory_resource& other) const noexcept override;

 private:
  std::pmr::memory_resource* const upstream_;
  const ChargeFlags flags_;
  const StatItem item_;
  const bool active_;
  ObjCgroupRef fixed_;  // fixed group or fallback; may be empty (active)
};

// A process-wide resource in active-group mode without a fallback: blocks
// are charged to the allocating thread's active group, or to nothing.
// Never destroyed (usable from static destructors).
UMEMCG_EXPORT MemoryResource& DefaultActiveResource();

// An STL allocator over a MemoryResource, for containers without pmr. The
// default-constructed allocator uses DefaultActiveResource(). Allocators
// compare equal when their resources are the same object; they propagate
// on container copy, move and swap, so a container's memory always goes
// back to the resource (and owner) it came from.
// Thread safety: as MemoryResource.
template <class T>
class Allocator {
 public:
  using value_type = T;
  using propagate_on_container_copy_assignment = std::true_type;
  using propagate_on_container_move_assignment = std::true_type;
  using propagate_on_container_swap = std::true_type;

  Allocator() noexcept : resource_(&DefaultActiveResource()) {}
  // REQUIRES: `resource` outlives every block allocated through this.
  Allocator(MemoryResource* resource) noexcept  // NOLINT: implicit, as pmr
      : resource_(resource) {}
  template <class U>
  Allocator(const Allocator<U>& other) noexcept  // NOLINT: rebinding
      : resource_(other.resource()) {}

  // Throws std::bad_array_new_length for sizes that overflow, and
  // std::bad_alloc when the charge fails (see MemoryResource).
  T* allocate(size_t n) {
    if (n > std::numeric_limits<size_t>::max() / sizeof(T)) {
      throw std::bad_array_new_length();
    }
    return static_cast<T*>(resource_->allocate(n * sizeof(T), alignof(T)));
  }
  void deallocate(T* p, size_t n) noexcept {
    resource_->deallocate(p, n * sizeof(T), alignof(T));
  }

  MemoryResource* resource() const { return resource_; }
  // Containers copied from one using this allocator keep its resource.
  Allocator select_on_container_copy_construction() const { return *this; }

  template <class U>
  friend bool operator==(const Allocator& a, const Allocator<U>& b) noexcept {
    return a.resource() == b.resource();
  }

 private:
  MemoryResource* resource_;
};

}  // namespace umemcg

#endif  // UMEMCG_MEMORY_RESOURCE_H_

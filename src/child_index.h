// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// ChildIndex: the controller's hash index of its online groups by (parent,
// name), so that finding a child by name (CreateGroup's duplicate check,
// Lookup's path walk, the mount and the metrics reader) costs the same with
// ten siblings or a hundred thousand. Chained through Group::index_next_
// (no allocation per group); the bucket array doubles when the index holds
// more groups than buckets (amortised O(1) per insertion) and never
// shrinks.
//
// Thread safety: none; the controller's tree lock guards it (exclusive
// for Insert / Erase, shared for Find).

#ifndef UMEMCG_SRC_CHILD_INDEX_H_
#define UMEMCG_SRC_CHILD_INDEX_H_

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace umemcg {
class Group;
namespace internal {

class ChildIndex {
 public:
  ChildIndex();

  // The child of `parent` named `name`, or null. Adds the number of
  // entries compared to *probes.
  Group* Find(const Group* parent, std::string_view name,
              uint64_t* probes) const;
  // REQUIRES: no child of g's parent has g's name in the index.
  void Insert(Group* g);
  // REQUIRES: g is in the index. Adds the entries visited to *probes.
  void Erase(Group* g, uint64_t* probes);
  size_t size() const { return size_; }

 private:
  static size_t Hash(const Group* parent, std::string_view name);
  size_t Bucket(const Group* parent, std::string_view name) const {
    return Hash(parent, name) & (buckets_.size() - 1);
  }
  void Grow();

  std::vector<Group*> buckets_;  // size a power of two
  size_t size_ = 0;
};

}  // namespace internal
}  // namespace umemcg

#endif  // UMEMCG_SRC_CHILD_INDEX_H_

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0

#include "child_index.h"

#include <functional>

#include "umemcg/group.h"

namespace umemcg::internal {

ChildIndex::ChildIndex() : buckets_(64, nullptr) {}

size_t ChildIndex::Hash(const Group* parent, std::string_view name) {
  // The parent's id (unique, never reused) mixed into the name's hash.
  const uint64_t h = std::hash<std::string_view>{}(name) ^
                     (parent->id_ * 0x9e3779b97f4a7c15ull);
  return static_cast<size_t>(h ^ (h >> 29));
}

Group* ChildIndex::Find(const Group* parent, std::string_view name,
                        uint64_t* probes) const {
  for (Group* g = buckets_[Bucket(parent, name)]; g != nullptr;
       g = g->index_next_) {
    ++*probes;
    if (g->parent_ == parent && g->name_ == name) return g;
  }
  return nullptr;
}

void ChildIndex::Insert(Group* g) {
  if (size_ >= buckets_.size()) Grow();
  Group*& head = buckets_[Bucket(g->parent_, g->name_)];
  g->index_next_ = head;
  head = g;
  ++size_;
}

void ChildIndex::Erase(Group* g, uint64_t* probes) {
  for (Group** link = &buckets_[Bucket(g->parent_, g->name_)]; *link != nullptr;
       link = &(*link)->index_next_) {
    ++*probes;
    if (*link == g) {
      *link = g->index_next_;
      g->index_next_ = nullptr;
      --size_;
      return;
    }
  }
}

void ChildIndex::Grow() {
  std::vector<Group*> old(buckets_.size() * 2, nullptr);
  old.swap(buckets_);
  for (Group* head : old) {
    while (head != nullptr) {
      Group* next = head->index_next_;
      Group*& b = buckets_[Bucket(head->parent_, head->name_)];
      head->index_next_ = b;
      b = head;
      head = next;
    }
  }
}

}  // namespace umemcg::internal

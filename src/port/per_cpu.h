// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// PerCpu<T>: one T per CPU shard, each on its own cache lines so that two
// CPUs never write the same line (no false sharing between shards).
//
// Thread safety: the array itself is immutable after construction; access
// to each T is the caller's business (shards carry their own TryLock).

#ifndef UMEMCG_SRC_PORT_PER_CPU_H_
#define UMEMCG_SRC_PORT_PER_CPU_H_

#include <cstddef>
#include <memory>

namespace umemcg::internal {

inline constexpr size_t kCacheLineSize = 64;

template <typename T>
class PerCpu {
  struct alignas(kCacheLineSize) Shard {
    T value;
  };

 public:
  // Bytes from one shard to the next (a multiple of the cache line).
  static constexpr size_t kStride = sizeof(Shard);

  explicit PerCpu(int nr_shards)
      : nr_shards_(nr_shards), shards_(new Shard[nr_shards]) {}

  int size() const { return nr_shards_; }
  T& operator[](int shard) { return shards_[shard].value; }
  const T& operator[](int shard) const { return shards_[shard].value; }

 private:
  const int nr_shards_;
  std::unique_ptr<Shard[]> shards_;
};

}  // namespace umemcg::internal

#endif  // UMEMCG_SRC_PORT_PER_CPU_H_

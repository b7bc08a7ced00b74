// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Pages and Bytes: strong unit types for every quantity of memory that
// crosses the umemcg API (cf. tcmalloc's Length and Bytes). A page is
// kPageSize bytes, as PAGE_SIZE on x86-64. Raw integers never cross the API:
// construct with Pages{n} / Bytes{n} and read back with raw().
//
// Arithmetic on both types is checked in debug builds (UMEMCG_DCHECK):
// subtraction below zero and overflow abort there; release builds wrap as the
// underlying unsigned integer would, and the library clamps where the kernel
// clamps (see page_counter.h).
//
// Thread safety: plain values; safe to copy between threads.

#ifndef UMEMCG_UNITS_H_
#define UMEMCG_UNITS_H_

#include <compare>
#include <cstdint>

#include "umemcg/check.h"

namespace umemcg {

// Bytes per page. Fixed: the kernel's formulas (memory.high delay, stats
// thresholds) are expressed in pages of this size.
inline constexpr uint64_t kPageSize = 4096;
inline constexpr int kPageShift = 12;

// A count of pages.
class Pages {
 public:
  constexpr Pages() = default;
  constexpr explicit Pages(uint64_t n) : n_(n) {}

  constexpr uint64_t raw() const { return n_; }
  // Size in bytes. REQUIRES: raw() <= UINT64_MAX / kPageSize.
  constexpr uint64_t in_bytes() const { return n_ << kPageShift; }

  constexpr auto operator<=>(const Pages&) const = default;

  constexpr Pages& operator+=(Pages o) {
    UMEMCG_DCHECK(n_ + o.n_ >= n_);
    n_ += o.n_;
    return *this;
  }
  constexpr Pages& operator-=(Pages o) {
    UMEMCG_DCHECK(n_ >= o.n_);
    n_ -= o.n_;
    return *this;
  }
  friend constexpr Pages operator+(Pages a, Pages b) { return a += b; }
  friend constexpr Pages operator-(Pages a, Pages b) { return a -= b; }

 private:
  uint64_t n_ = 0;
};

// A count of bytes.
class Bytes {
 public:
  constexpr Bytes() = default;
  constexpr explicit Bytes(uint64_t n) : n_(n) {}

  constexpr uint64_t raw() const { return n_; }
  // Whole pages, rounded down (the kernel's memparse floor) / up.
  constexpr Pages floor_pages() const { return Pages(n_ >> kPageShift); }
  constexpr Pages ceil_pages() const {
    return Pages((n_ >> kPageShift) + ((n_ & (kPageSize - 1)) != 0));
  }

  constexpr auto operator<=>(const Bytes&) const = default;

  constexpr Bytes& operator+=(Bytes o) {
    UMEMCG_DCHECK(n_ + o.n_ >= n_);
    n_ += o.n_;
    return *this;
  }
  constexpr Bytes& operator-=(Bytes o) {
    UMEMCG_DCHECK(n_ >= o.n_);
    n_ -= o.n_;
    return *this;
  }
  friend constexpr Bytes operator+(Bytes a, Bytes b) { return a += b; }
  friend constexpr Bytes operator-(Bytes a, Bytes b) { return a -= b; }

 private:
  uint64_t n_ = 0;
};

constexpr Bytes ToBytes(Pages p) { return Bytes(p.in_bytes()); }

// The largest page count a counter holds; also the value of "max" (no
// limit). Kernel: PAGE_COUNTER_MAX = LONG_MAX / PAGE_SIZE on 64-bit.
inline constexpr Pages kPageCounterMax{INT64_MAX / kPageSize};

}  // namespace umemcg

#endif  // UMEMCG_UNITS_H_

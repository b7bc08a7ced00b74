// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The two functions of the sampling math (sampler.cc) without libm: the
// sampler is compiled into libumemcg-preload.so, which depends on libc
// alone (docs/preload.md), and glibc keeps log and expm1 in libm.so.6, a
// library every preloaded process would then load (measured: /bin/true
// start-up 10-13% slower). Accuracy: within a few ulps of glibc's over the
// arguments the sampler passes (sample_math_test checks it); the sampling
// needs far less.
//
// Thread safety: pure functions.

#ifndef UMEMCG_SRC_PROFILE_SAMPLE_MATH_H_
#define UMEMCG_SRC_PROFILE_SAMPLE_MATH_H_

#include <cstdint>
#include <cstring>

namespace umemcg::profile {

namespace sample_math_internal {

inline uint64_t Bits(double x) {
  uint64_t b;
  std::memcpy(&b, &x, sizeof(b));
  return b;
}
inline double FromBits(uint64_t b) {
  double x;
  std::memcpy(&x, &b, sizeof(x));
  return x;
}

constexpr double kLn2Hi = 6.93147180369123816490e-01;  // ln 2, top bits
constexpr double kLn2Lo = 1.90821492927058770002e-10;  // ln 2 - kLn2Hi
constexpr double kLn2 = 6.93147180559945309417e-01;
constexpr double kSqrt2 = 1.41421356237309504880;

// e^y - 1 for |y| <= 0.5 (Horner form of the Taylor series; the term
// after the last is below 2^-60 of the result).
inline double Expm1Small(double y) {
  double p = 1.0;
  for (int k = 18; k >= 2; --k) p = 1.0 + y * p / k;
  return y * p;
}

}  // namespace sample_math_internal

// Natural logarithm. REQUIRES: x > 0 and finite.
inline double Log(double x) {
  using namespace sample_math_internal;
  uint64_t b = Bits(x);
  int e = static_cast<int>((b >> 52) & 0x7ff);
  if (e == 0) {  // subnormal: scale into the normal range first
    b = Bits(x * 0x1.0p54);
    e = static_cast<int>((b >> 52) & 0x7ff) - 54;
  }
  e -= 1023;
  // x = m * 2^e with m in [sqrt(1/2), sqrt(2)).
  double m = FromBits((b & 0x000fffffffffffffull) | 0x3ff0000000000000ull);
  if (m >= kSqrt2) {
    m *= 0.5;
    ++e;
  }
  // log(m) = 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.1716: the series
  // 2 (s + s^3/3 + ... + s^21/21); the next term is below 2^-55 of it.
  const double s = (m - 1.0) / (m + 1.0);
  const double s2 = s * s;
  double p = 1.0 / 21;
  for (int k = 19; k >= 1; k -= 2) p = p * s2 + 1.0 / k;
  return 2.0 * s * p + static_cast<double>(e) * kLn2;
}

// 1 - e^-x, the probability that a Poisson process of rate 1 has a point
// in [0, x). REQUIRES: x >= 0 (NaN and negatives are not handled).
inline double OneMinusExpNeg(double x) {
  using namespace sample_math_internal;
  if (x <= 0.5) return -Expm1Small(-x);  // exact to a few ulps near 0
  // Past 40, e^-x < 2^-57: 1 - e^-x rounds to 1.
  if (x > 40.0) return 1.0;
  // e^-x = 2^-k e^-r, r = x - k ln 2 in [-ln2/2, ln2/2], k <= 58.
  const int k = static_cast<int>(x * (1.0 / kLn2) + 0.5);
  const double r = (x - k * kLn2Hi) - k * kLn2Lo;
  const double er = 1.0 + Expm1Small(-r);
  const double scale = FromBits(static_cast<uint64_t>(1023 - k) << 52);
  return 1.0 - er * scale;
}

}  // namespace umemcg::profile

#endif  // UMEMCG_SRC_PROFILE_SAMPLE_MATH_H_

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// libFuzzer target for the memory.pressure parsers (umemcg/pressure.h).
// The first byte picks what the rest drives:
//   0 (and anything not below): ParsePressureTrigger against a reference
//     written out from the kernel's psi_trigger_create: vsscanf with "some
//     %u %u" / "full %u %u" over the text up to its first NUL (format
//     whitespace and %u skip the kernel's isspace, %u takes no sign and
//     wraps), then the window range and the threshold checks. Same
//     verdict, same values;
//   1: ParsePressureFile: whatever it accepts prints back (FormatPressure)
//     to text it parses to the same values;
//   2: FormatPressure of values taken from the input parses back to them;
//   3: a write to a memory.pressure handle of a real group: the status is
//     the parser's (EINVAL for text that is not UTF-8; kernfs's: nothing
//     for an empty write, E2BIG past a page), and a second write on an
//     armed handle EBUSY.
// Build with the `fuzz` preset (clang).

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "umemcg/umemcg.h"

namespace {

using umemcg::PressureLine;
using umemcg::PressureState;
using umemcg::PressureStats;
using umemcg::PressureTriggerSpec;

// The kernel's ctype isspace: ' ', '\t'..'\r', and 0xA0.
bool RefSpace(unsigned char c) {
  return c == ' ' || (c >= 9 && c <= 13) || c == 0xA0;
}

// The kernel's vsscanf(buf, "<word> %u %u", &a, &b) == 2, over a C string.
bool RefScan(const char* str, const char* word, uint32_t* a, uint32_t* b) {
  for (const char* w = word; *w != '\0'; ++w, ++str) {
    if (*str != *w) return false;  // a literal must match exactly
  }
  uint32_t* outs[2] = {a, b};
  for (uint32_t* out : outs) {
    // The format's space, then the conversion's own skip: both skip any
    // run of whitespace.
    while (RefSpace(static_cast<unsigned char>(*str))) ++str;
    if (*str < '0' || *str > '9') return false;  // no sign for %u
    unsigned long long v = 0;                    // wraps modulo 2^64
    while (*str >= '0' && *str <= '9') {
      v = v * 10ULL + static_cast<unsigned long long>(*str - '0');
      ++str;
    }
    *out = static_cast<uint32_t>(v);  // stored in an unsigned int
  }
  return true;
}

// nullopt: EINVAL.
std::optional<PressureTriggerSpec> Reference(std::string_view text) {
  const std::string c(text.substr(0, text.find('\0')));
  uint32_t threshold = 0;
  uint32_t window = 0;
  PressureTriggerSpec spec;
  if (RefScan(c.c_str(), "some", &threshold, &window)) {
    spec.state = PressureState::kSome;
  } else if (RefScan(c.c_str(), "full", &threshold, &window)) {
    spec.state = PressureState::kFull;
  } else {
    return std::nullopt;
  }
  if (window < 500000 || window > 10000000) return std::nullopt;
  if (threshold == 0 || threshold > window) return std::nullopt;
  spec.threshold = std::chrono::microseconds(threshold);
  spec.window = std::chrono::microseconds(window);
  return spec;
}

void CheckTrigger(std::string_view text) {
  const auto got = umemcg::ParsePressureTrigger(text);
  const auto want = Reference(text);
  if (got.ok() != want.has_value()) std::abort();
  if (!got.ok()) {
    if (got.status().code() != umemcg::StatusCode::kInvalidArgument) {
      std::abort();
    }
    return;
  }
  const PressureTriggerSpec& g = got.value();
  if (g.state != want->state || g.threshold != want->threshold ||
      g.window != want->window) {
    std::abort();
  }
}

bool SameLine(const PressureLine& a, const PressureLine& b) {
  return a.avg10 == b.avg10 && a.avg60 == b.avg60 && a.avg300 == b.avg300 &&
         a.total_us == b.total_us;
}

bool Same(const PressureStats& a, const PressureStats& b) {
  return SameLine(a.some, b.some) && SameLine(a.full, b.full);
}

void CheckFileRoundTrip(std::string_view text) {
  const auto parsed = umemcg::ParsePressureFile(text);
  if (!parsed) return;
  const auto again = umemcg::ParsePressureFile(umemcg::FormatPressure(*parsed));
  if (!again || !Same(*again, *parsed)) std::abort();
}

void CheckFormat(const uint8_t* data, size_t size) {
  uint64_t v[8] = {};
  std::memcpy(v, data, std::min(size, sizeof v));
  PressureStats s;
  s.some = {v[0], v[1], v[2], v[3]};
  s.full = {v[4], v[5], v[6], v[7]};
  const auto parsed = umemcg::ParsePressureFile(umemcg::FormatPressure(s));
  if (!parsed || !Same(*parsed, s)) std::abort();
}

void CheckFileWrite(std::string_view text) {
  static umemcg::Controller* ctrl = [] {
    umemcg::ControllerOptions o;
    o.cpu_source = umemcg::CpuSource::kFake;
    o.nr_cpus = 2;
    return umemcg::Controller::Create(o).value().release();  // kept
  }();
  static umemcg::GroupRef g =
      ctrl->CreateGroup(ctrl->root(), "g").value();  // kept
  auto f = umemcg::MemoryFile::Open(*g, "memory.pressure").value();
  const umemcg::Status st = f->Write(text);
  // kernfs: a write of no bytes reaches no handler; one over a page is
  // refused whole (E2BIG).
  if (text.empty()) {
    if (!st.ok() || f->HasPressureTrigger()) std::abort();
    return;
  }
  if (text.size() > 4096) {
    if (st.code() != umemcg::StatusCode::kTooBig) std::abort();
    return;
  }
  const auto want = Reference(text);
  // The file layer takes the text up to a NUL and refuses non-UTF-8 text
  // (EINVAL, as the parser's refusals): an accepted write is one the
  // reference accepts.
  if (st.ok() && !want) std::abort();
  bool ascii = true;
  for (char c : text.substr(0, text.find('\0'))) {
    ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  }
  if (ascii && want && !st.ok()) std::abort();
  if (!st.ok() && st.code() != umemcg::StatusCode::kInvalidArgument) {
    std::abort();
  }
  if (st.ok()) {
    if (!f->HasPressureTrigger()) std::abort();
    if (f->Write(text).code() != umemcg::StatusCode::kBusy) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  const std::string_view text(reinterpret_cast<const char*>(data + 1),
                              size - 1);
  switch (mode) {
    case 1:
      CheckFileRoundTrip(text);
      break;
    case 2:
      CheckFormat(data + 1, size - 1);
      break;
    case 3:
      CheckFileWrite(text);
      break;
    default:
      CheckTrigger(text);
      break;
  }
  return 0;
}

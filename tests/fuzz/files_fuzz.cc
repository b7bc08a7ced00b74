// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// libFuzzer target for the memory file interface: arbitrary bytes drive
// group creation/removal, charges and WriteFile/ReadFile on random groups
// and file names (known and arbitrary), and the tree's invariants are
// checked after every input. Build with the `fuzz` preset (clang).
//
// Input format (each step consumes bytes; missing bytes read as 0):
//   op byte: 0 write, 1 read, 2 create child, 3 remove, 4 charge,
//            5 uncharge everything the fuzzer charged, 6 drain stocks
//   group byte: index into the groups made (removed ones included)
//   for read/write: name byte (index into the known names, or an
//   arbitrary name from the input when >= the count), then a length byte
//   and that many text bytes; length 255 writes 4097 or more bytes (the
//   text repeated), which must be refused with E2BIG.
//   for create: name byte (a known file name when < the count, which must
//   be refused with EEXIST where the parent has that file; else that many
//   % 8 bytes of input, or 256 bytes when the byte is 255, which must be
//   refused with ENAMETOOLONG); a name with '\n' must be refused with
//   EINVAL. tests/fuzz/dict/files.dict holds the names and values.
// cgroup.threads / cgroup.procs: the fuzzer's thread is the only thread
// there is; a write that succeeds must have made the group its default,
// one that fails must have left its default alone, and the default is
// cleared after each input (it holds the group).

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "umemcg/active.h"
#include "umemcg/umemcg.h"

namespace {

using umemcg::Controller;
using umemcg::Group;
using umemcg::GroupRef;
using umemcg::Pages;

class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return pos_ >= size_; }
  uint8_t Byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  std::string_view Text(size_t n) {
    n = std::min(n, size_ - pos_);
    std::string_view s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

const char* const kNames[] = {
    "memory.current",    "memory.min",          "memory.low",
    "memory.high",       "memory.max",          "memory.peak",
    "memory.events",     "memory.events.local", "memory.stat",
    "memory.oom.group",  "memory.reclaim",      "memory.stock",
    "memory.stat_error", "cgroup.controllers",  "cgroup.subtree_control",
    "cgroup.events",     "cgroup.stat",         "memory.pressure",
    "cgroup.procs",      "cgroup.threads",
};
constexpr size_t kNumNames = sizeof(kNames) / sizeof(kNames[0]);

void Fail(const std::string& what) {
  std::fprintf(stderr, "invariant violated: %s\n", what.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The groups' own statistics are not charged (charge_group_metadata,
  // tested in group_metadata_test): the end must find exactly what the
  // fuzzer charged, with its groups still held.
  auto ctrl = Controller::Create({.batch = 8,
                                  .stock_slots = 2,
                                  .cpu_source = umemcg::CpuSource::kFake,
                                  .nr_cpus = 2,
                                  .charge_group_metadata = false})
                  .value();
  struct Live {
    GroupRef group;
    uint64_t charged = 0;
  };
  std::vector<Live> groups;
  groups.push_back({GroupRef(&ctrl->root()), 0});
  // Known to cgroup.threads / cgroup.procs from the start, so that a write
  // of this process's PID moves it whatever the inputs before.
  umemcg::RegisterThread();
  Input in(data, size);
  int steps = 0;
  while (!in.empty() && ++steps <= 64) {
    const uint8_t op = in.Byte() % 7;
    Live& live = groups[in.Byte() % groups.size()];
    Group& g = *live.group;
    umemcg::SetFakeCpu(steps % 2);
    switch (op) {
      case 0:
      case 1: {
        const uint8_t which = in.Byte();
        std::string name = which < kNumNames ? kNames[which]
                                             : std::string(in.Text(which % 24));
        const size_t len = in.Byte();
        std::string text(in.Text(len));
        if (op == 0 && len == 255) {
          // Past kernfs's atomic_write_len: E2BIG whatever the text.
          const std::string unit = text.empty() ? std::string("1") : text;
          while (text.size() <= 4096) text += unit;
          const umemcg::Status s = g.WriteFile(name, text);
          if (s.ok() || (s.code() != umemcg::StatusCode::kTooBig &&
                         s.code() != umemcg::StatusCode::kNotFound &&
                         s.code() != umemcg::StatusCode::kPermissionDenied &&
                         s.code() != umemcg::StatusCode::kFailedPrecondition)) {
            Fail("a write over 4096 bytes was not refused with E2BIG: " + name +
                 " " + s.ToString());
          }
        } else if (op == 0) {
          const bool moves = name == "cgroup.threads" || name == "cgroup.procs";
          Group* before = umemcg::ThreadDefaultGroup();
          const umemcg::Status s = g.WriteFile(name, text);
          const bool empty = text.substr(0, text.find('\0')).empty();
          if (moves && s.ok() && !empty && umemcg::ThreadDefaultGroup() != &g) {
            Fail("a write to " + name + " did not move the thread");
          }
          if (moves && !s.ok() && umemcg::ThreadDefaultGroup() != before) {
            Fail("a refused write to " + name + " moved the thread");
          }
        } else {
          umemcg::StatusOr<std::string> r = g.ReadFile(name);
          // The task lists are empty with no task (as in the kernel).
          const bool list = name == "cgroup.threads" || name == "cgroup.procs";
          if (r.ok() && !(list && r.value().empty()) &&
              (r.value().empty() || r.value().back() != '\n')) {
            Fail("file text must end with a newline: " + name);
          }
          // Limits read back must parse to the same value.
          if (r.ok() && (name == "memory.max" || name == "memory.high" ||
                         name == "memory.min" || name == "memory.low")) {
            auto again = umemcg::ParseMemoryLimit(r.value());
            if (!again.ok() ||
                umemcg::FormatMemoryLimit(again.value()) != r.value()) {
              Fail("limit does not round-trip: " + name + " " + r.value());
            }
          }
        }
        break;
      }
      case 2:
        if (groups.size() < 16 && g.online()) {
          const uint8_t which = in.Byte();
          const std::string name =
              which < kNumNames ? std::string(kNames[which])
              : which == 255    ? std::string(256, 'n')
                                : std::string(in.Text(which % 8));
          bool is_file = false;
          for (const std::string& f : g.ListFiles()) is_file |= f == name;
          auto c = ctrl->CreateGroup(g, name);
          const umemcg::StatusCode code = c.status().code();
          if (is_file && code != umemcg::StatusCode::kAlreadyExists) {
            Fail("a group named as a control file: " + name);
          }
          if (name.find('\n') != std::string::npos &&
              code != umemcg::StatusCode::kInvalidArgument) {
            Fail("a group name with a newline was not refused with EINVAL");
          }
          if (name.size() > 255 && code != umemcg::StatusCode::kNameTooLong) {
            Fail("a 256-byte group name was not refused with ENAMETOOLONG");
          }
          if (c.ok()) groups.push_back({c.value(), 0});
        }
        break;
      case 3:
        (void)ctrl->RemoveGroup(g);
        break;
      case 4: {
        const uint64_t n = in.Byte() % 40;
        if (g.TryCharge(Pages(n), umemcg::ChargeFlags::kNone).ok() &&
            !g.is_root()) {
          live.charged += n;
        }
        break;
      }
      case 5:
        g.Uncharge(Pages(live.charged));
        live.charged = 0;
        break;
      case 6:
        ctrl->DrainAllStocks(ctrl->root());
        break;
    }
    umemcg::Status s = ctrl->CheckInvariants();
    if (!s.ok()) Fail(s.ToString());
    // cgroup.stat: every group the fuzzer made is online or dying.
    int64_t online = 0;
    for (const Live& l : groups) online += l.group->online() ? 1 : 0;
    if (ctrl->root().nr_descendants() != online - 1) {
      Fail("nr_descendants is not the number of online groups");
    }
    // The removed ones are dying: the fuzzer still holds them.
    if (ctrl->root().nr_dying_descendants() !=
        static_cast<int64_t>(groups.size()) - online) {
      Fail("nr_dying_descendants is not the number of removed groups");
    }
    if (ctrl->underflows() != 0) Fail("underflow");
  }
  // The thread's default holds a group of this controller.
  umemcg::SetThreadDefaultGroup(nullptr);
  // Everything charged must come back.
  for (Live& l : groups) l.group->Uncharge(Pages(l.charged));
  ctrl->DrainAllStocks(ctrl->root());
  if (ctrl->root().usage() != Pages(0)) Fail("usage left at the end");
  groups.clear();
  return 0;
}

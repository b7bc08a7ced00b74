// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The group files: one table of {name, root?, read, write} and a handler
// per file, re-expressing the kernel's memory_*_show / memory_*_write
// (mm/memcontrol.c) and the cgroup core files a memory-only hierarchy has
// (cgroup_*_show / cgroup_subtree_control_write, kernel/cgroup/cgroup.c)
// on top of the typed Group API.

#include "umemcg/files.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <deque>
#include <mutex>
#include <string>

#include "external_limit.h"
#include "files/parse.h"
#include "psi/psi.h"
#include "threads/thread_registry.h"
#include "umemcg/active.h"
#include "umemcg/controller.h"
#include "umemcg/heap_profile.h"
#include "umemcg/pressure.h"

namespace umemcg {
namespace {

using internal::StripSpace;

constexpr size_t kMaxWriteBytes = 4096;  // one page, as kernfs takes

Status Invalid(std::string what) {
  return Status(StatusCode::kInvalidArgument, what);
}

std::string BytesLine(Pages p) { return std::to_string(p.in_bytes()) + "\n"; }

// Well-formed UTF-8 (the value of a write: what precedes its first NUL).
bool ValidText(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t extra = 0;
    if (c >= 0xc2 && c <= 0xdf) {
      extra = 1;
    } else if (c >= 0xe0 && c <= 0xef) {
      extra = 2;
    } else if (c >= 0xf0 && c <= 0xf4) {
      extra = 3;
    } else if (c >= 0x80) {
      return false;  // continuation byte or invalid lead
    }
    if (i + extra >= s.size() && extra > 0) return false;  // truncated
    for (size_t k = 1; k <= extra; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return false;
    }
    i += extra + 1;
  }
  return true;
}

// kstrtoint(s, 0): optional sign, C-style radix, the whole string.
StatusOr<int> ParseInt(std::string_view text) {
  std::string_view s = StripSpace(text);
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  uint64_t v = 0;
  bool overflow = false;
  const size_t n = internal::ParseUnsigned(s, &v, &overflow);
  if (n == 0 || n != s.size()) return Invalid("not an integer");
  if (overflow || v > (negative ? uint64_t{INT_MAX} + 1 : uint64_t{INT_MAX})) {
    return Status(StatusCode::kOutOfRange, "integer out of range");
  }
  return negative ? static_cast<int>(-static_cast<int64_t>(v))
                  : static_cast<int>(v);
}

// memory.stat_error (umemcg): how far an unflushed memory.stat read of
// this group could be off right now, and how old the last flush is.
std::string StatErrorText(const Group& g) {
  const StatErrorBound b = g.StatBound();
  std::string out;
  out += "pending_updates " + std::to_string(b.pending) + "\n";
  out += "threshold " + std::to_string(b.threshold) + "\n";
  out += "exceeded " + std::string(b.exceeded ? "1" : "0") + "\n";
  // The bound for byte items (page items: pending pages; events: pending).
  out += "bound_bytes " +
         (b.exceeded ? std::string("max")
                     : std::to_string(b.For(StatUnit::kBytes))) +
         "\n";
  out += "since_flush_us " +
         std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(
                            b.since_last_flush)
                            .count()) +
         "\n";
  return out;
}

// cgroup.stat: the kernel's cgroup_stat_show().
std::string CgroupStatText(const Group& g) {
  return "nr_descendants " + std::to_string(g.nr_descendants()) +
         "\nnr_dying_descendants " + std::to_string(g.nr_dying_descendants()) +
         "\n";
}

// cgroup.events: the kernel's cgroup_events_show(). Nothing can be frozen.
std::string CgroupEventsText(const Group& g) {
  return std::string(g.populated() ? "populated 1\n" : "populated 0\n") +
         "frozen 0\n";
}

// cgroup.subtree_control (kernel: cgroup_subtree_control_write) in a
// hierarchy whose only controller is memory: each space-separated token
// must be "+memory" or "-memory" (anything else is EINVAL, as an unknown
// controller name or a missing prefix is); the last one wins. The rules
// are the kernel's (Group::SetSubtreeMemory): "-memory" is a no-op when
// memory is not enabled, EBUSY while a child enables it in its own
// subtree_control; "+memory" is ENOENT on a group without the controller.
Status WriteSubtreeControl(Group& g, std::string_view text) {
  std::string_view rest = StripSpace(text);
  bool disable = false;
  bool any = false;
  while (!rest.empty()) {
    const size_t sp = rest.find(' ');
    const std::string_view tok = rest.substr(0, sp);
    rest =
        sp == std::string_view::npos ? std::string_view() : rest.substr(sp + 1);
    if (tok.empty()) continue;
    if (tok.size() < 2 || tok.substr(1) != "memory" ||
        (tok[0] != '+' && tok[0] != '-')) {
      return Invalid("cgroup.subtree_control: expected +memory or -memory");
    }
    disable = tok[0] == '-';  // the last token for a controller wins
    any = true;
  }
  if (!any) return Status::Ok();
  return g.SetSubtreeMemory(!disable);
}

// cgroup.threads / cgroup.procs reads (kernel: cgroup_threads_show /
// cgroup_procs_show): one ID a line, the known threads of this process
// whose group this is; cgroup.procs names the process once if any is.
std::string ThreadsText(const Group& g, bool procs) {
  const std::vector<pid_t> tids = internal::ThreadsIn(g);
  if (procs) {
    return tids.empty() ? std::string() : std::to_string(::getpid()) + "\n";
  }
  std::string out;
  for (pid_t tid : tids) out += std::to_string(tid) + "\n";
  return out;
}

// cgroup.threads / cgroup.procs writes (kernel: cgroup_procs_write_start):
// kstrtoint(strstrip(buf), 0) failing, or a negative ID, is EINVAL (an
// integer out of range too: the kernel maps every kstrtoint error to
// EINVAL); 0 names the writer (the calling thread, which becomes known). Then,
// where the kernel looks the ID up among all tasks (find_task_by_vpid, ESRCH
// when absent), it is looked up among the known threads of this process: ESRCH
// for any other ID, another process's included (this process cannot move it).
// cgroup.procs moves the whole process (kernel: tsk->group_leader), so it
// takes the PID or any known TID of this process.
Status WriteThreads(Group& g, std::string_view text, bool procs) {
  StatusOr<int> id = ParseInt(text);
  if (!id.ok() || id.value() < 0) {
    return Invalid(procs ? "cgroup.procs: expected a PID"
                         : "cgroup.threads: expected a TID");
  }
  const pid_t pid = id.value();
  if (procs) {
    if (pid != 0 && pid != ::getpid() && !internal::IsRegisteredThread(pid)) {
      return Status(StatusCode::kNoSuchProcess,
                    "cgroup.procs: not this process: " + std::to_string(pid));
    }
    if (!g.online()) {
      return Status(StatusCode::kFailedPrecondition, "group was removed");
    }
    if (pid == 0) RegisterThread();  // the writer names itself: known now
    return internal::MoveProcess(g);
  }
  if (pid == 0) {
    // The writer itself: it becomes known if it was not.
    SetThreadDefaultGroup(&g);
    return Status::Ok();
  }
  return internal::MoveThread(pid, g);
}

bool IsMemoryFile(std::string_view name) {
  return name.substr(0, 7) == "memory.";
}

Status WriteLimit(Group& g, std::string_view text, WriteMode mode,
                  Status (Group::*set)(Pages, ChargeFlags)) {
  StatusOr<Pages> pages = ParseMemoryLimit(text);
  if (!pages.ok()) return pages.status();
  return (g.*set)(pages.value(), mode == WriteMode::kBlocking
                                     ? kChargeDefault
                                     : ChargeFlags::kNone);
}

Status WriteReclaim(Group& g, std::string_view text) {
  const std::string_view s = StripSpace(text);
  // The size: memparse with no "max" token; nothing consumed (neither
  // digits nor a suffix) is EINVAL, as the kernel's buf == old_buf check.
  uint64_t bytes = 0;
  const size_t end = internal::MemParse(s, &bytes);
  if (end == 0) return Invalid("memory.reclaim: expected a size");
  std::string_view rest = s.substr(end);
  // Options: space-separated keys (kernel: strsep(" ") + match_token).
  while (!rest.empty()) {
    const size_t sp = rest.find(' ');
    const std::string_view tok = rest.substr(0, sp);
    rest =
        sp == std::string_view::npos ? std::string_view() : rest.substr(sp + 1);
    if (tok.empty()) continue;
    if (tok == "swappiness=max") continue;  // no swap: accepted, ignored
    if (tok.starts_with("swappiness=")) {
      StatusOr<int> v = ParseInt(tok.substr(11));
      if (!v.ok() || v.value() < 0 || v.value() > 200) {
        return Invalid("memory.reclaim: swappiness must be 0..200 or max");
      }
      continue;
    }
    return Invalid("memory.reclaim: unknown option '" + std::string(tok) + "'");
  }
  return g.Reclaim(Pages(bytes / kPageSize));
}

}  // namespace

// ---- The file table ----

struct MemoryFile::Spec {
  const char* name;
  bool on_root;
  bool readable;
  bool writable;
  // Added by the group's external limit (src/external_limit.h), which
  // reads and writes it.
  bool external = false;
};

namespace {

// The cgroup core files first, then memory.*, as cgroupfs lists them.
constexpr MemoryFile::Spec kFiles[] = {
    {"cgroup.controllers", true, true, false},
    {"cgroup.subtree_control", true, true, true},
    {"cgroup.events", false, true, false},
    {"cgroup.stat", true, true, false},
    {"cgroup.procs", true, true, true},
    {"cgroup.threads", true, true, true},
    {"memory.current", false, true, false},
    {"memory.min", false, true, true},
    {"memory.low", false, true, true},
    {"memory.high", false, true, true},
    {"memory.max", false, true, true},
    {"memory.peak", false, true, true},
    {"memory.events", false, true, false},
    {"memory.events.local", false, true, false},
    {"memory.stat", true, true, false},
    {"memory.oom.group", false, true, true},
    {"memory.reclaim", true, false, true},
    {"memory.stock", true, true, false},
    {"memory.stat_error", true, true, false},
    {"memory.pressure", true, true, true},
};

// Shown once a heap profile encoder is installed (heap_profile.h).
constexpr MemoryFile::Spec kHeapProfileFile = {"memory.heap_profile", true,
                                               true, false};

}  // namespace

// memory.peak handles that have written, per group (kernel: peaks_lock and
// the watchers list).
struct PeakRegistry {
  static void Reset(Group& g, int64_t* mine) {
    std::lock_guard<std::mutex> lock(g.controller_->peaks_mu_);
    PageCounter& c = g.memory_;
    const auto old_local = static_cast<int64_t>(c.local_watermark().raw());
    const auto usage = static_cast<int64_t>(c.usage().raw());
    c.ResetLocalWatermark();
    // Every other handle keeps the peak it has seen since its own reset
    // (which the shared local watermark held until now).
    for (int64_t* peer : g.peak_watchers_) {
      if (peer != mine) *peer = std::max(*peer, old_local);
    }
    if (*mine < 0) g.peak_watchers_.push_back(mine);
    *mine = usage;
  }
  static int64_t Read(Group& g, const int64_t* mine) {
    std::lock_guard<std::mutex> lock(g.controller_->peaks_mu_);
    if (*mine < 0) return static_cast<int64_t>(g.memory_.watermark().raw());
    return std::max(*mine,
                    static_cast<int64_t>(g.memory_.local_watermark().raw()));
  }
  static void Close(Group& g, int64_t* mine) {
    if (*mine < 0) return;
    std::lock_guard<std::mutex> lock(g.controller_->peaks_mu_);
    auto& w = g.peak_watchers_;
    w.erase(std::remove(w.begin(), w.end(), mine), w.end());
  }
};

MemoryFile::MemoryFile(GroupRef group, const Spec* spec)
    : group_(std::move(group)), spec_(spec) {}

MemoryFile::~MemoryFile() {
  trigger_.reset();  // disarms first: it holds the group
  PeakRegistry::Close(*group_, &peak_value_);
}

bool MemoryFile::TakePressureEvent() {
  return trigger_ != nullptr && trigger_->TakeEvent();
}

bool MemoryFile::PressureEventPending() const {
  return trigger_ != nullptr && trigger_->EventPending();
}

void MemoryFile::SetPressureEventCallback(std::function<void()> callback) {
  on_pressure_event_ = std::move(callback);
}

std::string_view MemoryFile::name() const { return spec_->name; }
bool MemoryFile::readable() const { return spec_->readable; }
bool MemoryFile::writable() const { return spec_->writable; }

namespace {

// One Spec per external file name ever opened (a few: the limits' file
// tables are static), so handles can keep a Spec pointer.
const MemoryFile::Spec* ExternalSpec(
    const internal::ExternalLimit::FileSpec& file) {
  static std::mutex mu;
  static std::deque<MemoryFile::Spec> specs;
  std::lock_guard<std::mutex> lock(mu);
  for (const MemoryFile::Spec& s : specs) {
    if (s.name == file.name && s.readable == file.readable &&
        s.writable == file.writable) {
      return &s;
    }
  }
  return &specs.emplace_back(
      MemoryFile::Spec{file.name, false, file.readable, file.writable, true});
}

}  // namespace

StatusOr<std::unique_ptr<MemoryFile>> MemoryFile::Open(Group& group,
                                                       std::string_view name) {
  if (!group.online()) {
    return Status(StatusCode::kFailedPrecondition, "group was removed");
  }
  // Without the controller a group has only the cgroup.* files.
  if (IsMemoryFile(name) && !group.has_memory_controller()) {
    return Status(StatusCode::kNotFound, "no such file: " + std::string(name));
  }
  for (const Spec& spec : kFiles) {
    if (name != spec.name) continue;
    if (group.is_root() && !spec.on_root) break;
    return std::unique_ptr<MemoryFile>(new MemoryFile(GroupRef(&group), &spec));
  }
  if (name == kHeapProfileFile.name && GetHeapProfileEncoder() != nullptr) {
    return std::unique_ptr<MemoryFile>(
        new MemoryFile(GroupRef(&group), &kHeapProfileFile));
  }
  if (const internal::ExternalLimit::FileSpec* file =
          internal::ExternalLimits::FindFile(group, name)) {
    return std::unique_ptr<MemoryFile>(
        new MemoryFile(GroupRef(&group), ExternalSpec(*file)));
  }
  return Status(StatusCode::kNotFound, "no such file: " + std::string(name));
}

StatusOr<std::string> MemoryFile::Read() {
  Group& g = *group_;
  if (!g.online()) {
    return Status(StatusCode::kFailedPrecondition, "group was removed");
  }
  if (!spec_->readable) {
    return Status(StatusCode::kPermissionDenied, "file is write-only");
  }
  const std::string_view n = spec_->name;
  // Opened before the parent's "-memory" removed it (kernfs: ENODEV).
  if (IsMemoryFile(n) && !g.has_memory_controller()) {
    return Status(StatusCode::kFailedPrecondition, "the file was removed");
  }
  if (spec_->external) return internal::ExternalLimits::ReadFile(g, n);
  const PageCounter& m = g.memory();
  if (n == "cgroup.controllers") {
    return std::string(g.has_memory_controller() ? "memory\n" : "\n");
  }
  if (n == "cgroup.subtree_control") {
    return std::string(g.subtree_memory() ? "memory\n" : "\n");
  }
  if (n == "cgroup.events") return CgroupEventsText(g);
  if (n == "cgroup.stat") return CgroupStatText(g);
  if (n == "cgroup.procs") return ThreadsText(g, /*procs=*/true);
  if (n == "cgroup.threads") return ThreadsText(g, /*procs=*/false);
  if (n == "memory.current") return BytesLine(m.usage());
  if (n == "memory.min") return FormatMemoryLimit(m.min());
  if (n == "memory.low") return FormatMemoryLimit(m.low());
  if (n == "memory.high") return FormatMemoryLimit(m.high());
  if (n == "memory.max") return FormatMemoryLimit(m.max());
  if (n == "memory.peak") {
    return BytesLine(
        Pages(static_cast<uint64_t>(PeakRegistry::Read(g, &peak_value_))));
  }
  if (n == "memory.events") return g.MemoryEvents();
  if (n == "memory.events.local") return g.MemoryEventsLocal();
  if (n == "memory.stat") return g.MemoryStat();
  if (n == "memory.stat_error") return StatErrorText(g);
  if (n == "memory.oom.group")
    return std::string(g.oom_group() ? "1\n" : "0\n");
  if (n == "memory.stock") return g.MemoryStock();
  // Reading the file makes no pressure state: a group without one never
  // stalled and reads zeros. Otherwise a scrape, or `umemcg top`, would
  // make a state for every group it reads and keep it for the group's life
  // (ReadPressure, the C++ call, does make it).
  if (n == "memory.pressure") {
    return FormatPressure(internal::Psi::Peek(&g).value_or(PressureStats{}));
  }
  if (n == kHeapProfileFile.name) {
    if (HeapProfileEncoder encode = GetHeapProfileEncoder()) {
      return encode(SnapshotHeapProfile(g, /*subtree=*/true));
    }
    return Status(StatusCode::kFailedPrecondition, "no heap profile encoder");
  }
  return Status(StatusCode::kPermissionDenied, "file is write-only");
}

Status MemoryFile::Write(std::string_view text, WriteMode mode) {
  Group& g = *group_;
  if (!g.online()) {
    return Status(StatusCode::kFailedPrecondition, "group was removed");
  }
  if (!spec_->writable) {
    return Status(StatusCode::kPermissionDenied, "file is read-only");
  }
  // kernfs: a write of zero bytes never reaches the file's handler.
  if (text.empty()) return Status::Ok();
  // kernfs: atomic_write_len is PAGE_SIZE for cgroup files; a longer
  // write is refused whole.
  if (text.size() > kMaxWriteBytes) {
    return Status(StatusCode::kTooBig, "a write is at most 4096 bytes");
  }
  // kernfs hands the handler the bytes with a NUL appended and every
  // handler parses a C string, so the value ends at the first NUL and the
  // rest of the write is ignored ("reset\n\0" is "reset\n").
  text = text.substr(0, text.find('\0'));
  if (!ValidText(text)) return Invalid("write must be UTF-8 text");
  const std::string_view n = spec_->name;
  if (IsMemoryFile(n) && !g.has_memory_controller()) {
    return Status(StatusCode::kFailedPrecondition, "the file was removed");
  }
  if (spec_->external) {
    return internal::ExternalLimits::WriteFile(g, n, text,
                                               mode == WriteMode::kBlocking);
  }
  if (n == "cgroup.subtree_control") return WriteSubtreeControl(g, text);
  if (n == "cgroup.procs") return WriteThreads(g, text, /*procs=*/true);
  if (n == "cgroup.threads") return WriteThreads(g, text, /*procs=*/false);
  if (n == "memory.max") return WriteLimit(g, text, mode, &Group::SetMax);
  if (n == "memory.high") return WriteLimit(g, text, mode, &Group::SetHigh);
  if (n == "memory.min" || n == "memory.low") {
    StatusOr<Pages> pages = ParseMemoryLimit(text);
    if (!pages.ok()) return pages.status();
    return n == "memory.min" ? g.SetMin(pages.value())
                             : g.SetLow(pages.value());
  }
  if (n == "memory.peak") {
    PeakRegistry::Reset(g, &peak_value_);  // any text resets
    return Status::Ok();
  }
  if (n == "memory.oom.group") {
    StatusOr<int> v = ParseInt(text);
    if (!v.ok()) return v.status();
    if (v.value() != 0 && v.value() != 1) return Invalid("expected 0 or 1");
    return g.SetOomGroup(v.value() == 1);
  }
  if (n == "memory.pressure") {
    // Kernel psi_write: one trigger per open file, kept until it closes.
    if (trigger_ != nullptr) {
      return Status(StatusCode::kBusy, "memory.pressure: trigger armed");
    }
    StatusOr<PressureTriggerSpec> spec = ParsePressureTrigger(text);
    if (!spec.ok()) return spec.status();
    StatusOr<std::unique_ptr<PressureTrigger>> t =
        PressureTrigger::Arm(g, spec.value(), on_pressure_event_);
    if (!t.ok()) return t.status();
    trigger_ = std::move(t).value();
    return Status::Ok();
  }
  if (n == "memory.reclaim") {
    if (mode == WriteMode::kNonBlocking) {
      return Status(StatusCode::kAgain, "memory.reclaim would block");
    }
    return WriteReclaim(g, text);
  }
  return Status(StatusCode::kPermissionDenied, "file is read-only");
}

// ---- Group's one-shot forms ----

StatusOr<std::string> Group::ReadFile(std::string_view name) {
  StatusOr<std::unique_ptr<MemoryFile>> f = MemoryFile::Open(*this, name);
  if (!f.ok()) return f.status();
  return f.value()->Read();
}

Status Group::WriteFile(std::string_view name, std::string_view text) {
  StatusOr<std::unique_ptr<MemoryFile>> f = MemoryFile::Open(*this, name);
  if (!f.ok()) return f.status();
  return f.value()->Write(text);
}

std::vector<std::string> Group::ListFiles() const {
  std::vector<std::string> names;
  const bool memory = has_memory_controller();
  for (const MemoryFile::Spec& spec : kFiles) {
    if (!memory && IsMemoryFile(spec.name)) continue;
    if (!is_root() || spec.on_root) names.emplace_back(spec.name);
  }
  if (memory) internal::ExternalLimits::AppendFileNames(*this, &names);
  if (memory && GetHeapProfileEncoder() != nullptr) {
    names.emplace_back(kHeapProfileFile.name);
  }
  return names;
}

}  // namespace umemcg

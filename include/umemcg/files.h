// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The cgroup-v2 file interface: every group can be read and written by file
// name (memory.current, memory.max, memory.events, cgroup.stat, ...) with
// the kernel's formats, parsing rules and errno values, so habits, scripts
// and dashboards carry over. Group::ReadFile / WriteFile / ListFiles are
// the one-shot forms; MemoryFile is an open handle, needed for memory.peak,
// whose writes reset the peak seen through that handle only.
//
// Files (R = readable, W = writable; "root" = present on the root group):
//   cgroup.controllers   R  root  "memory\n": the only controller here
//   cgroup.subtree_control RW root "memory\n": enabled in every group;
//                              "+memory" is accepted (a no-op), "-memory"
//                              is EBUSY (a child has it enabled; on a
//                              leaf the kernel would disable it, a umemcg
//                              group cannot exist without it), anything
//                              else EINVAL (kernel tokens: space-separated,
//                              "+name" / "-name")
//   cgroup.events        R     "populated 0|1\nfrozen 0\n"; populated:
//                              memory.current > 0 (Group::populated)
//   cgroup.stat          R  root  "nr_descendants N\n
//                              nr_dying_descendants N\n": online and
//                              removed-but-not-freed descendants
//   cgroup.procs         RW root  the PID of this process once if any
//                              known thread of it is in the group; a write
//                              of the PID (or of any known TID of it, or
//                              0, which makes the writer known first)
//                              moves every known thread here
//   cgroup.threads       RW root  the TIDs of the known threads in the
//                              group, one a line, ascending; a write of a
//                              TID moves that thread here (0: the writer)
//                              (see "Moves" in active.h: known threads are
//                              those that set a default group or called
//                              RegisterThread; their future charges move,
//                              what they charged stays)
//   memory.current       R     usage in bytes
//   memory.min/low       RW    protection: bytes or "max"
//   memory.high/max      RW    limits: bytes or "max"
//   memory.peak          RW    peak usage in bytes; a write resets this
//                              handle's peak
//   memory.events(.local) R    "low N\nhigh N\nmax N\noom N\noom_kill N\n
//                              oom_group_kill N\n"
//   memory.stat          R  root  "key value\n" in the kernel's order
//   memory.oom.group     RW    "0" / "1"
//   memory.reclaim       W  root  "<size> [swappiness=N|max]"
//   memory.stock         R  root  umemcg: "stocked <bytes cached in the
//                              per-CPU stocks>\nbatch <the group's batch,
//                              pages>\nslack_bound <bytes>\n"
//   memory.pressure      RW root  "some avg10=A.AA avg60=A.AA avg300=A.AA
//                              total=US\nfull ...\n" (umemcg/pressure.h);
//                              a write "some|full <threshold_us>
//                              <window_us>" arms a trigger on this handle
//                              until it closes (a second write: EBUSY)
//   memory.stat_error    R  root  umemcg: the error bound of an unflushed
//                              memory.stat read ("pending_updates N\n
//                              threshold N\nexceeded 0|1\nbound_bytes N|max
//                              \nsince_flush_us N\n")
//   memory.cluster.*     a group bound to a cluster group (umemcg/cluster.h)
//                        also has the files its binding adds
// Errors (Status code -> errno): bad syntax kInvalidArgument (EINVAL), a
// write to a read-only file or a read of a write-only one
// kPermissionDenied (EACCES), unknown file or one absent on the root
// kNotFound (ENOENT), a removed group kFailedPrecondition (ENODEV),
// memory.reclaim short of its target kAgain (EAGAIN), an integer out of
// range kOutOfRange (ERANGE), "-memory" in cgroup.subtree_control kBusy
// (EBUSY), a TID / PID written to cgroup.threads / cgroup.procs that names
// no known thread of this process kNoSuchProcess (ESRCH; a negative or
// non-integer one, or one out of int range, is EINVAL, as the kernel's
// cgroup_procs_write_start says). There are no signals here, so no EINTR.
//
// Writes (kernfs): one Write is one write(2). A write of zero bytes does
// nothing; otherwise the value is what precedes the first NUL, as the
// kernel's handlers parse the NUL-terminated copy kernfs makes
// ("reset\n\0" is "reset\n"); it must be UTF-8 (else EINVAL) and the whole
// write at most 4096 bytes (else EINVAL; the kernel says E2BIG).
//
// Parsing (kernel page_counter_memparse): leading and trailing whitespace
// is stripped; "max" (exactly) means no limit; otherwise an unsigned
// integer with C-style base (0x hex, leading 0 octal) and at most one
// suffix K/M/G/T/P/E (either case, powers of 1024); anything left over is
// EINVAL ("1GB", "1 G", "-5"). Bytes are floored to whole pages. An empty
// string parses as 0, as in the kernel. Values too large for a page count
// (the kernel's parser would wrap) saturate to "max".
//
// Thread safety: all functions may be called from any thread; a MemoryFile
// must not be used by two threads at once.

#ifndef UMEMCG_FILES_H_
#define UMEMCG_FILES_H_

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "umemcg/export.h"
#include "umemcg/group.h"
#include "umemcg/pressure.h"
#include "umemcg/status.h"
#include "umemcg/units.h"

namespace umemcg {

// kernel page_counter_memparse(buf, "max"): pages, or kInvalidArgument.
UMEMCG_EXPORT StatusOr<Pages> ParseMemoryLimit(std::string_view text);
// kernel memparse() on a whole string (no "max"): bytes, or
// kInvalidArgument; saturates at UINT64_MAX.
UMEMCG_EXPORT StatusOr<uint64_t> ParseMemorySize(std::string_view text);
// "max\n" for kPageCounterMax (or more), else the byte count and "\n".
UMEMCG_EXPORT std::string FormatMemoryLimit(Pages pages);

// How a write that may reclaim behaves (the kernel's O_NONBLOCK).
enum class WriteMode { kBlocking, kNonBlocking };

class UMEMCG_EXPORT MemoryFile {
 public:
  // Opens `name` on `group`. kNotFound for unknown files and files absent
  // on the root; kFailedPrecondition if the group was removed.
  static StatusOr<std::unique_ptr<MemoryFile>> Open(Group& group,
                                                    std::string_view name);
  ~MemoryFile();

  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;

  // The file's current text (see the table above).
  StatusOr<std::string> Read();
  // Parses and applies `text`. memory.high / memory.max writes drain stocks,
  // reclaim and (max) run OOM handling unless kNonBlocking; they succeed
  // even when usage stays above the new limit, as in the kernel.
  Status Write(std::string_view text, WriteMode mode = WriteMode::kBlocking);

  std::string_view name() const;
  Group& group() const { return *group_; }
  // What the file allows (cgroupfs modes: 0444 read-only, 0644 read-write,
  // 0200 write-only).
  bool readable() const;
  bool writable() const;

  // memory.pressure: true once the trigger this handle armed fired since
  // the last call (poll(2)'s POLLPRI); clears it. False without one.
  bool TakePressureEvent();
  // The same without clearing it.
  bool PressureEventPending() const;
  // Whether a Write armed a trigger on this handle.
  bool HasPressureTrigger() const { return trigger_ != nullptr; }
  // memory.pressure: runs at each event of a trigger armed by a later
  // Write (the FUSE mount wakes its pollers with it).
  void SetPressureEventCallback(std::function<void()> callback);

  // One row of the file table (files.cc).
  struct Spec;

 private:
  MemoryFile(GroupRef group, const Spec* spec);

  GroupRef group_;
  const Spec* spec_;
  // memory.peak: this handle's reset value in pages; -1 until it writes.
  int64_t peak_value_ = -1;
  // memory.pressure: the trigger this handle armed, and its callback.
  std::unique_ptr<PressureTrigger> trigger_;
  std::function<void()> on_pressure_event_;
  friend class internal::ControllerImpl;
  friend struct PeakRegistry;
};

}  // namespace umemcg

#endif  // UMEMCG_FILES_H_

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// MountFs: a controller's group tree as a cgroupfs-like FUSE file system,
// served from background threads of the owning process (libumemcg-fuse,
// built when libfuse3 is found).
//
//   auto mount = umemcg::MountFs(*ctrl, "/run/myservice/memcg").value();
//   $ ls -l /run/myservice/memcg/tenant-a
//   $ cat /run/myservice/memcg/tenant-a/memory.current
//   $ echo 4G > /run/myservice/memcg/tenant-a/memory.max
//   $ mkdir /run/myservice/memcg/tenant-a/query-17
//
// What it looks like:
//   directories  groups (the mount's root is the controller's root group);
//                mkdir creates a group, rmdir removes one (EBUSY while it
//                has child groups or known threads in cgroup.threads, as
//                in cgroupfs)
//   threads      `echo TID > tenant-a/cgroup.threads` moves a thread of
//                this process that umemcg knows (active.h, "Moves") to
//                tenant-a: its future charges go there
//   files        the group's memory files (Group::ListFiles), modes as in
//                cgroupfs: 0444 read-only, 0644 read-write, 0200
//                write-only (memory.reclaim); size 0, read whole at each
//                read from offset 0 (like seq_file)
//   errors       reads and writes go through MemoryFile, and a failing
//                write returns the file interface's errno to the writer
//                (`echo junk > memory.max`: EINVAL); opening a file for an
//                access it lacks is EACCES; writes with O_NONBLOCK do not
//                reclaim (the kernel's rule for memory.max / memory.high)
//   memory.peak  each open file has its own peak reset, as in the kernel
//   poll()       memory.events, memory.events.local and cgroup.events
//                report POLLPRI | POLLERR once their content changed since
//                the opener last read them (cgroupfs semantics: poll, then
//                lseek(0) + read). Event files are checked when an event is
//                raised; cgroup.events ("populated" follows usage, which
//                raises no event) also every 20 ms while it is polled
//   writes       a value ends at its first NUL and the whole write is
//                taken: write(fd, "reset\n\0", 7) returns 7, as in kernfs
//   not here     rename, chmod, chown, creating or removing files (EPERM;
//                creating a file EACCES); inotify
// Paths cannot leave the tree: the kernel resolves ".." within the mount,
// and names are looked up in the controller only.
//
// Lifetime. The mount lasts until the handle is destroyed, Unmount() is
// called or the controller is destroyed (each unmounts cleanly: requests in
// flight finish, the mount is detached, every group reference is
// released). With auto_unmount (default), fusermount3 also removes the
// mount if the process dies, by any signal including SIGKILL. A mount
// removed from outside (`fusermount3 -u`, `umount`) stops serving; the
// handle then only releases its resources.
//
// Thread safety: the handle's methods may be called from any thread. The
// file system is served by `threads` threads; reads and writes of files
// are safe against every controller operation.

#ifndef UMEMCG_FUSE_H_
#define UMEMCG_FUSE_H_

#include <memory>
#include <string>
#include <string_view>

#include "umemcg/controller.h"
#include "umemcg/export.h"
#include "umemcg/status.h"

namespace umemcg {

struct MountOptions {
  // Threads serving requests (1..64). A write to memory.max may reclaim or
  // run the OOM handler; other requests go on meanwhile on other threads.
  int threads = 4;
  // fusermount3 unmounts if this process dies without unmounting (the
  // libfuse auto_unmount option; one fusermount3 process per mount waits
  // until this process exits).
  bool auto_unmount = true;
  // Let other users than the mounting one in (libfuse allow_other; for
  // non-root mounts /etc/fuse.conf must have user_allow_other). Modes are
  // enforced by the kernel (default_permissions).
  bool allow_other = false;
};

class UMEMCG_EXPORT FuseMount {
 public:
  virtual ~FuseMount() = default;  // unmounts

  // The mount point, as given.
  virtual const std::string& path() const = 0;
  // False once unmounted (by Unmount, the controller's destruction, or
  // from outside).
  virtual bool mounted() const = 0;
  // Unmounts now (see Lifetime above). Idempotent.
  virtual void Unmount() = 0;
};

// Mounts `controller`'s tree at the existing directory `path`.
// kFailedPrecondition when /dev/fuse cannot be opened or the mount is
// refused (not permitted, bad mount point; libfuse prints the reason),
// kNotFound / kInvalidArgument when `path` is missing / not a directory,
// kInvalidArgument for bad options. `controller` must outlive the mount or
// destroy it (its destructor unmounts first).
UMEMCG_EXPORT StatusOr<std::unique_ptr<FuseMount>> MountFs(
    Controller& controller, std::string_view path,
    const MountOptions& options = {});

}  // namespace umemcg

#endif  // UMEMCG_FUSE_H_

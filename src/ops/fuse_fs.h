// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// FuseFs: the state behind a FuseMount (include/umemcg/fuse.h).
//   fuse_mount.cc  the session: mounting, the request threads (our own
//                  loop over fuse_session_receive_buf, so stopping never
//                  depends on the kernel ending a read), the poll notifier
//                  thread and teardown;
//   fuse_ops.cc    the file-system operations (libfuse high-level API,
//                  path-based): path resolution onto groups and memory
//                  files, open files, poll.
//
// Locks: mu_ guards the open-file set and the registered poll handles;
// each OpenFile's mu guards its MemoryFile and read buffer (a MemoryFile
// must not be used by two threads at once). Order: mu_ before OpenFile::mu.

#ifndef UMEMCG_OPS_FUSE_FS_H_
#define UMEMCG_OPS_FUSE_FS_H_

#define FUSE_USE_VERSION 35
#include <fuse.h>
#include <fuse_lowlevel.h>
#include <sys/types.h>

#include <atomic>
#include <ctime>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "ops/attachment.h"
#include "umemcg/files.h"
#include "umemcg/fuse.h"

namespace umemcg::internal {

class FuseFs final : public Attachment {
 public:
  // One open file of the mount (fuse_file_info::fh).
  struct OpenFile {
    std::mutex mu;
    std::unique_ptr<MemoryFile> file;  // guarded by mu
    // memory.events(.local) and cgroup.events; immutable.
    bool pollable = false;
    // cgroup.events: its "populated" changes with usage, which raises no
    // event, so the notifier re-reads it every kPollTick while polled.
    bool ticking = false;
    // memory.pressure: poll reports its trigger's events (kernel
    // psi_trigger_poll), not changes of its text; immutable.
    bool pressure = false;
    // The text served to reads, made at each read from offset 0 (seq_file).
    std::string text;  // guarded by mu
    bool have_text = false;
    // Pollable files: the content as of the opener's last read (or the
    // open): poll reports a change against it (kernfs of->event).
    std::string seen;                        // guarded by mu
    fuse_pollhandle* poll_handle = nullptr;  // guarded by FuseFs::mu_
  };

  FuseFs(Controller& controller, std::string path, const MountOptions& options);
  ~FuseFs() override;

  // Mounts and starts the threads. On failure nothing is left mounted.
  Status Start();

  const std::string& path() const { return path_; }
  bool mounted() const;

  // ControllerObserver: wakes the poll notifier.
  void OnMemoryEvent(Group& group, MemoryEvent event) override;

  // How often the notifier re-reads polled cgroup.events files (the kernel
  // sends cgroup file notifications at most every 10 ms).
  static constexpr int kPollTickMs = 20;

  // ---- For fuse_ops.cc ----

  static const fuse_operations& Operations();
  Controller& controller() { return controller_; }
  uid_t uid() const { return uid_; }
  gid_t gid() const { return gid_; }
  const timespec& mount_time() const { return mount_time_; }

  void AddOpenFile(OpenFile* f);
  // The open file behind `fh` (null if unknown). Taking mu_ here also
  // orders the opening thread's writes to the file before the requests
  // that use it, which libfuse hands to other threads through the kernel
  // (a path ThreadSanitizer cannot see).
  OpenFile* Find(uint64_t fh);
  // Forgets `f` (and its poll handle) and deletes it.
  void ReleaseOpenFile(OpenFile* f);
  // poll(): POLLPRI | POLLERR when `f` changed since its last read;
  // otherwise keeps `ph` (may be null) to notify on the next change.
  unsigned Poll(OpenFile* f, fuse_pollhandle* ph);
  // Wakes the poll notifier (a futex wake only while it waits). Any
  // thread, no lock held (a pressure trigger's callback).
  void WakeNotifier();

  // Directory handles libfuse holds for this process's mounts: each
  // opendir allocates one (fuse_lib_opendir's struct fuse_dh), only its
  // releasedir frees it, and fuse_destroy does not free those still open.
  // Counted by the opendir/releasedir operations, so tests can check that
  // none is left behind by a mount's teardown.
  static int64_t OpenDirHandles();
  static void CountDirHandle(int64_t delta);

 protected:
  void DoStop() override;

 private:
  void ServeRequests();
  // Serves the requests the kernel queued before the stop, until none is
  // queued (at most kMaxDrain).
  void DrainRequests(fuse_buf* buf);
  void NotifyPolls();
  // REQUIRES: f->mu held.
  static bool ChangedSinceRead(OpenFile* f);

  Controller& controller_;
  const std::string path_;
  const MountOptions options_;
  const uid_t uid_;
  const gid_t gid_;
  timespec mount_time_{};

  fuse* fuse_ = nullptr;
  fuse_session* session_ = nullptr;
  int stop_fd_ = -1;  // eventfd: readable once the threads must stop
  std::vector<std::thread> workers_;
  std::thread notifier_;
  std::atomic<bool> stopping_{false};
  // Set by a request thread that saw the connection end (unmounted from
  // outside); read by mounted() without touching the session.
  std::atomic<bool> disconnected_{false};
  // Bumped by every memory event and cgroup.events poll registration; the
  // notifier waits on it (futex, with a timeout while it ticks), having
  // set notifier_waiting_ first (seq_cst on both sides: either the waker
  // sees the flag or the notifier sees the new sequence).
  std::atomic<uint32_t> events_seq_{0};
  std::atomic<bool> notifier_waiting_{false};

  std::mutex mu_;
  std::unordered_set<OpenFile*> open_files_;  // guarded by mu_; owned
  std::unordered_set<OpenFile*> polled_;      // guarded by mu_
};

}  // namespace umemcg::internal

#endif  // UMEMCG_OPS_FUSE_FS_H_

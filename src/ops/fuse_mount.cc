// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The FUSE session of a mount: mounting, request threads, the poll
// notifier, teardown.
//
// Why our own request loop. fuse_loop_mt's threads sit in a blocking read
// of /dev/fuse and end only when the kernel ends the connection, which a
// lazy unmount does not do while some process still has a file of the
// mount open: stopping could hang. Here each thread polls the (non-
// blocking) session fd together with an eventfd; stopping writes the
// eventfd, and each thread then serves what the kernel has already queued
// (without waiting for more) and ends; DoStop joins them, unmounts and
// closes the session fd, which aborts whatever the kernel queues after
// that (ENOTCONN for the caller).
//
// Why drain. The kernel queues RELEASE and RELEASEDIR when a process
// closes a file of the mount, asynchronously: close() and exit() do not
// wait for them. libfuse's high-level API allocates a handle per open
// directory (fuse_lib_opendir: a 120-byte struct fuse_dh) and frees it only
// in fuse_lib_releasedir; fuse_destroy does not free the handles of
// directories still open. Threads that stopped on the eventfd alone left a
// RELEASEDIR queued by a just-finished `ls` unread, and its handle leaked
// (LeakSanitizer: 120 bytes from calloc in libfuse3.so.3, in most asan
// runs of fuse_test on a loaded machine). A directory a process still
// holds open when the mount stops keeps its handle in libfuse: nothing in
// libfuse's API can free it.

#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "ops/fuse_fs.h"
#include "port/thread.h"

namespace umemcg {
namespace internal {
namespace {

// The futex word of a std::atomic<uint32_t> (layout-compatible on Linux).
uint32_t* FutexWord(std::atomic<uint32_t>& a) {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
  return reinterpret_cast<uint32_t*>(&a);
}

// Sleeps while *word == expected, at most `timeout_ms` (< 0: no limit).
void FutexWait(std::atomic<uint32_t>& word, uint32_t expected, int timeout_ms) {
  timespec ts{timeout_ms / 1000, (timeout_ms % 1000) * 1000000L};
  (void)::syscall(SYS_futex, FutexWord(word), FUTEX_WAIT_PRIVATE, expected,
                  timeout_ms < 0 ? nullptr : &ts, nullptr, 0);
}

void FutexWake(std::atomic<uint32_t>& word) {
  (void)::syscall(SYS_futex, FutexWord(word), FUTEX_WAKE_PRIVATE, 1, nullptr,
                  nullptr, 0);
}

}  // namespace

FuseFs::FuseFs(Controller& controller, std::string path,
               const MountOptions& options)
    : Attachment(controller),
      controller_(controller),
      path_(std::move(path)),
      options_(options),
      uid_(::geteuid()),
      gid_(::getegid()) {
  ::clock_gettime(CLOCK_REALTIME, &mount_time_);
}

FuseFs::~FuseFs() {
  // Start() failed half-way, or DoStop ran: nothing is left but fds.
  if (stop_fd_ >= 0) ::close(stop_fd_);
}

Status FuseFs::Start() {
  const int probe = ::open("/dev/fuse", O_RDWR | O_CLOEXEC);
  if (probe < 0) {
    return Status(
        StatusCode::kFailedPrecondition,
        std::string("cannot open /dev/fuse: ") + std::strerror(errno));
  }
  ::close(probe);
  struct stat st;
  if (::stat(path_.c_str(), &st) != 0) {
    return Status(errno == ENOENT ? StatusCode::kNotFound
                                  : StatusCode::kFailedPrecondition,
                  path_ + ": " + std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) {
    return Status(StatusCode::kInvalidArgument, path_ + ": not a directory");
  }
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd_ < 0) {
    return Status(StatusCode::kFailedPrecondition,
                  std::string("eventfd: ") + std::strerror(errno));
  }

  std::string opts = "fsname=umemcg,subtype=umemcg,default_permissions";
  if (options_.auto_unmount) opts += ",auto_unmount";
  if (options_.allow_other) opts += ",allow_other";
  std::string prog = "umemcg";
  std::string dash_o = "-o";
  char* argv[] = {prog.data(), dash_o.data(), opts.data(), nullptr};
  fuse_args args = FUSE_ARGS_INIT(3, argv);
  fuse_ = fuse_new(&args, &Operations(), sizeof(fuse_operations), this);
  fuse_opt_free_args(&args);
  if (fuse_ == nullptr) {
    return Status(StatusCode::kFailedPrecondition, "fuse_new failed");
  }
  // Mount (and later unmount) by absolute path: the process may chdir.
  char* real = ::realpath(path_.c_str(), nullptr);
  const std::string mount_point = real != nullptr ? real : path_;
  std::free(real);
  if (fuse_mount(fuse_, mount_point.c_str()) != 0) {
    fuse_destroy(fuse_);
    fuse_ = nullptr;
    return Status(StatusCode::kFailedPrecondition,
                  "mounting " + path_ + " failed (see libfuse's message)");
  }
  session_ = fuse_get_session(fuse_);
  const int fd = fuse_session_fd(session_);
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);

  for (int i = 0; i < options_.threads; ++i) {
    workers_.push_back(internal::StartThread([this] { ServeRequests(); }));
  }
  notifier_ = internal::StartThread([this] { NotifyPolls(); });
  return Status::Ok();
}

bool FuseFs::mounted() const {
  return session_ != nullptr && !stopping_.load(std::memory_order_acquire) &&
         !disconnected_.load(std::memory_order_acquire);
}

void FuseFs::ServeRequests() {
  const int fd = fuse_session_fd(session_);
  fuse_buf buf{};
  pollfd fds[2] = {{fd, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
  while (!fuse_session_exited(session_)) {
    const int n = ::poll(fds, 2, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[1].revents != 0) {  // stopping
      DrainRequests(&buf);
      break;
    }
    // Readable, or POLLERR once the connection is gone: the read then
    // reports ENODEV and libfuse marks the session exited.
    const int res = fuse_session_receive_buf(session_, &buf);
    if (res == -EINTR || res == -EAGAIN) continue;  // another thread won
    if (res <= 0) break;
    fuse_session_process_buf(session_, &buf);
  }
  if (fuse_session_exited(session_)) {
    disconnected_.store(true, std::memory_order_release);
  }
  std::free(buf.mem);
}

void FuseFs::DrainRequests(fuse_buf* buf) {
  // A hang guard against a client that keeps queueing requests while the
  // mount stops; a drain normally reads a handful.
  constexpr int kMaxDrain = 4096;
  for (int i = 0; i < kMaxDrain && !fuse_session_exited(session_); ++i) {
    // The fd is non-blocking: -EAGAIN once nothing is queued (or another
    // thread took the last request).
    const int res = fuse_session_receive_buf(session_, buf);
    if (res == -EINTR) continue;
    if (res <= 0) return;
    fuse_session_process_buf(session_, buf);
  }
}

void FuseFs::OnMemoryEvent(Group&, MemoryEvent) { WakeNotifier(); }

void FuseFs::WakeNotifier() {
  // seq_cst (with the notifier's flag store and sequence load): the
  // notifier then sees the counters this event changed, and the futex
  // call is made only while it waits.
  events_seq_.fetch_add(1);
  if (notifier_waiting_.load()) FutexWake(events_seq_);
}

void FuseFs::NotifyPolls() {
  uint32_t seen = events_seq_.load(std::memory_order_acquire);
  while (!stopping_.load(std::memory_order_acquire)) {
    bool tick = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto it = polled_.begin(); it != polled_.end();) {
        OpenFile* f = *it;
        std::lock_guard<std::mutex> file_lock(f->mu);
        if (!ChangedSinceRead(f)) {
          tick = tick || f->ticking;
          ++it;
          continue;
        }
        fuse_notify_poll(f->poll_handle);
        fuse_pollhandle_destroy(f->poll_handle);
        f->poll_handle = nullptr;
        it = polled_.erase(it);
      }
    }
    // An event during the scan changed events_seq_ from `seen`: no wait.
    notifier_waiting_.store(true);
    if (events_seq_.load() == seen) {
      FutexWait(events_seq_, seen, tick ? kPollTickMs : -1);
    }
    notifier_waiting_.store(false);
    seen = events_seq_.load(std::memory_order_acquire);
  }
}

bool FuseFs::ChangedSinceRead(OpenFile* f) {
  if (f->pressure) return f->file->PressureEventPending();
  StatusOr<std::string> now = f->file->Read();
  // A removed group: wake the poller, whose read then fails with ENODEV.
  return !now.ok() || now.value() != f->seen;
}

void FuseFs::AddOpenFile(OpenFile* f) {
  std::lock_guard<std::mutex> lock(mu_);
  open_files_.insert(f);
}

FuseFs::OpenFile* FuseFs::Find(uint64_t fh) {
  auto* f = reinterpret_cast<OpenFile*>(static_cast<uintptr_t>(fh));
  std::lock_guard<std::mutex> lock(mu_);
  return open_files_.count(f) != 0 ? f : nullptr;
}

void FuseFs::ReleaseOpenFile(OpenFile* f) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    open_files_.erase(f);
    polled_.erase(f);
    if (f->poll_handle != nullptr) fuse_pollhandle_destroy(f->poll_handle);
    f->poll_handle = nullptr;
  }
  delete f;
}

unsigned FuseFs::Poll(OpenFile* f, fuse_pollhandle* ph) {
  // kernfs_generic_poll: DEFAULT_POLLMASK, plus EPOLLERR | EPOLLPRI once
  // the file changed since the opener last read it.
  constexpr unsigned kDefault = POLLIN | POLLOUT | POLLRDNORM | POLLWRNORM;
  if (f->pressure) {
    // psi_trigger_poll: without a trigger, POLLERR | POLLPRI; with one,
    // POLLPRI once per event (taking it).
    std::lock_guard<std::mutex> lock(mu_);
    std::lock_guard<std::mutex> file_lock(f->mu);
    unsigned ready = 0;
    if (!f->file->HasPressureTrigger()) {
      ready = POLLERR | POLLPRI;
    } else if (f->file->TakePressureEvent()) {
      ready = POLLPRI;
    }
    if (ready != 0 || ph == nullptr) {
      if (ph != nullptr) fuse_pollhandle_destroy(ph);
      return kDefault | ready;
    }
    if (f->poll_handle != nullptr) fuse_pollhandle_destroy(f->poll_handle);
    f->poll_handle = ph;
    polled_.insert(f);
    return kDefault;
  }
  if (!f->pollable) {
    if (ph != nullptr) fuse_pollhandle_destroy(ph);
    return kDefault;
  }
  std::lock_guard<std::mutex> lock(mu_);
  std::lock_guard<std::mutex> file_lock(f->mu);
  if (ChangedSinceRead(f)) {
    if (ph != nullptr) fuse_pollhandle_destroy(ph);
    return kDefault | POLLERR | POLLPRI;
  }
  if (ph != nullptr) {
    if (f->poll_handle != nullptr) fuse_pollhandle_destroy(f->poll_handle);
    f->poll_handle = ph;
    polled_.insert(f);
    // A notifier waiting without a timeout must start ticking for it.
    if (f->ticking) WakeNotifier();
  }
  return kDefault;
}

void FuseFs::DoStop() {
  if (session_ == nullptr) return;  // never mounted
  stopping_.store(true, std::memory_order_release);
  const uint64_t one = 1;
  (void)!::write(stop_fd_, &one, sizeof(one));
  for (std::thread& t : workers_) t.join();
  workers_.clear();
  WakeNotifier();
  notifier_.join();
  // No thread of ours runs a request now. Closing the session fd aborts
  // the connection; the unmount is lazy if a process still uses the mount.
  fuse_unmount(fuse_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (OpenFile* f : open_files_) {
      if (f->poll_handle != nullptr) fuse_pollhandle_destroy(f->poll_handle);
      delete f;  // releases its MemoryFile and so its GroupRef
    }
    open_files_.clear();
    polled_.clear();
  }
  fuse_destroy(fuse_);
  fuse_ = nullptr;
}

namespace {

class MountHandle final : public FuseMount {
 public:
  explicit MountHandle(std::shared_ptr<FuseFs> fs) : fs_(std::move(fs)) {}
  ~MountHandle() override { fs_->StopAndDetach(); }

  const std::string& path() const override { return fs_->path(); }
  bool mounted() const override { return fs_->mounted(); }
  void Unmount() override { fs_->Stop(); }

 private:
  std::shared_ptr<FuseFs> fs_;
};

}  // namespace
}  // namespace internal

StatusOr<std::unique_ptr<FuseMount>> MountFs(Controller& controller,
                                             std::string_view path,
                                             const MountOptions& options) {
  if (path.empty()) {
    return Status(StatusCode::kInvalidArgument, "empty mount point");
  }
  if (options.threads < 1 || options.threads > 64) {
    return Status(StatusCode::kInvalidArgument, "threads must be 1..64");
  }
  auto fs = std::make_shared<internal::FuseFs>(controller, std::string(path),
                                               options);
  if (Status s = fs->Start(); !s.ok()) return s;
  fs->Attach(fs);
  return std::unique_ptr<FuseMount>(
      std::make_unique<internal::MountHandle>(std::move(fs)));
}

}  // namespace umemcg

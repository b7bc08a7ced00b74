// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// TreeReader over a Controller (the file interface) and over a cgroup-v2
// directory. The directory reader never leaves the directory it was given:
// group paths are validated (no "..", no absolute paths) and resolved one
// component at a time with openat(O_NOFOLLOW), so neither a ".." nor a
// symlink planted inside the tree can redirect a read or a write.

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "umemcg/files.h"
#include "umemcg/metrics.h"

namespace umemcg {
namespace {

// Files larger than this are not read whole (memory.stat is a few KiB).
constexpr size_t kMaxFileBytes = 4 << 20;

Status Invalid(std::string what) {
  return Status(StatusCode::kInvalidArgument, what);
}

// The StatusCode for an errno from a directory tree, the inverse of
// ErrnoOf where one exists; the message keeps the errno's own text.
Status FromErrno(int err, std::string_view what) {
  StatusCode code = StatusCode::kFailedPrecondition;
  switch (err) {
    case EINVAL:
    case ENOTDIR:  // a directory was asked for and something else is there
      code = StatusCode::kInvalidArgument;
      break;
    case EBUSY:
      code = StatusCode::kBusy;
      break;
    case ENOENT:
      code = StatusCode::kNotFound;
      break;
    case EEXIST:
      code = StatusCode::kAlreadyExists;
      break;
    case ENAMETOOLONG:
      code = StatusCode::kNameTooLong;
      break;
    case E2BIG:
      code = StatusCode::kTooBig;
      break;
    case ESRCH:
      code = StatusCode::kNoSuchProcess;
      break;
    case ENOMEM:
      code = StatusCode::kResourceExhausted;
      break;
    case EAGAIN:
      code = StatusCode::kAgain;
      break;
    case EACCES:
    case EPERM:
      code = StatusCode::kPermissionDenied;
      break;
    case ERANGE:
      code = StatusCode::kOutOfRange;
      break;
    default:
      break;  // ENODEV and the rest
  }
  return Status(code, std::string(what) + ": " + std::strerror(err));
}

// An owned file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd& operator=(Fd&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_ = -1;
};

class ControllerReader final : public TreeReader {
 public:
  explicit ControllerReader(Controller& c) : controller_(c) {}

  StatusOr<std::vector<std::string>> Children(std::string_view path) override {
    StatusOr<GroupRef> g = Find(path);
    if (!g.ok()) return g.status();
    std::vector<std::string> names = g.value()->ChildNames();
    std::sort(names.begin(), names.end());
    return names;
  }

  StatusOr<std::string> Read(std::string_view path,
                             std::string_view name) override {
    if (Status s = ValidateFileName(name); !s.ok()) return s;
    StatusOr<GroupRef> g = Find(path);
    if (!g.ok()) return g.status();
    return g.value()->ReadFile(name);
  }

  Status Write(std::string_view path, std::string_view name,
               std::string_view text) override {
    if (Status s = ValidateFileName(name); !s.ok()) return s;
    StatusOr<GroupRef> g = Find(path);
    if (!g.ok()) return g.status();
    return g.value()->WriteFile(name, text);
  }

 private:
  StatusOr<GroupRef> Find(std::string_view path) {
    if (Status s = ValidateGroupPath(path); !s.ok()) return s;
    return controller_.Lookup(path);
  }

  Controller& controller_;
};

class DirectoryReader final : public TreeReader {
 public:
  DirectoryReader(Fd root, std::string dir)
      : root_(std::move(root)), dir_(std::move(dir)) {}

  StatusOr<std::vector<std::string>> Children(std::string_view path) override {
    StatusOr<Fd> group = OpenGroup(path);
    if (!group.ok()) return group.status();
    DIR* d = ::fdopendir(group.value().get());
    if (d == nullptr) return FromErrno(errno, Describe(path, ""));
    group.value().release();  // owned by `d` now
    std::vector<std::string> names;
    while (const dirent* e = ::readdir(d)) {
      const std::string_view n = e->d_name;
      if (n == "." || n == "..") continue;
      bool dir = e->d_type == DT_DIR;
      if (e->d_type == DT_UNKNOWN) {
        struct stat st;
        dir = ::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
              S_ISDIR(st.st_mode);
      }
      if (dir) names.emplace_back(n);
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    return names;
  }

  StatusOr<std::string> Read(std::string_view path,
                             std::string_view name) override {
    StatusOr<Fd> f = OpenFile(path, name, O_RDONLY);
    if (!f.ok()) return f.status();
    std::string text;
    char buf[8192];
    for (;;) {
      const ssize_t n = ::read(f.value().get(), buf, sizeof(buf));
      if (n < 0) {
        if (errno == EINTR) continue;
        return FromErrno(errno, Describe(path, name));
      }
      if (n == 0) break;
      text.append(buf, static_cast<size_t>(n));
      if (text.size() > kMaxFileBytes) {
        return Status(StatusCode::kOutOfRange,
                      Describe(path, name) + ": file too large");
      }
    }
    return text;
  }

  Status Write(std::string_view path, std::string_view name,
               std::string_view text) override {
    // O_TRUNC is ignored by cgroupfs and by a umemcg mount, and makes a
    // plain-file tree (a test fixture) hold exactly the value written.
    StatusOr<Fd> f = OpenFile(path, name, O_WRONLY | O_TRUNC);
    if (!f.ok()) return f.status();
    // One write, as `echo` does: the kernel parses each write on its own.
    ssize_t n;
    do {
      n = ::write(f.value().get(), text.data(), text.size());
    } while (n < 0 && errno == EINTR);
    if (n < 0) return FromErrno(errno, Describe(path, name));
    if (static_cast<size_t>(n) != text.size()) {
      return Status(StatusCode::kAgain, Describe(path, name) + ": short write");
    }
    return Status::Ok();
  }

 private:
  std::string Describe(std::string_view path, std::string_view name) const {
    std::string s = dir_;
    for (const std::string_view part : {path, name}) {
      if (part.empty()) continue;
      s += '/';
      s.append(part);
    }
    return s;
  }

  // The group's directory, resolved component by component below root_.
  StatusOr<Fd> OpenGroup(std::string_view path) {
    if (Status s = ValidateGroupPath(path); !s.ok()) return s;
    Fd cur(::openat(root_.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (cur.get() < 0) return FromErrno(errno, dir_);
    size_t pos = 0;
    while (pos < path.size()) {
      size_t slash = path.find('/', pos);
      if (slash == std::string_view::npos) slash = path.size();
      const std::string component(path.substr(pos, slash - pos));
      Fd next(::openat(cur.get(), component.c_str(),
                       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (next.get() < 0) {
        const int err = errno;
        if (err == ELOOP || err == ENOTDIR) {
          return Status(
              StatusCode::kNotFound,
              Describe(path.substr(0, slash), "") + ": not a group directory");
        }
        return FromErrno(err, Describe(path.substr(0, slash), ""));
      }
      cur = std::move(next);
      pos = slash + 1;
    }
    return cur;
  }

  StatusOr<Fd> OpenFile(std::string_view path, std::string_view name,
                        int mode) {
    if (Status s = ValidateFileName(name); !s.ok()) return s;
    StatusOr<Fd> group = OpenGroup(path);
    if (!group.ok()) return group.status();
    const std::string n(name);
    Fd f(::openat(group.value().get(), n.c_str(),
                  mode | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY));
    if (f.get() < 0) return FromErrno(errno, Describe(path, name));
    struct stat st;
    if (::fstat(f.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
      return Status(StatusCode::kNotFound,
                    Describe(path, name) + ": not a regular file");
    }
    return f;
  }

  Fd root_;
  std::string dir_;
};

}  // namespace

Status ValidateGroupPath(std::string_view path) {
  if (path.empty()) return Status::Ok();
  if (path.front() == '/') {
    return Invalid("group path must be relative: '" + std::string(path) + "'");
  }
  if (path.find('\0') != std::string_view::npos) {
    return Invalid("group path contains NUL");
  }
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t slash = path.find('/', pos);
    if (slash == std::string_view::npos) slash = path.size();
    const std::string_view c = path.substr(pos, slash - pos);
    if (c.empty() || c == "." || c == "..") {
      return Invalid(
          "group path may not contain empty, '.' or '..' "
          "components: '" +
          std::string(path) + "'");
    }
    pos = slash + 1;
  }
  return Status::Ok();
}

Status ValidateFileName(std::string_view name) {
  if (name.empty() || name == "." || name == ".." ||
      name.find('/') != std::string_view::npos ||
      name.find('\0') != std::string_view::npos) {
    return Invalid("not a file name: '" + std::string(name) + "'");
  }
  return Status::Ok();
}

std::unique_ptr<TreeReader> TreeReader::ForController(Controller& controller) {
  return std::make_unique<ControllerReader>(controller);
}

StatusOr<std::unique_ptr<TreeReader>> TreeReader::ForDirectory(
    std::string_view dir) {
  if (dir.empty()) return Invalid("empty directory path");
  std::string d(dir);
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  Fd root(::open(d.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (root.get() < 0) return FromErrno(errno, d);
  return std::unique_ptr<TreeReader>(
      std::make_unique<DirectoryReader>(std::move(root), std::move(d)));
}

}  // namespace umemcg

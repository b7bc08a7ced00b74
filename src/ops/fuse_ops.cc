// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The mount's file-system operations (libfuse high-level API). Every path
// resolves against the controller: "/" is the root group; "/a/b/NAME" is
// the memory file NAME of group a/b when a/b has it, else the group
// a/b/NAME. Nothing is cached: attribute, entry and negative timeouts are
// 0, so groups created or removed through the API show at once. Errors are
// the file interface's errno (ErrnoOf), or cgroupfs's where the VFS
// decides (EACCES opening for a missing access, EPERM for unsupported
// changes).

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "ops/fuse_fs.h"
#include "umemcg/controller.h"

namespace umemcg::internal {
namespace {

FuseFs& Fs() { return *static_cast<FuseFs*>(fuse_get_context()->private_data); }

int Errno(const Status& s) { return -ErrnoOf(s.code()); }

// What a path names.
struct Node {
  GroupRef group;                    // the directory's group / file's group
  std::unique_ptr<MemoryFile> file;  // set for files
};

// "/a/b" -> "a/b"; "/" -> "".
std::string_view Relative(const char* path) {
  std::string_view p(path);
  while (!p.empty() && p.front() == '/') p.remove_prefix(1);
  return p;
}

// Splits "a/b/c" into "a/b" and "c" ("" and "c" for "c").
void SplitLast(std::string_view p, std::string_view* parent,
               std::string_view* leaf) {
  const size_t slash = p.rfind('/');
  *parent =
      slash == std::string_view::npos ? std::string_view() : p.substr(0, slash);
  *leaf = slash == std::string_view::npos ? p : p.substr(slash + 1);
}

int Resolve(const char* path, Node* node) {
  Controller& c = Fs().controller();
  const std::string_view p = Relative(path);
  if (p.empty()) {
    node->group = GroupRef(&c.root());
    return 0;
  }
  std::string_view parent_path, leaf;
  SplitLast(p, &parent_path, &leaf);
  StatusOr<GroupRef> parent = c.Lookup(parent_path);
  if (!parent.ok()) return -ENOENT;
  StatusOr<std::unique_ptr<MemoryFile>> file =
      MemoryFile::Open(*parent.value(), leaf);
  if (file.ok()) {
    node->group = std::move(parent.value());
    node->file = std::move(file.value());
    return 0;
  }
  StatusOr<GroupRef> group = c.Lookup(p);
  if (!group.ok()) return -ENOENT;
  node->group = std::move(group.value());
  return 0;
}

bool IsFileName(const Group& g, std::string_view name) {
  for (const std::string& f : g.ListFiles()) {
    if (f == name) return true;
  }
  return false;
}

void FillFileStat(const MemoryFile& f, struct stat* st) {
  st->st_mode = S_IFREG | (f.readable() ? 0444 : 0) | (f.writable() ? 0200 : 0);
  st->st_nlink = 1;
  st->st_size = 0;  // as cgroupfs: the text is made at read time
}

void FillCommonStat(struct stat* st) {
  const FuseFs& fs = Fs();
  st->st_uid = fs.uid();
  st->st_gid = fs.gid();
  st->st_atim = st->st_mtim = st->st_ctim = fs.mount_time();
  st->st_blksize = 4096;
}

FuseFs::OpenFile* Handle(const fuse_file_info* fi) {
  return fi == nullptr || fi->fh == 0 ? nullptr : Fs().Find(fi->fh);
}

// ---- Operations ----

void* Init(fuse_conn_info* conn, fuse_config* cfg) {
  cfg->entry_timeout = 0;
  cfg->negative_timeout = 0;
  cfg->attr_timeout = 0;
  cfg->direct_io = 1;  // size 0 files: never serve reads from the page cache
  cfg->kernel_cache = 0;
  cfg->use_ino = 0;
  // Requests are small; plain reads suit our non-blocking loop.
  conn->want &= ~FUSE_CAP_SPLICE_READ;
  return fuse_get_context()->private_data;
}

int GetAttr(const char* path, struct stat* st, fuse_file_info* fi) {
  std::memset(st, 0, sizeof(*st));
  FillCommonStat(st);
  if (FuseFs::OpenFile* f = Handle(fi)) {  // fstat of an open file
    std::lock_guard<std::mutex> lock(f->mu);
    FillFileStat(*f->file, st);
    return 0;
  }
  Node node;
  if (const int err = Resolve(path, &node); err != 0) return err;
  if (node.file) {
    FillFileStat(*node.file, st);
    return 0;
  }
  st->st_mode = S_IFDIR | 0755;
  st->st_nlink = 2 + node.group->NumChildren();
  return 0;
}

int ReadDir(const char* path, void* buf, fuse_fill_dir_t fill, off_t,
            fuse_file_info*, fuse_readdir_flags) {
  Node node;
  if (const int err = Resolve(path, &node); err != 0) return err;
  if (node.file) return -ENOTDIR;
  const Group& g = *node.group;
  fill(buf, ".", nullptr, 0, fuse_fill_dir_flags{});
  fill(buf, "..", nullptr, 0, fuse_fill_dir_flags{});
  for (const std::string& name : g.ListFiles()) {
    fill(buf, name.c_str(), nullptr, 0, fuse_fill_dir_flags{});
  }
  // A group named like a memory file is hidden by the file (the mount
  // refuses to create one: EEXIST). CreateGroup refuses "." and "..".
  for (const std::string& name : g.ChildNames()) {
    if (IsFileName(g, name)) continue;
    fill(buf, name.c_str(), nullptr, 0, fuse_fill_dir_flags{});
  }
  return 0;
}

// Only counted (FuseFs::OpenDirHandles): libfuse allocates and frees the
// directory handle around these.
int OpenDir(const char*, fuse_file_info*) {
  FuseFs::CountDirHandle(1);
  return 0;
}

int ReleaseDir(const char*, fuse_file_info*) {
  FuseFs::CountDirHandle(-1);
  return 0;
}

int Open(const char* path, fuse_file_info* fi) {
  Node node;
  if (const int err = Resolve(path, &node); err != 0) return err;
  if (!node.file) return -EISDIR;
  const int access = fi->flags & O_ACCMODE;
  const bool wants_read = access == O_RDONLY || access == O_RDWR;
  const bool wants_write = access == O_WRONLY || access == O_RDWR;
  // kernfs_fop_open: a missing access is EACCES whoever the opener is.
  if ((wants_read && !node.file->readable()) ||
      (wants_write && !node.file->writable())) {
    return -EACCES;
  }
  auto f = std::make_unique<FuseFs::OpenFile>();
  const std::string_view name = node.file->name();
  f->ticking = name == "cgroup.events";
  f->pollable =
      name == "memory.events" || name == "memory.events.local" || f->ticking;
  f->file = std::move(node.file);
  if (name == "memory.pressure") {
    f->pressure = true;
    FuseFs* fs = &Fs();
    // A trigger armed by a write wakes the poll notifier at each event.
    f->file->SetPressureEventCallback([fs] { fs->WakeNotifier(); });
  }
  if (f->pollable) {
    StatusOr<std::string> text = f->file->Read();
    if (!text.ok()) return Errno(text.status());
    f->seen = std::move(text.value());
  }
  fi->direct_io = 1;
  fi->keep_cache = 0;
  fi->fh = reinterpret_cast<uintptr_t>(f.get());
  Fs().AddOpenFile(f.release());
  return 0;
}

int Release(const char*, fuse_file_info* fi) {
  if (FuseFs::OpenFile* f = Handle(fi)) Fs().ReleaseOpenFile(f);
  return 0;
}

int Read(const char*, char* buf, size_t size, off_t offset,
         fuse_file_info* fi) {
  FuseFs::OpenFile* f = Handle(fi);
  if (f == nullptr) return -EBADF;
  std::lock_guard<std::mutex> lock(f->mu);
  // seq_file: the text is made when reading from the start, and later
  // offsets continue in it.
  if (offset == 0 || !f->have_text) {
    StatusOr<std::string> text = f->file->Read();
    if (!text.ok()) return Errno(text.status());
    f->text = std::move(text.value());
    f->have_text = true;
    if (f->pollable) f->seen = f->text;
  }
  if (offset < 0 || static_cast<size_t>(offset) >= f->text.size()) return 0;
  const size_t n = std::min(size, f->text.size() - static_cast<size_t>(offset));
  std::memcpy(buf, f->text.data() + offset, n);
  return static_cast<int>(n);
}

int Write(const char*, const char* buf, size_t size, off_t,
          fuse_file_info* fi) {
  FuseFs::OpenFile* f = Handle(fi);
  if (f == nullptr) return -EBADF;
  // The kernel's rule: an O_NONBLOCK write to memory.max/high only sets.
  const WriteMode mode = (fi->flags & O_NONBLOCK) != 0 ? WriteMode::kNonBlocking
                                                       : WriteMode::kBlocking;
  std::lock_guard<std::mutex> lock(f->mu);
  // Each write(2) is one complete value, whatever the offset (kernfs).
  const Status s = f->file->Write(std::string_view(buf, size), mode);
  if (!s.ok()) return Errno(s);
  return static_cast<int>(size);
}

int Truncate(const char* path, off_t, fuse_file_info* fi) {
  // O_TRUNC on a writable file (`echo 1G > memory.max`) is accepted and
  // changes nothing, as in cgroupfs.
  if (Handle(fi) != nullptr) return 0;
  Node node;
  if (const int err = Resolve(path, &node); err != 0) return err;
  if (!node.file) return -EISDIR;
  return node.file->writable() ? 0 : -EACCES;
}

int MkDir(const char* path, mode_t) {
  std::string_view parent_path, leaf;
  SplitLast(Relative(path), &parent_path, &leaf);
  Controller& c = Fs().controller();
  StatusOr<GroupRef> parent = c.Lookup(parent_path);
  if (!parent.ok()) return -ENOENT;
  if (IsFileName(*parent.value(), leaf)) return -EEXIST;
  StatusOr<GroupRef> group = c.CreateGroup(*parent.value(), leaf);
  return group.ok() ? 0 : Errno(group.status());
}

int RmDir(const char* path) {
  Node node;
  if (const int err = Resolve(path, &node); err != 0) return err;
  if (node.file) return -ENOTDIR;
  // cgroupfs refuses to remove a cgroup with tasks (EBUSY): here, one with
  // known threads (cgroup.threads). Not atomic with the removal: a thread
  // moved in between keeps charging the parent, as after Group removal.
  StatusOr<std::string> threads = node.group->ReadFile("cgroup.threads");
  if (threads.ok() && !threads.value().empty()) return -EBUSY;
  const Status s = Fs().controller().RemoveGroup(*node.group);
  return s.ok() ? 0 : Errno(s);
}

int Poll(const char*, fuse_file_info* fi, fuse_pollhandle* ph,
         unsigned* revents) {
  FuseFs::OpenFile* f = Handle(fi);
  if (f == nullptr) {
    if (ph != nullptr) fuse_pollhandle_destroy(ph);
    return -EBADF;
  }
  *revents = Fs().Poll(f, ph);
  return 0;
}

int StatFs(const char*, struct statvfs* st) {
  std::memset(st, 0, sizeof(*st));
  st->f_bsize = 4096;
  st->f_frsize = 4096;
  st->f_namemax = 255;
  return 0;
}

// Unsupported changes: EPERM as cgroupfs answers for unlink, mknod.
int Unlink(const char*) { return -EPERM; }
int Rename(const char*, const char*, unsigned) { return -EPERM; }
int Chmod(const char*, mode_t, fuse_file_info*) { return -EPERM; }
int Chown(const char*, uid_t, gid_t, fuse_file_info*) { return -EPERM; }
int MkNod(const char*, mode_t, dev_t) { return -EPERM; }
int SymLink(const char*, const char*) { return -EPERM; }
int Link(const char*, const char*) { return -EPERM; }
// O_CREAT of a new name: the VFS answers EACCES for cgroupfs.
int Create(const char*, mode_t, fuse_file_info*) { return -EACCES; }
// `touch` on an existing file succeeds; times do not change.
int UTimens(const char* path, const timespec*, fuse_file_info*) {
  Node node;
  return Resolve(path, &node);
}

fuse_operations MakeOperations() {
  fuse_operations ops{};
  ops.init = Init;
  ops.getattr = GetAttr;
  ops.opendir = OpenDir;
  ops.readdir = ReadDir;
  ops.releasedir = ReleaseDir;
  ops.open = Open;
  ops.release = Release;
  ops.read = Read;
  ops.write = Write;
  ops.truncate = Truncate;
  ops.mkdir = MkDir;
  ops.rmdir = RmDir;
  ops.poll = Poll;
  ops.statfs = StatFs;
  ops.unlink = Unlink;
  ops.rename = Rename;
  ops.chmod = Chmod;
  ops.chown = Chown;
  ops.mknod = MkNod;
  ops.symlink = SymLink;
  ops.link = Link;
  ops.create = Create;
  ops.utimens = UTimens;
  return ops;
}

// Relaxed: a statistic for tests, read after the mount's threads joined.
std::atomic<int64_t> open_dir_handles{0};

}  // namespace

int64_t FuseFs::OpenDirHandles() {
  return open_dir_handles.load(std::memory_order_relaxed);
}

void FuseFs::CountDirHandle(int64_t delta) {
  open_dir_handles.fetch_add(delta, std::memory_order_relaxed);
}

const fuse_operations& FuseFs::Operations() {
  static const fuse_operations ops = MakeOperations();
  return ops;
}

}  // namespace umemcg::internal

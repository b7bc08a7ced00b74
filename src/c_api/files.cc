// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The C API's file functions (include/umemcg/c.h, "Files"): the one-shot
// umemcg_read_file / umemcg_write_file, and open file handles
// (umemcg_file_t) for what is per handle, as memory.peak resets are. A
// handle is generation-checked like every other and owned by its
// controller's registry, so umemcg_controller_destroy releases it.

#include "umemcg/files.h"

#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "c_api/c_api_internal.h"
#include "c_api/handles.h"
#include "umemcg/c.h"
#include "umemcg/heap_profile.h"

using umemcg::MemoryFile;
using umemcg::WriteMode;
using umemcg::internal::HandleTable;
using umemcg::internal::capi::AcquireGroup;
using umemcg::internal::capi::As;
using umemcg::internal::capi::CheckGroupArg;
using umemcg::internal::capi::CopyOut;
using umemcg::internal::capi::Err;
using umemcg::internal::capi::FromHandle;
using umemcg::internal::capi::GroupUse;
using umemcg::internal::capi::kMaxNameBytes;
using umemcg::internal::capi::kMaxTextBytes;
using umemcg::internal::capi::OwnedPayload;
using umemcg::internal::capi::Register;
using umemcg::internal::capi::Registry;
using umemcg::internal::capi::ToHandle;
using umemcg::internal::capi::ValidString;

namespace {

// An open file. A MemoryFile must not be used by two threads at once, and
// C callers may share a handle between threads: `mu` serializes its calls.
struct FilePayload final : OwnedPayload {
  FilePayload(std::shared_ptr<Registry> r, std::unique_ptr<MemoryFile> f)
      : OwnedPayload(std::move(r)), file(std::move(f)) {}
  ~FilePayload() override { file.reset(); }  // drops its group reference
  std::mutex mu;
  std::unique_ptr<MemoryFile> file;  // guarded by mu
};

struct FileUse {
  HandleTable::Use use;
  FilePayload* payload = nullptr;
};

FileUse AcquireFile(umemcg_file_t* h) {
  FileUse f{HandleTable::Global().Acquire(ToHandle(h))};
  f.payload = As<FilePayload>(f.use);
  return f;
}

}  // namespace

extern "C" int umemcg_read_file(umemcg_group_t* group, const char* name,
                                char* buf, size_t len, size_t* needed) {
  GroupUse g = AcquireGroup(group);
  if (int e = CheckGroupArg(group, g)) return e;
  if (!ValidString(name, kMaxNameBytes)) return EINVAL;
  auto text = g.group()->ReadFile(name);
  if (!text.ok()) return Err(text.status());
  return CopyOut(text.value(), buf, len, needed);
}

extern "C" int umemcg_set_heap_profile_rate(umemcg_group_t* group,
                                            uint64_t bytes) {
  GroupUse g = AcquireGroup(group);
  if (int e = CheckGroupArg(group, g)) return e;
  umemcg::SetHeapProfileRate(*g.group(), umemcg::Bytes(bytes));
  return 0;
}

extern "C" void umemcg_set_heap_profile_page_charges(int on) {
  umemcg::SetHeapProfilePageCharges(on != 0);
}

extern "C" int umemcg_heap_profile(umemcg_group_t* group, int subtree,
                                   void* buf, size_t len, size_t* needed) {
  GroupUse g = AcquireGroup(group);
  if (int e = CheckGroupArg(group, g)) return e;
  const umemcg::HeapProfileEncoder encode = umemcg::GetHeapProfileEncoder();
  if (encode == nullptr) return ENOTSUP;
  const std::string bytes =
      encode(umemcg::SnapshotHeapProfile(*g.group(), subtree != 0));
  if (needed != nullptr) *needed = bytes.size();
  if (buf == nullptr && len != 0) return EINVAL;
  if (len < bytes.size()) return ERANGE;
  std::memcpy(buf, bytes.data(), bytes.size());
  return 0;
}

extern "C" int umemcg_write_file(umemcg_group_t* group, const char* name,
                                 const char* text) {
  GroupUse g = AcquireGroup(group);
  if (int e = CheckGroupArg(group, g)) return e;
  if (!ValidString(name, kMaxNameBytes) || text == nullptr) return EINVAL;
  // Over 4096 bytes is E2BIG (kernfs); past kMaxTextBytes without even
  // measuring the rest.
  if (!ValidString(text, kMaxTextBytes)) return E2BIG;
  return Err(g.group()->WriteFile(name, text));
}

extern "C" int umemcg_file_open(umemcg_group_t* group, const char* name,
                                umemcg_file_t** out) {
  GroupUse g = AcquireGroup(group);
  if (int e = CheckGroupArg(group, g)) return e;
  if (out == nullptr || !ValidString(name, kMaxNameBytes)) return EINVAL;
  auto file = MemoryFile::Open(*g.group(), name);
  if (!file.ok()) return Err(file.status());
  const uintptr_t h = Register(
      g.payload->registry, std::make_unique<FilePayload>(
                               g.payload->registry, std::move(file).value()));
  if (h == 0) return ENOMEM;
  *out = FromHandle<umemcg_file_t>(h);
  return 0;
}

extern "C" int umemcg_file_read(umemcg_file_t* file, char* buf, size_t len,
                                size_t* needed) {
  if (file == nullptr) return EINVAL;
  FileUse f = AcquireFile(file);
  if (f.payload == nullptr) return EBADF;
  std::lock_guard<std::mutex> lock(f.payload->mu);
  auto text = f.payload->file->Read();
  if (!text.ok()) return Err(text.status());
  return CopyOut(text.value(), buf, len, needed);
}

extern "C" int umemcg_file_write(umemcg_file_t* file, const void* buf,
                                 size_t len, uint32_t flags) {
  if (file == nullptr || (buf == nullptr && len != 0)) return EINVAL;
  if ((flags & ~static_cast<uint32_t>(UMEMCG_WRITE_NONBLOCK)) != 0) {
    return EINVAL;
  }
  FileUse f = AcquireFile(file);
  if (f.payload == nullptr) return EBADF;
  const WriteMode mode = (flags & UMEMCG_WRITE_NONBLOCK) != 0
                             ? WriteMode::kNonBlocking
                             : WriteMode::kBlocking;
  std::lock_guard<std::mutex> lock(f.payload->mu);
  return Err(f.payload->file->Write(
      std::string_view(static_cast<const char*>(buf), len), mode));
}

extern "C" int umemcg_file_pressure_event(umemcg_file_t* file, int* fired) {
  if (file == nullptr || fired == nullptr) return EINVAL;
  FileUse f = AcquireFile(file);
  if (f.payload == nullptr) return EBADF;
  std::lock_guard<std::mutex> lock(f.payload->mu);
  if (!f.payload->file->HasPressureTrigger()) return EINVAL;
  *fired = f.payload->file->TakePressureEvent() ? 1 : 0;
  return 0;
}

extern "C" int umemcg_file_close(umemcg_file_t* file) {
  if (file == nullptr) return EINVAL;
  {
    FileUse f = AcquireFile(file);
    if (f.payload == nullptr) return EBADF;
  }
  return HandleTable::Global().Release(ToHandle(file)) ? 0 : EBADF;
}

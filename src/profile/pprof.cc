// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Heap profiles as gzipped pprof profile.proto (heap_profile_pprof.h),
// encoded with libprotobuf from src/profile/profile.proto.

#include <cxxabi.h>
#include <dlfcn.h>
#include <google/protobuf/io/gzip_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <unordered_map>
#include <vector>

#include "profile.pb.h"
#include "umemcg/group.h"
#include "umemcg/heap_profile_pprof.h"

namespace umemcg {
namespace {

namespace pb = perftools::profiles;

// The allocator entry points and the profiler's own frames: pprof drops
// the leading frames up to the last one matching (whole function names).
constexpr const char* kDropFrames =
    "(malloc|calloc|realloc|reallocarray|free|memalign|aligned_alloc|"
    "posix_memalign|valloc|pvalloc|operator new.*|"
    "umemcg::MemoryResource::do_allocate.*|umemcg::NoteHeapAllocation.*|"
    "umemcg::profile::.*|std::pmr::.*allocate.*)";

class StringTable {
 public:
  explicit StringTable(pb::Profile* p) : p_(p) { Index(""); }
  int64_t Index(const std::string& s) {
    auto [it, added] = index_.try_emplace(s, p_->string_table_size());
    if (added) p_->add_string_table(s);
    return it->second;
  }

 private:
  pb::Profile* p_;
  std::unordered_map<std::string, int64_t> index_;
};

struct Segment {
  uintptr_t start;
  uintptr_t limit;
  uint64_t offset;
  std::string file;
  uint64_t id = 0;  // mapping id once used
  bool all_symbolized = true;
};

int AddSegments(struct dl_phdr_info* info, size_t, void* arg) {
  auto* out = static_cast<std::vector<Segment>*>(arg);
  std::string file = info->dlpi_name != nullptr ? info->dlpi_name : "";
  if (file.empty() && out->empty()) {
    // The main program: its path from /proc.
    char buf[4096];
    const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    if (n > 0) file.assign(buf, static_cast<size_t>(n));
  }
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || (ph.p_flags & PF_X) == 0) continue;
    Segment s;
    s.start = info->dlpi_addr + ph.p_vaddr;
    s.limit = s.start + ph.p_memsz;
    s.offset = ph.p_offset;
    s.file = file;
    out->push_back(std::move(s));
  }
  return 0;
}

std::string Demangle(const char* name) {
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status != 0 || d == nullptr) return name;
  std::string out(d);
  std::free(d);
  return out;
}

}  // namespace

std::string EncodeHeapProfilePprof(const HeapProfileSnapshot& snapshot) {
  pb::Profile p;
  StringTable strings(&p);
  for (const char* type :
       {"alloc_objects", "alloc_space", "inuse_objects", "inuse_space"}) {
    pb::ValueType* vt = p.add_sample_type();
    vt->set_type(strings.Index(type));
    vt->set_unit(strings.Index(
        std::strstr(type, "objects") != nullptr ? "count" : "bytes"));
  }
  p.mutable_period_type()->set_type(strings.Index("space"));
  p.mutable_period_type()->set_unit(strings.Index("bytes"));
  p.set_period(static_cast<int64_t>(snapshot.rate.raw()));
  p.set_default_sample_type(strings.Index("inuse_space"));
  p.set_drop_frames(strings.Index(kDropFrames));
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  p.set_time_nanos(static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec);

  std::vector<Segment> segments;
  dl_iterate_phdr(AddSegments, &segments);
  std::sort(
      segments.begin(), segments.end(),
      [](const Segment& a, const Segment& b) { return a.start < b.start; });
  auto segment_of = [&](uintptr_t addr) -> Segment* {
    auto it = std::upper_bound(
        segments.begin(), segments.end(), addr,
        [](uintptr_t a, const Segment& s) { return a < s.start; });
    if (it == segments.begin()) return nullptr;
    --it;
    return addr < it->limit ? &*it : nullptr;
  };

  std::unordered_map<uintptr_t, uint64_t> location_ids;
  std::unordered_map<std::string, uint64_t> function_ids;
  uint64_t segments_used = 0;
  auto location_for = [&](uintptr_t addr) -> uint64_t {
    auto [it, added] = location_ids.try_emplace(addr, location_ids.size() + 1);
    if (!added) return it->second;
    pb::Location* loc = p.add_location();
    loc->set_id(it->second);
    loc->set_address(addr);
    Segment* seg = segment_of(addr);
    // A return address: the call is the byte before it.
    Dl_info info{};
    const bool found = dladdr(reinterpret_cast<void*>(addr - 1), &info) != 0 &&
                       info.dli_sname != nullptr;
    if (found) {
      const std::string name = Demangle(info.dli_sname);
      auto [f, f_added] =
          function_ids.try_emplace(name, function_ids.size() + 1);
      if (f_added) {
        pb::Function* fn = p.add_function();
        fn->set_id(f->second);
        fn->set_name(strings.Index(name));
        fn->set_system_name(strings.Index(info.dli_sname));
        fn->set_filename(
            strings.Index(info.dli_fname != nullptr ? info.dli_fname : ""));
      }
      loc->add_line()->set_function_id(f->second);
    } else if (seg != nullptr) {
      seg->all_symbolized = false;
    }
    if (seg != nullptr) {
      if (seg->id == 0) seg->id = ++segments_used;
      // Mapping written below, once each segment's coverage is known.
      loc->set_mapping_id(seg->id);
    }
    return it->second;
  };

  for (const HeapProfileEntry& e : snapshot.entries) {
    pb::Sample* s = p.add_sample();
    for (uintptr_t addr : e.stack) s->add_location_id(location_for(addr));
    s->add_value(std::llround(e.alloc_objects));
    s->add_value(std::llround(e.alloc_space));
    s->add_value(std::llround(e.inuse_objects));
    s->add_value(std::llround(e.inuse_space));
  }
  // Mappings in id order (ids were handed out in first-use order).
  std::vector<const Segment*> used;
  for (const Segment& seg : segments) {
    if (seg.id != 0) used.push_back(&seg);
  }
  std::sort(used.begin(), used.end(),
            [](const Segment* a, const Segment* b) { return a->id < b->id; });
  uint64_t next_id = 1;
  std::unordered_map<uint64_t, uint64_t> renumber;
  for (const Segment* seg : used) {
    renumber[seg->id] = next_id;
    pb::Mapping* m = p.add_mapping();
    m->set_id(next_id++);
    m->set_memory_start(seg->start);
    m->set_memory_limit(seg->limit);
    m->set_file_offset(seg->offset);
    m->set_filename(strings.Index(seg->file));
    // pprof symbolizes a mapping's addresses from its file unless told
    // that every location already names its function.
    m->set_has_functions(seg->all_symbolized);
  }
  for (pb::Location& loc : *p.mutable_location()) {
    if (loc.mapping_id() != 0) loc.set_mapping_id(renumber[loc.mapping_id()]);
  }

  std::string out;
  {
    google::protobuf::io::StringOutputStream raw(&out);
    google::protobuf::io::GzipOutputStream::Options options;
    options.format = google::protobuf::io::GzipOutputStream::GZIP;
    google::protobuf::io::GzipOutputStream gz(&raw, options);
    p.SerializeToZeroCopyStream(&gz);
    gz.Close();
  }
  return out;
}

std::string HeapProfilePprof(Group& group, bool subtree) {
  return EncodeHeapProfilePprof(SnapshotHeapProfile(group, subtree));
}

void InstallHeapProfileFiles() {
  SetHeapProfileEncoder(&EncodeHeapProfilePprof);
}

Status WriteHeapProfilePprof(Group& group, const std::string& path,
                             bool subtree) {
  const std::string bytes = HeapProfilePprof(group, subtree);
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) {
    return Status(StatusCode::kPermissionDenied,
                  "cannot open " + tmp + ": " + std::strerror(errno));
  }
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  if (std::fclose(f) != 0 || !ok || std::rename(tmp.c_str(), path.c_str())) {
    std::remove(tmp.c_str());
    return Status(StatusCode::kResourceExhausted, "cannot write " + path);
  }
  return Status::Ok();
}

}  // namespace umemcg

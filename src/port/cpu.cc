// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0

#include "port/cpu.h"

#include <fcntl.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace umemcg {
namespace internal {

constinit thread_local int tls_fake_cpu = 0;

// No iostreams here: this runs in every process libumemcg-preload.so is
// loaded into, where building the C++ locale costs more than the rest of
// the controller's start-up.
std::vector<int> ParseCpuList(const std::string& text) {
  std::vector<int> cpus;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    std::string part = text.substr(start, end - start);
    start = end + 1;
    while (!part.empty() && (part.back() == '\n' || part.back() == ' ')) {
      part.pop_back();
    }
    if (part.empty()) continue;
    int lo = 0;
    int hi = 0;
    char extra = 0;
    if (std::sscanf(part.c_str(), "%d-%d%c", &lo, &hi, &extra) == 2) {
    } else if (std::sscanf(part.c_str(), "%d%c", &lo, &extra) == 1) {
      hi = lo;
    } else {
      return {};
    }
    if (lo < 0 || hi < lo || hi > 65535) return {};
    for (int c = lo; c <= hi; ++c) cpus.push_back(c);
  }
  return cpus;
}

std::vector<int> PossibleCpus() {
  const int fd =
      ::open("/sys/devices/system/cpu/possible", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    char buf[4096];
    const ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
    ::close(fd);
    if (n > 0) {
      std::string line(buf, static_cast<size_t>(n));
      const size_t eol = line.find('\n');
      if (eol != std::string::npos) line.resize(eol);
      std::vector<int> cpus = ParseCpuList(line);
      if (!cpus.empty()) return cpus;
    }
  }
  const int n = get_nprocs_conf();
  std::vector<int> cpus;
  for (int c = 0; c < (n > 0 ? n : 1); ++c) cpus.push_back(c);
  return cpus;
}

StatusOr<CpuIdSource> CpuIdSource::Create(CpuSource requested, int nr_cpus) {
  return Create(requested, nr_cpus, PossibleCpus());
}

StatusOr<CpuIdSource> CpuIdSource::Create(CpuSource requested, int nr_cpus,
                                          const std::vector<int>& possible) {
  if (possible.empty()) {
    return Status(StatusCode::kInvalidArgument, "no possible CPUs");
  }
  CpuIdSource s;
  switch (requested) {
    case CpuSource::kAuto:
      s.source_ = RseqAvailable() ? CpuSource::kRseq : CpuSource::kGetcpu;
      break;
    case CpuSource::kRseq:
      if (!RseqAvailable()) {
        return Status(StatusCode::kFailedPrecondition,
                      "cpu_source=rseq: glibc has not registered rseq");
      }
      s.source_ = CpuSource::kRseq;
      break;
    default:
      s.source_ = requested;
  }
  if (nr_cpus > 0) {
    // Explicit shard count: ids 0..nr_cpus-1 map to themselves and
    // larger ids wrap, whatever the machine has.
    s.nr_shards_ = nr_cpus;
    s.dense_limit_ = static_cast<unsigned>(nr_cpus);
    s.identity_ = s.source_ != CpuSource::kFake && possible.back() < nr_cpus;
    return s;
  }
  s.nr_shards_ = static_cast<int>(possible.size());
  if (s.source_ == CpuSource::kFake) {
    s.dense_limit_ = static_cast<unsigned>(s.nr_shards_);
    return s;
  }
  // Identity for the leading run 0, 1, 2, ... of possible ids.
  unsigned dense = 0;
  while (dense < possible.size() &&
         possible[dense] == static_cast<int>(dense)) {
    ++dense;
  }
  s.dense_limit_ = dense;
  s.identity_ = dense == possible.size();
  if (dense < possible.size()) {
    s.id_to_shard_.assign(static_cast<size_t>(possible.back()) + 1, -1);
    for (size_t i = 0; i < possible.size(); ++i) {
      s.id_to_shard_[static_cast<size_t>(possible[i])] = static_cast<int>(i);
    }
  }
  return s;
}

int CpuIdSource::MapSlow(unsigned id) const {
  if (id < id_to_shard_.size() && id_to_shard_[id] >= 0) {
    return id_to_shard_[id];
  }
  return static_cast<int>(id % static_cast<unsigned>(nr_shards_));
}

}  // namespace internal

const char* CpuSourceName(CpuSource source) {
  switch (source) {
    case CpuSource::kAuto:
      return "auto";
    case CpuSource::kRseq:
      return "rseq";
    case CpuSource::kGetcpu:
      return "getcpu";
    case CpuSource::kFake:
      return "fake";
  }
  return "?";
}

std::optional<CpuSource> ParseCpuSource(std::string_view name) {
  for (CpuSource s : {CpuSource::kAuto, CpuSource::kRseq, CpuSource::kGetcpu,
                      CpuSource::kFake}) {
    if (name == CpuSourceName(s)) return s;
  }
  return std::nullopt;
}

bool RseqAvailable() {
#if UMEMCG_HAVE_RSEQ
  if (__rseq_size == 0) return false;
  const auto* area = reinterpret_cast<const struct rseq*>(
      static_cast<const char*>(__builtin_thread_pointer()) + __rseq_offset);
  // RSEQ_CPU_ID_UNINITIALIZED (-1) / REGISTRATION_FAILED (-2) when the
  // kernel refused the registration.
  return static_cast<int32_t>(
             __atomic_load_n(&area->cpu_id, __ATOMIC_RELAXED)) >= 0;
#else
  return false;
#endif
}

void SetFakeCpu(int cpu) {
  UMEMCG_CHECK(cpu >= 0);
  internal::tls_fake_cpu = cpu;
}

int FakeCpu() { return internal::tls_fake_cpu; }

}  // namespace umemcg

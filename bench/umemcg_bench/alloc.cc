// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// alloc (issue 27): the malloc/free pair time and the RSS per live byte of
// the ways umemcg accounts a heap, side by side. One process can hold only
// one allocator as its malloc, so each variant runs in a process of its
// own: umemcg-alloc-bench (linked with libumemcg-jemalloc: jemalloc is its
// malloc) and umemcg-alloc-bench-glibc (glibc's malloc), found next to
// umemcg-bench, the latter also under libumemcg-preload.so (from ../lib).
// Each run of a configuration starts one process (`umemcg-alloc-bench
// one`), so the rounds of all variants interleave as in every scenario.
//
//   glibc            glibc's malloc, unaccounted
//   header-glibc     a MemoryResource charging the active group over
//                    glibc's malloc (16-byte header per block)
//   jemalloc         plain jemalloc, unaccounted: libjemalloc.so.2
//                    preloaded into umemcg-alloc-bench-glibc (its malloc
//                    and free fast paths)
//   jemalloc-routed  the component's malloc with no group active: mallocx
//                    and dallocx on jemalloc's automatic arenas, through
//                    the routing's flags (what a program linked with the
//                    component pays outside any group)
//   header-jemalloc  the MemoryResource over jemalloc (the component's
//                    automatic arenas)
//   jemalloc-arenas  each tenant's allocations in its group's arena,
//                    charged page by page (include/umemcg/jemalloc.h)
//   preload          umemcg-alloc-bench-glibc's plain malloc under
//                    libumemcg-preload.so (header mode, one group)
//   preload-jemalloc the same under the preload's jemalloc mode
//                    (UMEMCG_HEAP=jemalloc, libjemalloc.so.2 preloaded
//                    behind it: the group's arena, no header)
//
// Workload (bench/alloc_bench.cc): sizes 8 B-64 KiB log-uniform, a window
// of 4096 live blocks per thread, 1 and 2 threads (with 2, every second
// block freed by the other thread), 1 and 8 tenants (8: a scope switch
// every 100 allocations; the preload has one group whatever the tenants).
// Fields: ns_per_pair (one thread's time per malloc+free pair), vs_jemalloc
// and vs_glibc (the paired per-round ratios to the unaccounted allocator
// of the same threads and tenants). The mode "rss" rows: rss_<size>, the
// RSS growth per live byte of a child allocating --live-mib of blocks of
// that size, and rss_<size>_vs_jemalloc / _vs_glibc.

#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "harness.h"
#include "scenarios.h"

extern char** environ;

#ifndef UMEMCG_LIBJEMALLOC  // no jemalloc found at configure time
#define UMEMCG_LIBJEMALLOC ""
#endif

namespace umemcg::bench {
namespace {

enum class Preload { kNone, kUmemcg, kJemalloc, kUmemcgJemalloc };

struct AllocVariant {
  const char* name;
  bool jemalloc_binary;  // umemcg-alloc-bench (else -glibc)
  const char* inner;     // umemcg-alloc-bench one --variant
  Preload preload;       // LD_PRELOAD
};

constexpr AllocVariant kAllocVariants[] = {
    {"glibc", false, "plain", Preload::kNone},
    {"header-glibc", false, "header", Preload::kNone},
    {"jemalloc", false, "plain", Preload::kJemalloc},
    {"jemalloc-routed", true, "plain", Preload::kNone},
    {"header-jemalloc", true, "header", Preload::kNone},
    {"jemalloc-arenas", true, "arenas", Preload::kNone},
    {"preload", false, "plain", Preload::kUmemcg},
    {"preload-jemalloc", false, "plain", Preload::kUmemcgJemalloc},
};

std::string ExeDir() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  buf[n] = '\0';
  std::string path(buf);
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

bool Executable(const std::string& path) {
  return access(path.c_str(), X_OK) == 0;
}

// Runs `argv` with the environment changed by `env_changes` ("NAME=value"
// sets, "NAME" removes), returns its stdout (error: it could not start or
// did not exit 0).
StatusOr<std::string> RunCapture(const std::vector<std::string>& argv,
                                 const std::vector<std::string>& env_changes) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return Failed("alloc: pipe failed");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
  std::vector<std::string> env_strings;
  auto name_of = [](const std::string& kv) {
    return kv.substr(0, kv.find('='));
  };
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv(*e);
    bool changed = false;
    for (const std::string& x : env_changes) {
      changed |= name_of(x) == name_of(kv);
    }
    if (!changed) env_strings.push_back(kv);
  }
  for (const std::string& x : env_changes) {
    if (x.find('=') != std::string::npos) env_strings.push_back(x);
  }
  std::vector<char*> args, envp;
  for (const std::string& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = -1;
  const int rc =
      posix_spawn(&pid, args[0], &fa, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    return Failed("alloc: cannot start " + argv[0] + ": " + std::strerror(rc));
  }
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = read(fds[0], buf, sizeof(buf));
    if (n > 0) {
      out.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Failed("alloc: " + argv[0] + " " + argv[1] + " failed (status " +
                  std::to_string(status) + ")");
  }
  return out;
}

struct Tools {
  std::string glibc, jemalloc, preload, libjemalloc;
};

std::vector<std::string> Command(const Tools& t, const AllocVariant& v) {
  return {v.jemalloc_binary ? t.jemalloc : t.glibc, "one", "--variant",
          v.inner};
}

// The preload accounts (no limit, no report), the other variants run
// without it whatever umemcg-bench was started with.
std::vector<std::string> Env(const Tools& t, const AllocVariant& v) {
  std::vector<std::string> env = {"UMEMCG_REPORT", "UMEMCG_MAX", "UMEMCG_HIGH",
                                  "UMEMCG_ENFORCE", "UMEMCG_HEAP"};
  switch (v.preload) {
    case Preload::kNone:
      env.push_back("LD_PRELOAD");
      break;
    case Preload::kUmemcg:
      env.push_back("LD_PRELOAD=" + t.preload);
      break;
    case Preload::kJemalloc:
      env.push_back("LD_PRELOAD=" + t.libjemalloc);
      break;
    case Preload::kUmemcgJemalloc:
      env.push_back("LD_PRELOAD=" + t.preload + " " + t.libjemalloc);
      env.push_back("UMEMCG_HEAP=jemalloc");
      break;
  }
  return env;
}

// The paired per-round ratio of `field` to the `base` variant's result of
// the same threads and mode, as <field-prefix>vs_<base>.
void AddRatios(std::vector<Result>& results, const std::string& base,
               const std::string& field, const std::string& name) {
  for (Result& r : results) {
    for (const Result& b : results) {
      if (b.variant != base || b.threads != r.threads || b.mode != r.mode) {
        continue;
      }
      auto a = r.field_samples.find(field);
      auto c = b.field_samples.find(field);
      if (a == r.field_samples.end() || c == b.field_samples.end()) continue;
      std::vector<double> ratios;
      for (size_t i = 0; i < a->second.size() && i < c->second.size(); ++i) {
        if (c->second[i] > 0) ratios.push_back(a->second[i] / c->second[i]);
      }
      if (ratios.empty()) continue;
      r.fields[name] = Median(ratios);
      r.field_samples[name] = ratios;
    }
  }
}

}  // namespace

StatusOr<std::vector<Result>> RunAlloc(const Params& p) {
  const std::string dir = ExeDir();
  Tools tools{dir + "/umemcg-alloc-bench-glibc", dir + "/umemcg-alloc-bench",
              dir + "/../lib/libumemcg-preload.so", UMEMCG_LIBJEMALLOC};
  if (const char* d = std::getenv("UMEMCG_ALLOC_BENCH_DIR")) {
    tools.glibc = std::string(d) + "/umemcg-alloc-bench-glibc";
    tools.jemalloc = std::string(d) + "/umemcg-alloc-bench";
  }
  if (const char* l = std::getenv("UMEMCG_PRELOAD_LIB")) tools.preload = l;
  if (const char* l = std::getenv("UMEMCG_LIBJEMALLOC")) tools.libjemalloc = l;
  if (!Executable(tools.glibc)) {
    return Failed("alloc: " + tools.glibc +
                  " not found (built with libumemcg-jemalloc)");
  }
  std::vector<const AllocVariant*> variants;
  for (const AllocVariant& v : kAllocVariants) {
    if (!Wanted(p, v.name, ScenarioVariants("alloc"))) continue;
    if (v.jemalloc_binary && !Executable(tools.jemalloc)) continue;
    std::vector<std::string> libs;
    if (v.preload == Preload::kUmemcg ||
        v.preload == Preload::kUmemcgJemalloc) {
      libs.push_back(tools.preload);
    }
    if (v.preload == Preload::kJemalloc ||
        v.preload == Preload::kUmemcgJemalloc) {
      libs.push_back(tools.libjemalloc);
    }
    bool missing = false;
    for (const std::string& lib : libs) {
      if (access(lib.c_str(), R_OK) != 0) {
        std::fprintf(stderr, "umemcg-bench alloc: no %s: no %s variant\n",
                     lib.c_str(), v.name);
        missing = true;
      }
    }
    if (missing) continue;
    variants.push_back(&v);
  }
  const std::vector<int> thread_counts =
      p.threads > 0 ? std::vector<int>{std::min(p.threads, 2)}
                    : std::vector<int>{1, 2};
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%g", p.seconds);
  std::vector<Config> configs;
  for (int threads : thread_counts) {
    for (int tenants : {1, 8}) {
      for (const AllocVariant* v : variants) {
        Config c;
        c.variant = v->name;
        c.threads = threads;
        c.mode = "tenants" + std::to_string(tenants);
        std::vector<std::string> cmd = Command(tools, *v);
        for (const std::string& a :
             {std::string("--threads"), std::to_string(threads),
              std::string("--tenants"), std::to_string(tenants),
              std::string("--seconds"), std::string(seconds)}) {
          cmd.push_back(a);
        }
        const std::vector<std::string> env = Env(tools, *v);
        const double secs = p.seconds;
        c.run = [cmd, env, secs]() -> StatusOr<Sample> {
          auto out = RunCapture(cmd, env);
          if (!out.ok()) return out.status();
          double ns = 0;
          if (std::sscanf(out.value().c_str(), "ns_per_pair %lf", &ns) != 1 ||
              !(ns > 0)) {
            return Failed("alloc: unexpected output: " + out.value());
          }
          Sample s;
          s.seconds = secs;
          s.ops = secs * 1e9 / ns;  // pairs of one thread in the run
          s.fields["ns_per_pair"] = ns;
          return s;
        };
        configs.push_back(std::move(c));
      }
    }
  }
  // RSS per live byte: one process per variant and round, every size.
  for (const AllocVariant* v : variants) {
    Config c;
    c.variant = v->name;
    c.threads = 1;
    c.mode = "rss";
    std::vector<std::string> cmd = Command(tools, *v);
    cmd.push_back("--rss");
    cmd.push_back("--live-mib");
    cmd.push_back(std::to_string(p.live_mib));
    const std::vector<std::string> env = Env(tools, *v);
    c.run = [cmd, env]() -> StatusOr<Sample> {
      auto out = RunCapture(cmd, env);
      if (!out.ok()) return out.status();
      Sample s;
      s.seconds = 1;
      s.ops = 1;
      const char* line = out.value().c_str();
      unsigned long size = 0;
      double ratio = 0;
      int n = 0;
      while (std::sscanf(line, "rss %lu %lf%n", &size, &ratio, &n) == 2) {
        if (!(ratio > 0)) {
          return Failed("alloc: no RSS growth measured at " +
                        std::to_string(size) + " B");
        }
        s.fields["rss_" + std::to_string(size)] = ratio;
        line += n;
        while (*line == '\n') ++line;
      }
      if (s.fields.size() != 14) {
        return Failed("alloc: unexpected RSS output: " + out.value());
      }
      return s;
    };
    configs.push_back(std::move(c));
  }
  auto results = RunInterleaved("alloc", std::move(configs), p);
  if (!results.ok()) return results.status();
  std::vector<Result>& r = results.value();
  AddRatios(r, "jemalloc", "ns_per_pair", "vs_jemalloc");
  AddRatios(r, "glibc", "ns_per_pair", "vs_glibc");
  for (size_t size = 8; size <= 65536; size *= 2) {
    const std::string f = "rss_" + std::to_string(size);
    AddRatios(r, "jemalloc", f, f + "_vs_jemalloc");
    AddRatios(r, "glibc", f, f + "_vs_glibc");
  }
  return results;
}

}  // namespace umemcg::bench

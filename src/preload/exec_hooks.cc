// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// execv and execvp of libumemcg-preload.so: glibc's, plus one repair.
//
// libfuse (3.14, Debian 12's) hands fusermount3 its socket as the
// variable _FUSE_COMMFD, set with setenv() in the child it forks right
// before execv/execvp. bash defines its own setenv, which records the
// variable in bash's tables and leaves `environ` (what execv passes)
// alone; libfuse's call binds to it, so under a preloaded bash fusermount3
// starts without the variable and refuses ("old style mounting not
// supported"): UMEMCG_MOUNT could not mount from bash. These two pass on
// the variables of that protocol when the program's getenv has them and
// `environ` does not; every other exec is glibc's unchanged (execv and
// execvp are execve / execvpe with `environ`, which is what they call).

#include <string.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

extern char** environ;

namespace {

constexpr const char* kRepaired[] = {"_FUSE_COMMFD", "_FUSE_COMMFD2"};

bool InEnviron(const char* name) {
  const size_t len = std::strlen(name);
  if (environ == nullptr) return false;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, name, len) == 0 && (*e)[len] == '=') return true;
  }
  return false;
}

// `environ` plus the protocol's variables it lacks, or `environ` itself.
// Called in a child about to exec (allocating is fine; it is never freed:
// the exec replaces the image, a failed exec is followed by _exit).
char** Environment() {
  const char* missing[2];
  int n = 0;
  for (const char* name : kRepaired) {
    if (InEnviron(name)) continue;
    if (const char* v = std::getenv(name)) {
      const size_t len = std::strlen(name) + 1 + std::strlen(v) + 1;
      char* entry = static_cast<char*>(std::malloc(len));
      if (entry == nullptr) return environ;
      std::strcpy(entry, name);
      std::strcat(entry, "=");
      std::strcat(entry, v);
      missing[n++] = entry;
    }
  }
  if (n == 0) return environ;
  size_t count = 0;
  while (environ != nullptr && environ[count] != nullptr) ++count;
  auto** env =
      static_cast<char**>(std::malloc((count + n + 1) * sizeof(char*)));
  if (env == nullptr) return environ;
  for (size_t i = 0; i < count; ++i) env[i] = environ[i];
  for (int i = 0; i < n; ++i) env[count + i] = const_cast<char*>(missing[i]);
  env[count + n] = nullptr;
  return env;
}

}  // namespace

extern "C" {

int execv(const char* path, char* const argv[]) {
  return execve(path, argv, Environment());
}

int execvp(const char* file, char* const argv[]) {
  return execvpe(file, argv, Environment());
}

}  // extern "C"

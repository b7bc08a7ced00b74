// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The umemcg tool's commands, as functions from a target tree to text, so
// tests can call them without a process. Each works the same on a umemcg
// mount and on a kernel cgroup-v2 hierarchy: they read only the files both
// have (see umemcg/metrics.h).
//
// Targets. TARGET names a group directory. Without a root it is a path
// (DIR or DIR/GROUP) whose components may not be "..": a script that pastes
// an untrusted group name into it cannot climb out. With a root (--root
// DIR) it is a group path below DIR: relative, no "." or ".." components,
// resolved without following symlinks.
//
// Thread safety: plain functions.

#ifndef UMEMCG_TOOLS_COMMANDS_H_
#define UMEMCG_TOOLS_COMMANDS_H_

#include <memory>
#include <string>
#include <string_view>

#include "umemcg/metrics.h"
#include "umemcg/status.h"

namespace umemcg::cli {

struct Target {
  std::unique_ptr<TreeReader> reader;
  std::string group;  // below the reader's directory; "" = the directory
};

// kInvalidArgument for a path with "..", an absolute or otherwise invalid
// group path with a root, or an empty target; kNotFound etc. when the
// directory cannot be opened.
StatusOr<Target> OpenTarget(std::string_view target, std::string_view root);

// The subtree as a table: GROUP (drawn as a tree), CURRENT, HIGH, MAX.
std::string RenderTree(const MetricsSnapshot& snapshot, bool raw);
StatusOr<std::string> TreeCommand(Target& target, bool raw);

// The file's text; a single-size file (memory.current, .max, ...) is shown
// as a human-readable size unless `raw`.
StatusOr<std::string> CatCommand(Target& target, std::string_view file,
                                 bool raw);

// Writes `value` to the file in one write; the error carries the errno's
// text ("Invalid argument", "Device or resource busy", ...).
Status SetCommand(Target& target, std::string_view file,
                  std::string_view value);

// The Prometheus text exposition of the subtree (group labels are paths
// below the opened directory, "/" for the directory itself).
StatusOr<std::string> MetricsCommand(Target& target);

// Copies the group's memory.heap_profile (a gzipped pprof heap profile of
// its subtree; heap_profile.h) to `out` ("-": standard output), for
// `go tool pprof`. kNotFound when the mount has no such file (the program
// installed no heap profile encoder, or a kernel hierarchy).
Status ProfileCommand(Target& target, const std::string& out);

}  // namespace umemcg::cli

#endif  // UMEMCG_TOOLS_COMMANDS_H_

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The umemcg tool's --help text, written to read like its manual page
// (docs/man/umemcg.1, installed as umemcg(1)): CLI11 prints the
// description, the usage, the options and commands, then the footer with
// the sections a manual page has. Keep the three in step; the
// man_pages_test checks that every command and option --help lists is in
// the manual page.

#ifndef UMEMCG_TOOLS_HELP_H_
#define UMEMCG_TOOLS_HELP_H_

namespace umemcg::cli {

inline constexpr char kHelpDescription[] =
    "umemcg - look at and steer cgroup-v2 memory groups of a umemcg mount "
    "or /sys/fs/cgroup";

inline constexpr char kHelpFooter[] = R"(
DESCRIPTION
  A group is a directory; its memory files (memory.current, memory.max,
  memory.events, ...) are the files in it. umemcg reads and writes only the
  files a umemcg FUSE mount (MountFs, UMEMCG_MOUNT, tenant_cache --mount,
  umemcg-demo) and the kernel's /sys/fs/cgroup both have, so the same
  commands work on either. DIR names the directory whose subtree a command
  shows; DIR/GROUP one group's directory. Path components ".." are refused.

COMMANDS
  tree DIR                   the group tree with CURRENT, HIGH and MAX
  top DIR                    refreshing table sorted by usage, with the
                             memory.events raised since the last refresh
                             (keys c m p e n: order; q quits)
  cat DIR/GROUP FILE         one memory file (sizes human-readable unless
                             --bytes)
  set DIR/GROUP FILE VALUE   write one, as `echo VALUE > FILE` (4G, 512M,
                             max); a refused write prints the errno's text
  metrics DIR                the subtree in the Prometheus text format
  profile DIR/GROUP -o FILE  the subtree's sampled heap profile
                             (memory.heap_profile, a gzipped pprof file
                             for `go tool pprof`; a umemcg mount whose
                             program installed the encoder)
  cluster SUBCOMMAND         the cluster quota in Redis (when built with
                             libumemcg-cluster): set-max GROUP SIZE,
                             remove GROUP, tree, top [--once] [-b] [-d S]
                             [-n N]; --redis URL, --prefix PREFIX
  `umemcg COMMAND --help` lists a command's options.

EXIT STATUS
  0 success; 1 the command failed (reason on stderr); 2 bad arguments.

EXAMPLES
  umemcg tree /sys/fs/cgroup
  umemcg top /tmp/tenant-cache
  umemcg --bytes cat /tmp/tenant-cache/tenants/a memory.current
  umemcg set /tmp/tenant-cache/tenants/a memory.max 8M
  umemcg --root /tmp/tenant-cache cat tenants/a memory.events
  umemcg profile /tmp/tenant-cache/tenants/a -o a.pb.gz

SEE ALSO
  umemcg(1) (man umemcg), umemcg-bench(1), systemd-cgtop(1).)";

}  // namespace umemcg::cli

#endif  // UMEMCG_TOOLS_HELP_H_

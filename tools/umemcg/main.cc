// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// umemcg: look at and steer memory groups the way one does kernel cgroups,
// on a umemcg FUSE mount or a cgroup-v2 hierarchy (/sys/fs/cgroup).
//
//   umemcg tree DIR                       the groups, usage and limits
//   umemcg top DIR [--once]               refreshing table, like systemd-cgtop
//   umemcg cat DIR/GROUP FILE             one memory file
//   umemcg set DIR/GROUP FILE VALUE       write one (e.g. memory.max 4G)
//   umemcg metrics DIR                    Prometheus text exposition
//   umemcg profile DIR/GROUP -o FILE      the subtree's heap profile (pprof)
//   umemcg cluster [--redis URL] set-max GROUP SIZE | remove GROUP | tree
//                  | top [--once]         the cluster quota in Redis
//                                         (with libumemcg-cluster)
//
// Global flags: --bytes (raw byte counts instead of "4.0G"), --root DIR
// (then DIR/GROUP arguments are group paths below DIR, never "..", never
// absolute). Exit status: 0 ok, 1 error, 2 usage (bad arguments).

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "commands.h"
#include "help.h"
#include "top.h"
#ifdef UMEMCG_HAVE_CLUSTER
#include "cluster.h"
#include "umemcg/files.h"
#endif

namespace {

using umemcg::Status;
using umemcg::StatusOr;

int Fail(const std::string& command, const Status& s) {
  std::fprintf(stderr, "umemcg %s: %s\n", command.c_str(),
               s.message().empty() ? s.ToString().c_str()
                                   : std::string(s.message()).c_str());
  return 1;
}

int Print(const std::string& command, const StatusOr<std::string>& out) {
  if (!out.ok()) return Fail(command, out.status());
  std::fputs(out.value().c_str(), stdout);
  return 0;
}

#ifdef UMEMCG_HAVE_CLUSTER
// `umemcg cluster ...` (see cluster.h).
struct ClusterCli {
  CLI::App* command = nullptr;
  CLI::App* set_max = nullptr;
  CLI::App* remove = nullptr;
  CLI::App* tree = nullptr;
  CLI::App* top = nullptr;
  std::string redis_url, prefix = "umemcg", group, size;
  umemcg::cli::ClusterTopOptions top_options;
  double delay_s = 1.0;
};

void AddClusterCommands(CLI::App& app, ClusterCli& c) {
  c.command = app.add_subcommand(
      "cluster", "The cluster quota held in Redis: groups, max, leases");
  c.command->require_subcommand(1);
  c.command->add_option("--redis", c.redis_url,
                        "redis://[[user]:password@]host[:port][/db] or "
                        "redis-sentinel://[[user]:password@]host[:port]"
                        "[,host[:port]...]/MASTER_NAME[/db] "
                        "(default: $UMEMCG_REDIS, then 127.0.0.1:6379)");
  c.command->add_option("--prefix", c.prefix, "Key prefix (default umemcg)");
  c.set_max = c.command->add_subcommand(
      "set-max", "Set a cluster group's max (creates it and its parents)");
  c.set_max->add_option("GROUP", c.group, "Cluster group path (a/b)")
      ->required();
  c.set_max->add_option("SIZE", c.size, "Size (64G, max, ...)")->required();
  c.remove = c.command->add_subcommand(
      "remove", "Remove a cluster group without children or leases");
  c.remove->add_option("GROUP", c.group, "Cluster group path")->required();
  c.tree = c.command->add_subcommand(
      "tree", "Cluster groups with usage, max and each node's lease");
  c.top = c.command->add_subcommand(
      "top", "Refreshing table of cluster groups sorted by usage");
  c.top->add_flag("--once", c.top_options.once,
                  "Print one table (deltas over one --delay) and exit");
  c.top->add_flag("-b,--batch", c.top_options.batch,
                  "Print a table per refresh instead of redrawing");
  c.top->add_option("-d,--delay", c.delay_s, "Seconds between refreshes")
      ->check(CLI::Range(0.0, 3600.0));
  c.top
      ->add_option("-n,--iterations", c.top_options.iterations,
                   "Tables to print in batch mode (0: until interrupted)")
      ->check(CLI::NonNegativeNumber);
}

int RunCluster(ClusterCli& c, bool raw) {
  umemcg::ClusterOptions o;
  o.redis_url = c.redis_url;
  o.key_prefix = c.prefix;
  auto cluster = umemcg::Cluster::Connect(o);
  if (!cluster.ok()) return Fail("cluster", cluster.status());
  umemcg::Cluster& cl = *cluster.value();
  if (c.set_max->parsed()) {
    StatusOr<umemcg::Pages> max = umemcg::cli::ParseClusterMax(c.size);
    if (!max.ok()) return Fail("cluster set-max", max.status());
    const Status s = cl.SetMax(c.group, max.value());
    return s.ok() ? 0 : Fail("cluster set-max", s);
  }
  if (c.remove->parsed()) {
    const Status s = cl.RemoveGroup(c.group);
    return s.ok() ? 0 : Fail("cluster remove", s);
  }
  if (c.tree->parsed()) {
    StatusOr<umemcg::ClusterSnapshot> snap = cl.Snapshot();
    if (!snap.ok()) return Fail("cluster tree", snap.status());
    std::fputs(umemcg::cli::RenderClusterTree(snap.value(), raw,
                                              umemcg::cli::TerminalColumns())
                   .c_str(),
               stdout);
    return 0;
  }
  c.top_options.raw = raw;
  c.top_options.delay =
      std::chrono::milliseconds(static_cast<int64_t>(c.delay_s * 1000 + 0.5));
  return umemcg::cli::RunClusterTop(cl, c.top_options);
}
#endif

}  // namespace

int main(int argc, char** argv) {
  namespace cli = umemcg::cli;
  CLI::App app{cli::kHelpDescription, "umemcg"};
  app.require_subcommand(1);
  bool raw = false;
  std::string root;
  app.add_flag("--bytes", raw, "Print sizes as raw byte counts");
  app.add_option("-r,--root", root,
                 "Directory the DIR/GROUP arguments are group paths below "
                 "(relative, no '..')");

  std::string target, file, value;
  auto* tree = app.add_subcommand("tree",
                                  "Show the group tree with usage "
                                  "and limits");
  tree->add_option("DIR", target, "Group directory")->required();

  auto* top = app.add_subcommand(
      "top", "Refreshing table of groups sorted by usage (like systemd-cgtop)");
  top->add_option("DIR", target, "Group directory")->required();
  cli::TopOptions top_options;
  double delay_s = 1.0;
  std::string order = "current";
  top->add_flag("--once", top_options.once,
                "Print one table (events counted over one --delay) and exit");
  top->add_flag("-b,--batch", top_options.batch,
                "Print a table per refresh instead of redrawing");
  top->add_option("-d,--delay", delay_s, "Seconds between refreshes")
      ->check(CLI::Range(0.0, 3600.0));
  top->add_option("-n,--iterations", top_options.iterations,
                  "Tables to print in batch mode (0: until interrupted)")
      ->check(CLI::NonNegativeNumber);
  top->add_option("-o,--order", order,
                  "Sort by current, max, percent, events or name")
      ->check(CLI::IsMember({"current", "max", "percent", "events", "name"}));

  auto* cat = app.add_subcommand("cat", "Print a memory file of a group");
  cat->add_option("DIR/GROUP", target, "Group directory")->required();
  cat->add_option("FILE", file, "File name (memory.current, ...)")->required();

  auto* set = app.add_subcommand("set", "Write a memory file of a group");
  set->add_option("DIR/GROUP", target, "Group directory")->required();
  set->add_option("FILE", file, "File name (memory.max, ...)")->required();
  set->add_option("VALUE", value, "Value (4G, max, ...)")->required();

  auto* metrics = app.add_subcommand(
      "metrics", "Print the tree's metrics in the Prometheus text format");
  metrics->add_option("DIR", target, "Group directory")->required();

  auto* profile = app.add_subcommand(
      "profile",
      "Copy a group's heap profile (memory.heap_profile, gzipped pprof) "
      "for go tool pprof");
  profile->add_option("DIR/GROUP", target, "Group directory")->required();
  std::string profile_out = "-";
  profile->add_option("-o,--output", profile_out,
                      "Output file ('-': standard output)");

#ifdef UMEMCG_HAVE_CLUSTER
  ClusterCli cluster_cli;
  AddClusterCommands(app, cluster_cli);
#endif

  // After the subcommands, which would otherwise inherit it.
  app.footer(cli::kHelpFooter);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help prints and exits 0; bad arguments are exit status 2.
    return app.exit(e) == 0 ? 0 : 2;
  }

  const std::string command = app.get_subcommands().front()->get_name();
#ifdef UMEMCG_HAVE_CLUSTER
  if (cluster_cli.command->parsed()) return RunCluster(cluster_cli, raw);
#endif
  StatusOr<cli::Target> t = cli::OpenTarget(target, root);
  if (!t.ok()) return Fail(command, t.status());

  if (tree->parsed()) return Print(command, cli::TreeCommand(t.value(), raw));
  if (cat->parsed()) {
    return Print(command, cli::CatCommand(t.value(), file, raw));
  }
  if (set->parsed()) {
    const Status s = cli::SetCommand(t.value(), file, value);
    return s.ok() ? 0 : Fail(command, s);
  }
  if (metrics->parsed()) return Print(command, cli::MetricsCommand(t.value()));
  if (profile->parsed()) {
    const Status s = cli::ProfileCommand(t.value(), profile_out);
    return s.ok() ? 0 : Fail(command, s);
  }
  top_options.raw = raw;
  top_options.delay =
      std::chrono::milliseconds(static_cast<int64_t>(delay_s * 1000 + 0.5));
  top_options.order = *cli::ParseTopOrder(order);
  return cli::RunTop(t.value(), top_options);
}

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The server-side Lua scripts of the cluster quota (docs/cluster.md has
// their semantics). Every script starts by collecting expired leases with
// the server's clock, then does its work in one atomic step. All keys share
// the hash tag of KEYS[1] ("{prefix}"), so a Redis Cluster keeps them on
// one shard.
//
// Keys, for prefix P:
//   {P}:g:<path>   hash  max, usage, peak, events_max, events_max_local,
//                        expired (pages in pages; max = 2^51 - 1: no limit),
//                        drain_gen, drains, drain_until (server ms)
//   {P}:l:<path>   hash  node -> pages leased directly on <path>
//   {P}:s:<path>   hash  node -> last request sequence number
//   {P}:exp        zset  "<path>\n<node>" -> expiry (server ms)
//   {P}:groups     set   every group path
//   {P}:removed    set   groups an operator removed (never re-created)
//
// A group's hash also holds `ver` (its configuration version: the server's
// ms clock at the last set_max, strictly increasing) and `learn_until`
// (server ms: the end of the learning window after a re-creation).
//
// Thread safety: constants.

#ifndef UMEMCG_SRC_CLUSTER_SCRIPTS_H_
#define UMEMCG_SRC_CLUSTER_SCRIPTS_H_

namespace umemcg::cluster_internal {

// lease(path, node, seq, want, need, force, ttl_ms) ->
//   {status, lease, ttl_ms, room, usage, max, events_max, limited_by, lost,
//    nodes, learn_left_ms, {path, max, ver, ...}, drain_gen}
// status: 0 granted want, 1 partial (>= need), 2 refused (< need: lease
// unchanged), 3 forced past max (need), 4 stale (seq not newer: nothing
// done), 5 learning (a re-created group grants only claims, with force,
// for learn_left_ms more: lease unchanged, no event counted). room: min
// over the path's levels of max - usage, after the step. lost: 1 when the
// node held no lease there (never had one, or it expired). nodes: lease
// records on the path (live leases and returned ones not yet expired).
// Then the configuration of each level, leaf first, and the sum of the
// levels' drain generations (it rises with every drain there).
extern const char kLeaseScript[];

// drain(path, node, window_ms, cooldown_ms) -> {started, wait_ms}. Asks
// every node holding lease on `path` or below to return its unused lease
// now: raises the group's drain_gen and drains counter and publishes
// "<path>\n<node>" on "{P}:drain". One drain at a time per group: during a
// running drain's window it answers {0, ms left} (join it); within
// cooldown_ms after it, {0, 0} (it did not make room: refuse now).
extern const char kDrainScript[];

// recreate(ttl_ms, path, max, ver, parent, max, ver, ...) -> 1 when this
// call created the leaf group (the first writer), 0 when it existed, -1
// when an operator removed it (the tombstone). Creates every missing level
// from the node's cached configuration with a learning window of ttl_ms;
// an existing level whose version is older takes the cached one.
extern const char kRecreateScript[];

// set_max(path, max_pages) -> usage. Creates the group and missing
// ancestors (unlimited), clears their tombstones and raises the group's
// configuration version. A max below the usage publishes a drain from no
// node ("<path>\n"), so the nodes react at their next poll.
extern const char kSetMaxScript[];

// remove(path) -> 1. UMEMCG_BUSY with children or leased pages. Leaves a
// tombstone in {P}:removed.
extern const char kRemoveScript[];

// snapshot() -> {now_ms, {path, max, usage, peak, events_max,
//   events_max_local, expired, {node, pages, expires_in_ms}...}...}
extern const char kSnapshotScript[];

}  // namespace umemcg::cluster_internal

#endif  // UMEMCG_SRC_CLUSTER_SCRIPTS_H_

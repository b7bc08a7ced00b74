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
//                        expired (pages in pages; max = 2^51 - 1: no limit)
//   {P}:l:<path>   hash  node -> pages leased directly on <path>
//   {P}:s:<path>   hash  node -> last request sequence number
//   {P}:exp        zset  "<path>\n<node>" -> expiry (server ms)
//   {P}:groups     set   every group path
//
// Thread safety: constants.

#ifndef UMEMCG_SRC_CLUSTER_SCRIPTS_H_
#define UMEMCG_SRC_CLUSTER_SCRIPTS_H_

namespace umemcg::cluster_internal {

// lease(path, node, seq, want, need, force, ttl_ms) ->
//   {status, lease, ttl_ms, room, usage, max, events_max, limited_by, lost}
// status: 0 granted want, 1 partial (>= need), 2 refused (< need: lease
// unchanged), 3 forced past max (need), 4 stale (seq not newer: nothing
// done). room: min over the path's levels of max - usage, after the step.
// lost: 1 when the node held no lease there (never had one, or it expired).
extern const char kLeaseScript[];

// set_max(path, max_pages) -> usage. Creates the group and missing
// ancestors (unlimited).
extern const char kSetMaxScript[];

// remove(path) -> 1. UMEMCG_BUSY with children or leased pages.
extern const char kRemoveScript[];

// snapshot() -> {now_ms, {path, max, usage, peak, events_max,
//   events_max_local, expired, {node, pages, expires_in_ms}...}...}
extern const char kSnapshotScript[];

}  // namespace umemcg::cluster_internal

#endif  // UMEMCG_SRC_CLUSTER_SCRIPTS_H_

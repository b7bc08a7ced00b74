// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// OomPolicy's state and victim choice, shared by the OOM handler
// (oom_policy.cc) and the pressure killer (pressure_killer.cc): the
// per-group settings (kill action, oom_score_adj; a map by group id, not
// in Group), the scoring, and the victims whose memory may still be on its
// way back (one victim at a time, whichever of the two killed it).

#ifndef UMEMCG_SRC_OOM_POLICY_POLICY_IMPL_H_
#define UMEMCG_SRC_OOM_POLICY_POLICY_IMPL_H_

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "controller_impl.h"
#include "umemcg/oom_policy.h"

namespace umemcg {

namespace oom_policy_internal {

inline constexpr int kOomScoreAdjMin = -1000;  // OOM_SCORE_ADJ_MIN: never
inline constexpr int kOomScoreAdjMax = 1000;

// Room under `domain`'s max for `n` more pages.
inline bool HasRoom(const Group& domain, uint64_t n) {
  const uint64_t usage = domain.usage().raw();
  const uint64_t max = domain.memory().max().raw();
  return usage <= max && max - usage >= n;
}

struct Settings {
  OomPolicy::KillAction action;
  int adj = 0;
};

}  // namespace oom_policy_internal

struct OomPolicy::Impl {
  using Settings = oom_policy_internal::Settings;
  static constexpr int kOomScoreAdjMin = oom_policy_internal::kOomScoreAdjMin;

  Controller& ctrl;
  OomPolicyOptions options;
  Clock* clock;

  mutable std::mutex mu;
  std::unordered_map<uint64_t, Settings> settings;  // by group id
  // What a victim held just before its kill action ran. `settled`
  // (PageCounter::settled) is what tells whether its memory came back:
  // its usage may include a charge in flight, which a failing charge
  // takes back a moment later without any memory coming back.
  struct Held {
    uint64_t usage;
    int64_t settled;
  };
  static Held HeldBy(Group& g) {
    return {g.usage().raw(), internal::ControllerImpl::Memory(&g).settled()};
  }
  // The victims whose memory may still be on its way back.
  struct Pending {
    GroupRef group;
    int64_t killed_at_ns;
    int64_t settled_at_kill;
  };
  std::vector<Pending> pending;
  Stats stats;

  Impl(Controller& c, OomPolicyOptions o)
      : ctrl(c),
        options(std::move(o)),
        clock(options.clock != nullptr ? options.clock : SystemClock()) {}

  Settings Lookup(const Group& g) const {
    std::lock_guard<std::mutex> lock(mu);
    auto it = settings.find(g.id());
    return it == settings.end() ? Settings{} : it->second;
  }

  // Pre-order walk of `g`'s online subtree (a snapshot taken in one pass
  // under the tree lock; visits run without it).
  template <typename Visit>
  void Walk(Group& g, const Visit& visit) {
    for (auto& [group, leaf] : internal::ControllerImpl::SubtreePreorder(g)) {
      visit(*group, leaf);
    }
  }

  // Usage above effective protection, adjusted (oom_badness). REQUIRES:
  // g's effective protection under `domain` computed (CalculateProtection
  // on every group from domain's child down to g, in that order).
  static uint64_t Score(Group& domain, Group& g, int adj) {
    PageCounter& m = internal::ControllerImpl::Memory(&g);
    const uint64_t usage = m.usage().raw();
    const uint64_t protection =
        &g == &domain ? 0 : std::max(m.emin().raw(), m.elow().raw());
    auto points =
        static_cast<__int128>(usage > protection ? usage - protection : 0);
    points += static_cast<__int128>(adj) *
              static_cast<__int128>(domain.usage().raw()) / 1000;
    return points > 0 ? static_cast<uint64_t>(points) : 0;
  }

  // The candidate (a leaf of `domain` with charge, a kill action and
  // oom_score_adj above -1000) with the highest score; ties go to the
  // larger usage, then the first in a pre-order walk. Candidates for which
  // `preferred(g)` holds win over all others when there is one.
  template <typename Pred>
  GroupRef SelectPreferring(Group& domain, const Pred& preferred,
                            uint64_t* score_out) {
    GroupRef best;
    uint64_t best_score = 0;
    uint64_t best_usage = 0;
    bool best_preferred = false;
    const bool recursive = ctrl.info().recursive_protection;
    Walk(domain, [&](Group& g, bool leaf) {
      // Every level, parents first (the walk is pre-order): a group's
      // effective protection derives from its parent's, as in the
      // kernel's reclaim walk (mem_cgroup_calculate_protection).
      if (&g != &domain) {
        PageCounter::CalculateProtection(
            &internal::ControllerImpl::Memory(&domain),
            &internal::ControllerImpl::Memory(&g), recursive);
      }
      if (!leaf || g.usage().raw() == 0) return;
      const Settings s = Lookup(g);
      if (!s.action || s.adj <= kOomScoreAdjMin) return;
      const uint64_t score = Score(domain, g, s.adj);
      const uint64_t usage = g.usage().raw();
      const bool pref = preferred(g);
      const bool better =
          !best || (pref != best_preferred
                        ? pref
                        : score > best_score ||
                              (score == best_score && usage > best_usage));
      if (better) {
        best = GroupRef(&g);
        best_score = score;
        best_usage = usage;
        best_preferred = pref;
      }
    });
    if (score_out != nullptr) *score_out = best_score;
    return best;
  }

  GroupRef Select(Group& domain, uint64_t* score_out) {
    return SelectPreferring(
        domain, [](Group&) { return false; }, score_out);
  }

  // Records a victim whose memory is on its way back (none: it held none).
  void AddPending(const GroupRef& victim, int64_t now, Held held) {
    if (held.usage == 0) return;
    std::lock_guard<std::mutex> lock(mu);
    pending.push_back({victim, now, held.settled});
  }

  // A previous victim in a domain overlapping `domain` whose memory has
  // not come back. Drops those that are done.
  bool VictimPending(Group& domain) {
    const int64_t now = clock->Now().count();
    std::lock_guard<std::mutex> lock(mu);
    std::erase_if(pending, [&](const Pending& p) {
      // Done: gone, timed out, or its memory started coming back (less
      // settled than at the kill; see Held).
      return !p.group->online() ||
             internal::ControllerImpl::Memory(&*p.group).settled() <
                 p.settled_at_kill ||
             now - p.killed_at_ns >= options.victim_timeout.count();
    });
    for (const Pending& p : pending) {
      if (p.group->IsDescendantOf(domain)) return true;
    }
    return false;
  }

  // Waits up to wait_for_memory for room for n pages under domain.
  bool WaitForRoom(Group& domain, uint64_t n) {
    if (options.wait_for_memory.count() <= 0) return false;
    std::mutex wait_mu;
    std::condition_variable cv;  // never notified: the wait polls
    std::unique_lock<std::mutex> lock(wait_mu);
    const int64_t deadline =
        clock->Now().count() + options.wait_for_memory.count();
    for (;;) {
      if (oom_policy_internal::HasRoom(domain, n)) {
        std::lock_guard<std::mutex> s(mu);
        ++stats.waits_released;
        return true;
      }
      const int64_t left = deadline - clock->Now().count();
      if (left <= 0) break;
      clock->WaitFor(
          cv, lock,
          std::chrono::nanoseconds(std::min<int64_t>(left, 1'000'000)),
          [&] { return oom_policy_internal::HasRoom(domain, n); });
    }
    std::lock_guard<std::mutex> s(mu);
    ++stats.waits_timed_out;
    return false;
  }

  OomOutcome Handle(const OomContext& ctx) {
    OomOutcome out;
    Group& domain = *ctx.over_limit;
    const uint64_t n = ctx.nr_pages.raw();
    if (VictimPending(domain)) {
      {
        std::lock_guard<std::mutex> lock(mu);
        ++stats.blocked_by_pending;
      }
      out.progress = WaitForRoom(domain, n);
      return out;
    }
    uint64_t score = 0;
    GroupRef victim = Select(domain, &score);
    if (!victim) return out;
    if (options.on_victim) options.on_victim(*victim, score);
    // The memory came back before the kill: drop it, retry the charge.
    if (oom_policy_internal::HasRoom(domain, n)) {
      std::lock_guard<std::mutex> lock(mu);
      ++stats.dropped;
      out.progress = true;
      return out;
    }
    // memory.oom.group: the whole marked subtree.
    std::vector<GroupRef> targets;
    if (Group* kg = ctx.KillGroupFor(*victim)) {
      Walk(*kg, [&](Group& g, bool leaf) {
        if (!leaf || g.usage().raw() == 0) return;
        const Settings s = Lookup(g);
        if (s.action && s.adj > kOomScoreAdjMin) targets.emplace_back(&g);
      });
    } else {
      targets.push_back(victim);
    }
    const int64_t now = clock->Now().count();
    for (const GroupRef& t : targets) {
      const Settings s = Lookup(*t);
      if (!s.action) continue;
      const Held held = HeldBy(*t);
      const uint64_t tasks = s.action(*t);
      if (tasks == 0) continue;
      out.victims.emplace_back(t, tasks);
      {
        std::lock_guard<std::mutex> lock(mu);
        ++stats.kills;
      }
      AddPending(t, now, held);
    }
    if (out.victims.empty()) return out;
    out.killed = out.victims.front();
    out.victims.erase(out.victims.begin());
    // Progress: memory came back (at once, or within the wait).
    out.progress =
        oom_policy_internal::HasRoom(domain, n) || WaitForRoom(domain, n);
    return out;
  }
};

}  // namespace umemcg

#endif  // UMEMCG_SRC_OOM_POLICY_POLICY_IMPL_H_

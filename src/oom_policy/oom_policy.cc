// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// OomPolicy (umemcg/oom_policy.h): victim choice, kill, pending victims
// and the wait for memory. Per-group settings live in the policy (a map by
// group id), not in Group.

#include "umemcg/oom_policy.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "controller_impl.h"

namespace umemcg {

namespace {

constexpr int kOomScoreAdjMin = -1000;  // OOM_SCORE_ADJ_MIN: never
constexpr int kOomScoreAdjMax = 1000;

// Room under `domain`'s max for `n` more pages.
bool HasRoom(const Group& domain, uint64_t n) {
  const uint64_t usage = domain.usage().raw();
  const uint64_t max = domain.memory().max().raw();
  return usage <= max && max - usage >= n;
}

struct Settings {
  OomPolicy::KillAction action;
  int adj = 0;
};

}  // namespace

struct OomPolicy::Impl {
  Controller& ctrl;
  OomPolicyOptions options;
  Clock* clock;

  mutable std::mutex mu;
  std::unordered_map<uint64_t, Settings> settings;  // by group id
  // The victims whose memory may still be on its way back.
  struct Pending {
    GroupRef group;
    int64_t killed_at_ns;
    uint64_t usage_at_kill;
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

  // Pre-order walk of `g`'s online subtree.
  template <typename Visit>
  void Walk(Group& g, const Visit& visit) {
    std::vector<std::string> names = g.ChildNames();
    visit(g, names.empty());
    const std::string base = g.path();
    for (const std::string& name : names) {
      StatusOr<GroupRef> c =
          ctrl.Lookup(base.empty() ? name : base + "/" + name);
      if (c.ok()) Walk(*c.value(), visit);
    }
  }

  // Usage above effective protection, adjusted (oom_badness).
  static uint64_t Score(Group& domain, Group& g, int adj, bool recursive) {
    PageCounter& m = internal::ControllerImpl::Memory(&g);
    if (&g != &domain) {
      PageCounter::CalculateProtection(
          &internal::ControllerImpl::Memory(&domain), &m, recursive);
    }
    const uint64_t usage = m.usage().raw();
    const uint64_t protection =
        &g == &domain ? 0 : std::max(m.emin().raw(), m.elow().raw());
    auto points =
        static_cast<__int128>(usage > protection ? usage - protection : 0);
    points += static_cast<__int128>(adj) *
              static_cast<__int128>(domain.usage().raw()) / 1000;
    return points > 0 ? static_cast<uint64_t>(points) : 0;
  }

  GroupRef Select(Group& domain, uint64_t* score_out) {
    GroupRef best;
    uint64_t best_score = 0;
    uint64_t best_usage = 0;
    const bool recursive = ctrl.info().recursive_protection;
    Walk(domain, [&](Group& g, bool leaf) {
      if (!leaf || g.usage().raw() == 0) return;
      const Settings s = Lookup(g);
      if (!s.action || s.adj <= kOomScoreAdjMin) return;
      const uint64_t score = Score(domain, g, s.adj, recursive);
      const uint64_t usage = g.usage().raw();
      if (!best || score > best_score ||
          (score == best_score && usage > best_usage)) {
        best = GroupRef(&g);
        best_score = score;
        best_usage = usage;
      }
    });
    if (score_out != nullptr) *score_out = best_score;
    return best;
  }

  // A previous victim in a domain overlapping `domain` whose memory has
  // not come back. Drops those that are done.
  bool VictimPending(Group& domain) {
    const int64_t now = clock->Now().count();
    std::lock_guard<std::mutex> lock(mu);
    std::erase_if(pending, [&](const Pending& p) {
      // Memory on its way back: none returned yet.
      return !p.group->online() || p.group->usage().raw() < p.usage_at_kill ||
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
      if (HasRoom(domain, n)) {
        std::lock_guard<std::mutex> s(mu);
        ++stats.waits_released;
        return true;
      }
      const int64_t left = deadline - clock->Now().count();
      if (left <= 0) break;
      clock->WaitFor(
          cv, lock,
          std::chrono::nanoseconds(std::min<int64_t>(left, 1'000'000)),
          [&] { return HasRoom(domain, n); });
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
    if (HasRoom(domain, n)) {
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
      const uint64_t usage = t->usage().raw();
      const uint64_t tasks = s.action(*t);
      if (tasks == 0) continue;
      out.victims.emplace_back(t, tasks);
      std::lock_guard<std::mutex> lock(mu);
      ++stats.kills;
      if (usage != 0) pending.push_back({t, now, usage});
    }
    if (out.victims.empty()) return out;
    out.killed = out.victims.front();
    out.victims.erase(out.victims.begin());
    // Progress: memory came back (at once, or within the wait).
    out.progress = HasRoom(domain, n) || WaitForRoom(domain, n);
    return out;
  }
};

OomPolicy::OomPolicy(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
OomPolicy::~OomPolicy() = default;

std::unique_ptr<OomPolicy> OomPolicy::Create(Controller& controller,
                                             OomPolicyOptions options) {
  return std::unique_ptr<OomPolicy>(
      new OomPolicy(std::make_unique<Impl>(controller, std::move(options))));
}

Status OomPolicy::SetKillAction(Group& group, KillAction action) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  Settings& s = impl_->settings[group.id()];
  s.action = std::move(action);
  if (!s.action && s.adj == 0) impl_->settings.erase(group.id());
  return Status::Ok();
}

Status OomPolicy::SetScoreAdj(Group& group, int adj) {
  if (adj < kOomScoreAdjMin || adj > kOomScoreAdjMax) {
    return Status(StatusCode::kOutOfRange, "oom_score_adj: -1000..1000");
  }
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->settings[group.id()].adj = adj;
  return Status::Ok();
}

int OomPolicy::ScoreAdj(const Group& group) const {
  return impl_->Lookup(group).adj;
}

OomHandler OomPolicy::Handler() {
  std::shared_ptr<Impl> impl = impl_;
  return [impl](const OomContext& ctx) { return impl->Handle(ctx); };
}

GroupRef OomPolicy::SelectVictim(Group& domain, uint64_t* score) {
  return impl_->Select(domain, score);
}

OomPolicy::Stats OomPolicy::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->stats;
}

}  // namespace umemcg

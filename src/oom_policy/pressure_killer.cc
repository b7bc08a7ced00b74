// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// PressureKiller (umemcg/pressure_killer.h): per watched group, the time
// its `some` avg10 has been above the limit (systemd-oomd's
// mem_pressure_limit_hit_start) and its last kill; the victim choice is
// OomPolicy's (policy_impl.h) with the thrashing candidates preferred.

#include "umemcg/pressure_killer.h"

#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "oom_policy/policy_impl.h"
#include "port/thread.h"
#include "psi/psi.h"

namespace umemcg {

struct PressureKiller::Impl {
  Impl(std::shared_ptr<OomPolicy::Impl> p, PressureKillerOptions o)
      : policy(std::move(p)), options(std::move(o)), clock(policy->clock) {}

  struct Watched {
    GroupRef group;
    PressureWatch watch;
    std::optional<int64_t> above_since;  // clock ns
    std::optional<int64_t> last_kill;    // clock ns
  };

  const std::shared_ptr<OomPolicy::Impl> policy;
  const PressureKillerOptions options;
  Clock* const clock;

  mutable std::mutex mu;                // guards watches, stats, stop
  std::map<uint64_t, Watched> watches;  // by group id
  Stats stats;
  bool stop = false;
  std::condition_variable cv;  // stop; waited on with run_mu
  std::mutex run_mu;           // held by the thread except while it waits
  std::mutex pass_mu;          // one pass at a time
  std::thread thread;

  // The group's own `some` avg10, 0 while it has no pressure state.
  static uint64_t OwnAvg10(const Group& g) {
    const std::optional<PressureStats> p = internal::Psi::Peek(&g);
    return p ? p->some.avg10 : 0;
  }

  std::vector<PressureKill> Check() {
    std::lock_guard<std::mutex> pass(pass_mu);
    std::vector<std::pair<uint64_t, GroupRef>> snapshot;
    {
      std::lock_guard<std::mutex> lock(mu);
      ++stats.checks;
      for (auto it = watches.begin(); it != watches.end();) {
        if (!it->second.group->online()) {
          it = watches.erase(it);
          continue;
        }
        snapshot.emplace_back(it->first, it->second.group);
        ++it;
      }
    }
    std::vector<PressureKill> kills;
    for (const auto& [id, group] : snapshot) {
      // Read outside mu: a read may fire triggers (application code).
      const PressureStats ps = ReadPressure(*group);
      const int64_t now = clock->Now().count();
      uint64_t limit = 0;
      {
        std::lock_guard<std::mutex> lock(mu);
        auto it = watches.find(id);
        if (it == watches.end()) continue;  // unwatched meanwhile
        Watched& w = it->second;
        if (ps.some.avg10 <= w.watch.avg10_limit) {
          w.above_since.reset();
          continue;
        }
        if (!w.above_since) w.above_since = now;
        if (now - *w.above_since < w.watch.duration.count()) continue;
        if (w.last_kill &&
            now - *w.last_kill < options.post_kill_delay.count()) {
          continue;
        }
        limit = w.watch.avg10_limit;
      }
      if (policy->VictimPending(*group)) {
        std::lock_guard<std::mutex> lock(mu);
        ++stats.blocked;
        continue;
      }
      uint64_t score = 0;
      GroupRef victim = policy->SelectPreferring(
          *group, [limit](Group& c) { return OwnAvg10(c) > limit; }, &score);
      const OomPolicy::KillAction action =
          victim ? policy->Lookup(*victim).action : OomPolicy::KillAction();
      uint64_t tasks = 0;
      uint64_t victim_avg10 = 0;
      OomPolicy::Impl::Held held{};
      if (action) {
        victim_avg10 = OwnAvg10(*victim);
        held = OomPolicy::Impl::HeldBy(*victim);
        tasks = action(*victim);
      }
      if (tasks == 0) {
        std::lock_guard<std::mutex> lock(mu);
        ++stats.no_victim;
        continue;
      }
      policy->AddPending(victim, now, held);
      {
        std::lock_guard<std::mutex> lock(mu);
        ++stats.kills;
        auto it = watches.find(id);
        if (it != watches.end()) {
          it->second.last_kill = now;
          it->second.above_since.reset();  // the duration starts over
        }
      }
      PressureKill k;
      k.watched = group;
      k.victim = victim;
      k.watched_pressure = ps;
      k.victim_avg10 = victim_avg10;
      k.score = score;
      k.tasks = tasks;
      if (options.on_kill) options.on_kill(k);
      kills.push_back(std::move(k));
    }
    return kills;
  }

  void Run() {
    std::unique_lock<std::mutex> wait_lock(run_mu);
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (stop) return;
      }
      Check();
      // Until the interval passed on the clock, or stop (the destructor
      // takes run_mu before notifying, so the wake-up cannot fall between
      // the predicate and the wait).
      clock->WaitFor(cv, wait_lock, options.interval, [this] {
        std::lock_guard<std::mutex> lock(mu);
        return stop;
      });
    }
  }
};

PressureKiller::PressureKiller(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}

PressureKiller::~PressureKiller() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stop = true;
  }
  { std::lock_guard<std::mutex> lock(impl_->run_mu); }
  impl_->cv.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
}

std::unique_ptr<PressureKiller> PressureKiller::Create(
    OomPolicy& policy, PressureKillerOptions options) {
  auto impl = std::make_unique<Impl>(policy.impl_, std::move(options));
  Impl* raw = impl.get();
  std::unique_ptr<PressureKiller> killer(new PressureKiller(std::move(impl)));
  if (raw->options.interval.count() > 0) {
    raw->thread = internal::StartThread([raw] { raw->Run(); });
  }
  return killer;
}

Status PressureKiller::Watch(Group& group, PressureWatch watch) {
  if (watch.avg10_limit > 10000) {
    return Status(StatusCode::kOutOfRange,
                  "pressure watch: avg10_limit 0..10000 (hundredths of %)");
  }
  if (watch.duration.count() < 0) {
    return Status(StatusCode::kOutOfRange, "pressure watch: duration < 0");
  }
  if (!group.online()) {
    return Status(StatusCode::kFailedPrecondition, "group was removed");
  }
  std::lock_guard<std::mutex> lock(impl_->mu);
  Impl::Watched& w = impl_->watches[group.id()];
  w.group = GroupRef(&group);
  w.watch = watch;
  w.above_since.reset();
  return Status::Ok();
}

Status PressureKiller::Unwatch(Group& group) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->watches.erase(group.id()) == 0) {
    return Status(StatusCode::kNotFound, "group is not watched");
  }
  return Status::Ok();
}

std::vector<PressureKill> PressureKiller::Check() { return impl_->Check(); }

PressureKiller::Stats PressureKiller::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->stats;
}

}  // namespace umemcg

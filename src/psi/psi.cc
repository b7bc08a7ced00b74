// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Pressure stall accounting and triggers; see psi.h for the model.

#include "psi/psi.h"

#include <algorithm>
#include <charconv>
#include <condition_variable>
#include <cstdio>
#include <shared_mutex>
#include <thread>

#include "port/fork.h"
#include "port/thread.h"
#include "umemcg/controller.h"

namespace umemcg {
namespace internal {

constinit thread_local PsiThreadState tls_psi;

namespace {

// Fork safety (port/fork.h): every section under a group's mu is inside a
// shared hold of this guard, which the prepare handler takes exclusively,
// so no group's mu is held in a fork child. The sections are short and
// run no application code (callbacks fire after them). Never destroyed.
std::shared_mutex& ForkGuard() {
  static auto* guard = new std::shared_mutex();
  return *guard;
}

void RegisterPsiForFork();

// A section under one group's mu.
struct PsiSection {
  explicit PsiSection(GroupPressure& p) : guard(ForkGuard()), lock(p.mu) {}
  std::shared_lock<std::shared_mutex> guard;
  std::lock_guard<std::mutex> lock;
};

std::atomic<uint64_t> next_tid{1};     // relaxed: unique ids only
std::atomic<uint64_t> next_serial{1};  // relaxed: unique ids only

uint64_t ThreadId() {
  if (tls_psi.tid == 0) {
    tls_psi.tid = next_tid.fetch_add(1, std::memory_order_relaxed);
  }
  return tls_psi.tid;
}

// Kernel fixed_power_int(): x^n in fixed point with frac_bits, rounding
// each product.
uint64_t FixedPowerInt(uint64_t x, unsigned frac_bits, uint64_t n) {
  uint64_t result = uint64_t{1} << frac_bits;
  if (n == 0) return result;
  for (;;) {
    if (n & 1) {
      result *= x;
      result += uint64_t{1} << (frac_bits - 1);
      result >>= frac_bits;
    }
    n >>= 1;
    if (n == 0) break;
    x *= x;
    x += uint64_t{1} << (frac_bits - 1);
    x >>= frac_bits;
  }
  return result;
}

}  // namespace

uint64_t PsiCalcLoad(uint64_t load, uint64_t exp, uint64_t active) {
  uint64_t next = load * exp + active * (kPsiFixed1 - exp);
  if (active >= load) next += kPsiFixed1 - 1;
  return next / kPsiFixed1;
}

uint64_t PsiCalcLoadN(uint64_t load, uint64_t exp, uint64_t active,
                      uint64_t n) {
  return PsiCalcLoad(load, FixedPowerInt(exp, kPsiFShift, n), active);
}

void PsiCalcAvgs(uint64_t avg[3], uint64_t missed, uint64_t time,
                 uint64_t period) {
  if (missed != 0) {
    for (int w = 0; w < 3; ++w)
      avg[w] = PsiCalcLoadN(avg[w], kPsiExp[w], 0, missed);
  }
  // Whole percent, then fixed point, as the kernel rounds.
  const uint64_t pct = time * 100 / period * kPsiFixed1;
  for (int w = 0; w < 3; ++w) avg[w] = PsiCalcLoad(avg[w], kPsiExp[w], pct);
}

uint64_t PsiCentiPercent(uint64_t avg) {
  const uint64_t whole = avg >> kPsiFShift;
  const uint64_t frac = ((avg & (kPsiFixed1 - 1)) * 100) >> kPsiFShift;
  return whole * 100 + frac;
}

GroupPressure::GroupPressure(Clock* c)
    : serial(next_serial.fetch_add(1, std::memory_order_relaxed)), clock(c) {
  RegisterPsiForFork();  // done already by Prepare; a guard check here
  // Made on first need, not with the group: the averages' period grid is
  // anchored at the clock's zero instead of the group's creation, so it
  // does not depend on when that need came (the kernel's starts at the
  // group's creation; either phase is arbitrary to a reader).
  const int64_t now = clock->Now().count();
  state_start = now;
  avg_last_update = now - now % kPsiPeriodNs;
  avg_next_update = avg_last_update + kPsiPeriodNs;
}

// The arithmetic on one group's state. REQUIRES: the group's mu held.
class PsiOps {
 public:
  using P = GroupPressure;

  static void Accumulate(P& p, int64_t now) {
    if (now <= p.state_start) return;
    const auto delta = static_cast<uint64_t>(now - p.state_start);
    if (p.some) p.total[0] += delta;
    if (p.full) p.total[1] += delta;
    p.state_start = now;
  }

  // Chargers seen in the current or previous period.
  static int RecentChargers(P& p) {
    const uint64_t seq = p.seq.load(std::memory_order_relaxed);
    int n = 0;
    for (int i = 0; i < p.nr_chargers; ++i) {
      if (p.chargers[i].seq + 1 >= seq) ++n;
    }
    return n;
  }

  static void Recompute(P& p) {
    p.some = p.nr_stalled > 0;
    const uint64_t seq = p.seq.load(std::memory_order_relaxed);
    const bool overflow =
        p.overflow_seq != UINT64_MAX && p.overflow_seq + 1 >= seq;
    p.full = p.some && !overflow && p.nr_stalled >= RecentChargers(p);
  }

  static void Note(P& p, uint64_t tid) {
    const uint64_t seq = p.seq.load(std::memory_order_relaxed);
    int oldest = -1;
    for (int i = 0; i < p.nr_chargers; ++i) {
      if (p.chargers[i].tid == static_cast<uint32_t>(tid)) {
        p.chargers[i].seq = static_cast<uint32_t>(seq);
        return;
      }
      if (oldest < 0 || p.chargers[i].seq < p.chargers[oldest].seq) oldest = i;
    }
    if (p.nr_chargers < P::kMaxChargers) {
      p.chargers[p.nr_chargers++] = {static_cast<uint32_t>(tid),
                                     static_cast<uint32_t>(seq)};
      return;
    }
    if (p.chargers[oldest].seq + 1 >= seq) {
      p.overflow_seq = seq;  // more current chargers than slots
    }
    p.chargers[oldest] = {static_cast<uint32_t>(tid),
                          static_cast<uint32_t>(seq)};
  }

  // Kernel update_averages() for one whole period ending at the boundary.
  static void UpdatePeriod(P& p) {
    for (int s = 0; s < 2; ++s) {
      uint64_t sample = p.total[s] - p.avg_total[s];
      sample = std::min<uint64_t>(sample, kPsiPeriodNs);
      p.avg_total[s] += sample;
      PsiCalcAvgs(p.avg[s], 0, sample, kPsiPeriodNs);
    }
  }

  // Replays every period boundary up to `now`, then accumulates to now.
  static void AdvanceTo(P& p, int64_t now) {
    while (now >= p.avg_next_update) {
      Accumulate(p, p.avg_next_update);
      const bool idle = p.nr_stalled == 0 && p.total[0] == p.avg_total[0] &&
                        p.total[1] == p.avg_total[1];
      if (idle) {
        // The kernel's worker stopped: on the next update, the missed
        // periods decay at once, and the last one samples nothing.
        const auto missed =
            static_cast<uint64_t>((now - p.avg_next_update) / kPsiPeriodNs);
        for (int s = 0; s < 2; ++s)
          PsiCalcAvgs(p.avg[s], missed, 0, kPsiPeriodNs);
        p.avg_next_update += static_cast<int64_t>(missed + 1) * kPsiPeriodNs;
        p.seq.fetch_add(missed + 1, std::memory_order_relaxed);
        break;
      }
      UpdatePeriod(p);
      p.avg_next_update += kPsiPeriodNs;
      p.seq.fetch_add(1, std::memory_order_relaxed);
    }
    p.avg_last_update = p.avg_next_update - kPsiPeriodNs;
    Accumulate(p, now);
    Recompute(p);
  }

  // Kernel window_update().
  static uint64_t WindowUpdate(PsiTrigger& t, int64_t now, uint64_t value) {
    const auto elapsed = static_cast<uint64_t>(now - t.win_start_time);
    uint64_t growth = value - t.win_start_value;
    if (elapsed > t.window_ns) {
      // window_reset(): the growth of the window just ended, for linear
      // interpolation into the next.
      t.win_start_time = now;
      t.win_start_value = value;
      t.win_prev_growth = growth;
    } else {
      const uint64_t remaining = t.window_ns - elapsed;
      growth += static_cast<uint64_t>(
          static_cast<unsigned __int128>(t.win_prev_growth) * remaining /
          t.window_ns);
    }
    return growth;
  }

  // Kernel update_triggers(): appends the triggers that fire to `fire`.
  static void UpdateTriggers(P& p, int64_t now,
                             std::vector<std::shared_ptr<PsiTrigger>>* fire) {
    for (const auto& tp : p.triggers) {
      PsiTrigger& t = *tp;
      const uint64_t total = p.total[t.state];
      const bool new_stall = total != t.last_total;
      t.last_total = total;
      if (!new_stall && !t.pending_event) continue;
      if (new_stall) {
        const uint64_t growth = WindowUpdate(t, now, total);
        if (!t.pending_event) {
          if (growth < t.threshold_ns) continue;
          t.pending_event = true;
        }
      }
      // At most one event per window.
      if (now < t.last_event_time + static_cast<int64_t>(t.window_ns)) continue;
      t.last_event_time = now;
      t.pending_event = false;
      fire->push_back(tp);
    }
  }
};

namespace {

void Fire(const std::vector<std::shared_ptr<PsiTrigger>>& fire) {
  for (const auto& t : fire) {
    t->event.store(true, std::memory_order_relaxed);
    t->events.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(t->fire_mu);
    if (!t->disarmed && t->on_event) t->on_event();
  }
}

// Stall begin/end in g and every ancestor; `delta` +1 / -1.
void Change(Group* g, int delta) {
  const uint64_t tid = ThreadId();
  if (delta > 0) Psi::Ensure(g);  // a stall may block; StallEnd finds it
  // Small on-stack list: fires are rare, allocation only when one does.
  std::vector<std::shared_ptr<PsiTrigger>> fire;
  // One time for every level, as the kernel's psi_task_change takes one
  // clock reading for the whole walk: a stall then lasts exactly as long in
  // each ancestor as in the group (read per level, an ancestor's total
  // could come out a few microseconds short of its child's).
  const int64_t now = Psi::Of(g)->clock->Now().count();
  for (Group* m = g; m != nullptr; m = m->parent()) {
    GroupPressure& p = *Psi::Of(m);
    PsiSection lock(p);
    // Never before what another thread already brought this level to.
    const int64_t at = std::max(now, p.state_start);
    PsiOps::AdvanceTo(p, at);
    if (delta > 0) PsiOps::Note(p, tid);
    p.nr_stalled += delta;
    PsiOps::Recompute(p);
    if (!p.triggers.empty()) PsiOps::UpdateTriggers(p, at, &fire);
  }
  if (!fire.empty()) Fire(fire);
}

}  // namespace

// Runs on every charge slow path, non-blocking ones included (a signal
// handler's, or a jemalloc extent hook's under an allocator lock), so it
// only try-locks: a busy guard (a fork in prepare) or a busy group lock (this
// thread interrupted inside a section, or another thread in one) skips that
// level's note and leaves the cache unset, so the next slow path notes again.
// A skipped note can only make `full` read true a period early for that
// level; `some` and the totals do not depend on it.
void Psi::Announce(Group* g) {
  const uint64_t tid = ThreadId();
  std::shared_lock<std::shared_mutex> guard(ForkGuard(), std::try_to_lock);
  if (!guard.owns_lock()) return;
  bool all = true;
  for (Group* m = g; m != nullptr; m = m->parent()) {
    // Made for g implies made for every ancestor (Ensure goes up first).
    GroupPressure& p = *Of(m);
    std::unique_lock<std::mutex> lock(p.mu, std::try_to_lock);
    if (!lock.owns_lock()) {
      all = false;
      continue;
    }
    PsiOps::Note(p, tid);
  }
  if (!all) return;
  PsiThreadState& t = tls_psi;
  t.cache[t.next++ % std::size(t.cache)] = {Of(g)->serial, Seq(g)};
}

void Psi::StallBegin(Group* g) { Change(g, +1); }
void Psi::StallEnd(Group* g) { Change(g, -1); }

void Psi::Prepare() {
  (void)ForkGuard();
  RegisterPsiForFork();
}

GroupPressure& Psi::Ensure(Group* g) {
  if (GroupPressure* p = Of(g)) return *p;
  if (g->parent() != nullptr) Ensure(g->parent());
  auto* fresh = new GroupPressure(g->controller_->clock_);
  GroupPressure* expected = g->psi_.load(std::memory_order_acquire);
  for (;;) {
    if (Strip(expected) != nullptr) {  // another thread made it first
      delete fresh;
      return *Strip(expected);
    }
    // Chargers that were not noted (non-blocking charges before the
    // state): `full` cannot be known until they have aged out, so it is
    // held off for this period and the next, as for a full charger table.
    fresh->overflow_seq = expected != nullptr ? 0 : UINT64_MAX;
    // acq_rel: publishes the constructed state; acquire on failure: the
    // winner's state is seen constructed.
    if (g->psi_.compare_exchange_weak(expected, fresh,
                                      std::memory_order_acq_rel,
                                      std::memory_order_acquire)) {
      return *fresh;
    }
  }
}

PressureStats Psi::Read(Group* g) { return ReadState(Ensure(g)); }

std::optional<PressureStats> Psi::Peek(const Group* g) {
  GroupPressure* p = Of(g);
  if (p == nullptr) return std::nullopt;
  return ReadState(*p);
}

PressureStats Psi::ReadState(GroupPressure& p) {
  PressureStats out;
  std::vector<std::shared_ptr<PsiTrigger>> fire;
  {
    PsiSection lock(p);
    const int64_t now = p.clock->Now().count();
    PsiOps::AdvanceTo(p, now);
    if (!p.triggers.empty()) PsiOps::UpdateTriggers(p, now, &fire);
    PressureLine* lines[2] = {&out.some, &out.full};
    for (int s = 0; s < 2; ++s) {
      lines[s]->avg10 = PsiCentiPercent(p.avg[s][0]);
      lines[s]->avg60 = PsiCentiPercent(p.avg[s][1]);
      lines[s]->avg300 = PsiCentiPercent(p.avg[s][2]);
      lines[s]->total_us = p.total[s] / 1000;
    }
  }
  if (!fire.empty()) Fire(fire);
  return out;
}

void Psi::PollGroup(Group* g) {
  GroupPressure& p = *Of(g);
  std::vector<std::shared_ptr<PsiTrigger>> fire;
  {
    PsiSection lock(p);
    const int64_t now = p.clock->Now().count();
    PsiOps::AdvanceTo(p, now);
    PsiOps::UpdateTriggers(p, now, &fire);
  }
  if (!fire.empty()) Fire(fire);
}

namespace {

// The trigger poller (kernel: the rtpoll worker): one thread for the
// process, started with the first trigger, evaluating every armed
// trigger's group each tenth of the smallest window, so that a stall
// that crosses a threshold while it lasts fires within its window. The
// registry is never destroyed (the thread may outlive static
// destructors).
struct Poller {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::weak_ptr<PsiTrigger>> triggers;
  bool started = false;
  bool polling = false;  // a pass holds trigger references

  void Add(const std::shared_ptr<PsiTrigger>& t) {
    std::lock_guard<std::mutex> lock(mu);
    std::erase_if(triggers, [](const std::weak_ptr<PsiTrigger>& w) {
      return w.expired();
    });
    triggers.push_back(t);
    if (!started) {
      started = true;
      StartThread([this] { Run(); }).detach();
    }
    cv.notify_all();
  }
  // Returns once no pass holds `t`: the caller may then drop the last
  // reference to its group.
  void Remove(const PsiTrigger* t) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [this] { return !polling; });
    std::erase_if(triggers, [t](const std::weak_ptr<PsiTrigger>& w) {
      auto s = w.lock();
      return s == nullptr || s.get() == t;
    });
  }
  void Run() {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      if (triggers.empty()) {
        cv.wait(lock);
        continue;
      }
      uint64_t min_window = UINT64_MAX;
      std::vector<std::shared_ptr<PsiTrigger>> live;
      for (const auto& w : triggers) {
        if (auto s = w.lock()) {
          min_window = std::min(min_window, s->window_ns);
          live.push_back(std::move(s));
        }
      }
      polling = true;
      lock.unlock();
      for (const auto& t : live) {
        if (t->group->online()) Psi::PollGroup(t->group.get());
      }
      live.clear();  // drop references outside the lock
      lock.lock();
      polling = false;
      cv.notify_all();
      const auto tick = std::chrono::nanoseconds(
          min_window == UINT64_MAX ? 50'000'000
                                   : min_window / kPsiUpdatesPerWindow);
      cv.wait_for(lock, tick);
    }
  }
};

Poller& ThePoller() {
  static Poller* poller = new Poller();  // never destroyed
  return *poller;
}

// Takes the guard and the poller's lock before fork. The child has no
// poller thread: its next trigger starts one.
class PsiFork final : public ForkParticipant {
 public:
  void PrepareFork() override {
    ForkGuard().lock();
    ThePoller().mu.lock();
  }
  void ParentAfterFork() override {
    ThePoller().mu.unlock();
    ForkGuard().unlock();
  }
  void ChildAfterFork() override {
    Poller& p = ThePoller();
    p.started = false;
    p.polling = false;
    // Fresh locks: glibc's rwlock tells a writer's unlock by the thread
    // id, which the child's thread does not share.
    ReinitInForkChild(p.mu);
    ReinitInForkChild(p.cv);
    ReinitInForkChild(ForkGuard());
  }
};

void RegisterPsiForFork() {
  static PsiFork* fork = [] {
    auto* f = new PsiFork();  // never destroyed
    RegisterForFork(f);
    return f;
  }();
  (void)fork;
}

}  // namespace

Status Psi::Arm(const std::shared_ptr<PsiTrigger>& t) {
  Group* g = t->group.get();
  if (!g->online()) {
    return Status(StatusCode::kFailedPrecondition, "group was removed");
  }
  GroupPressure& p = Ensure(g);
  {
    PsiSection lock(p);
    const int64_t now = p.clock->Now().count();
    PsiOps::AdvanceTo(p, now);
    // Kernel psi_trigger_create: the window starts now.
    t->win_start_time = now;
    t->win_start_value = p.total[t->state];
    t->win_prev_growth = 0;
    t->last_total = p.total[t->state];
    p.triggers.push_back(t);
  }
  ThePoller().Add(t);
  return Status::Ok();
}

void Psi::Disarm(const std::shared_ptr<PsiTrigger>& t) {
  ThePoller().Remove(t.get());
  GroupPressure& p = *Of(t->group.get());
  {
    PsiSection lock(p);
    std::erase(p.triggers, t);
  }
  // Waits for a running callback; none starts after this.
  std::lock_guard<std::mutex> lock(t->fire_mu);
  t->disarmed = true;
}

}  // namespace internal

// ---- Public API ----

PressureStats ReadPressure(Group& group) { return internal::Psi::Read(&group); }

// PsiChargeScope and PsiStallScope in one, out of line (the thread-local
// state is the library's).
MemoryStallScope::MemoryStallScope(Group& group)
    : saved_charging_(internal::tls_psi.charging) {
  internal::PsiThreadState& t = internal::tls_psi;
  if (t.stall_depth++ == 0) {
    stalled_ = &group;
    t.charging = &group;
    internal::Psi::StallBegin(&group);
  }
}

MemoryStallScope::~MemoryStallScope() {
  internal::PsiThreadState& t = internal::tls_psi;
  --t.stall_depth;
  if (stalled_ != nullptr) internal::Psi::StallEnd(stalled_);
  t.charging = saved_charging_;
}

std::string FormatPressure(const PressureStats& stats) {
  std::string out;
  const std::pair<const char*, const PressureLine*> lines[] = {
      {"some", &stats.some}, {"full", &stats.full}};
  for (const auto& [name, l] : lines) {
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "%s avg10=%llu.%02llu avg60=%llu.%02llu avg300=%llu.%02llu "
                  "total=%llu\n",
                  name, static_cast<unsigned long long>(l->avg10 / 100),
                  static_cast<unsigned long long>(l->avg10 % 100),
                  static_cast<unsigned long long>(l->avg60 / 100),
                  static_cast<unsigned long long>(l->avg60 % 100),
                  static_cast<unsigned long long>(l->avg300 / 100),
                  static_cast<unsigned long long>(l->avg300 % 100),
                  static_cast<unsigned long long>(l->total_us));
    out += buf;
  }
  return out;
}

namespace {

// "N.NN" as hundredths; false unless exactly digits, '.', two digits.
bool ParseCenti(std::string_view s, uint64_t* out) {
  const size_t dot = s.find('.');
  if (dot == std::string_view::npos || dot == 0 || s.size() - dot != 3) {
    return false;
  }
  uint64_t whole = 0;
  const char* end = s.data() + dot;
  auto r = std::from_chars(s.data(), end, whole);
  if (r.ec != std::errc() || r.ptr != end) return false;
  if (s[dot + 1] < '0' || s[dot + 1] > '9' || s[dot + 2] < '0' ||
      s[dot + 2] > '9') {
    return false;
  }
  const uint64_t frac = static_cast<uint64_t>(s[dot + 1] - '0') * 10 +
                        static_cast<uint64_t>(s[dot + 2] - '0');
  // Exactly what fits: FormatPressure prints any uint64_t this way.
  if (whole > (UINT64_MAX - frac) / 100) return false;
  *out = whole * 100 + frac;
  return true;
}

bool ParseLine(std::string_view line, PressureLine* out) {
  const char* const keys[] = {"avg10=", "avg60=", "avg300=", "total="};
  uint64_t* fields[] = {&out->avg10, &out->avg60, &out->avg300, &out->total_us};
  for (int i = 0; i < 4; ++i) {
    while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    const std::string_view key = keys[i];
    if (!line.starts_with(key)) return false;
    line.remove_prefix(key.size());
    const size_t sp = std::min(line.find(' '), line.size());
    const std::string_view v = line.substr(0, sp);
    line.remove_prefix(sp);
    if (i < 3) {
      if (!ParseCenti(v, fields[i])) return false;
    } else {
      auto r = std::from_chars(v.data(), v.data() + v.size(), *fields[i]);
      if (r.ec != std::errc() || r.ptr != v.data() + v.size() || v.empty()) {
        return false;
      }
    }
  }
  while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
  return line.empty();
}

}  // namespace

std::optional<PressureStats> ParsePressureFile(std::string_view text) {
  PressureStats stats;
  bool some = false;
  bool full = false;
  while (!text.empty()) {
    const size_t nl = std::min(text.find('\n'), text.size());
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(std::min(nl + 1, text.size()));
    if (line.starts_with("some ")) {
      if (!ParseLine(line.substr(5), &stats.some)) return std::nullopt;
      some = true;
    } else if (line.starts_with("full ")) {
      if (!ParseLine(line.substr(5), &stats.full)) return std::nullopt;
      full = true;
    }
  }
  if (!some || !full) return std::nullopt;
  return stats;
}

namespace {

// The kernel's isspace (lib/ctype.c): ' ', '\t'..'\r' and 0xA0 (Latin-1's
// no-break space, which its table marks as space too).
bool KernelIsSpace(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u == ' ' || (u >= '\t' && u <= '\r') || u == 0xA0;
}

// The kernel's vsscanf for "%u": whitespace skipped, then decimal digits
// (no sign: an unsigned conversion stops at '+' or '-'), the value modulo
// 2^32 as simple_strntoull's wrapping result stored in an unsigned int.
// False if no digit.
bool ScanU32(std::string_view& s, uint32_t* out) {
  size_t i = 0;
  while (i < s.size() && KernelIsSpace(s[i])) ++i;
  const size_t digits = i;
  uint64_t v = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
    v = v * 10 + static_cast<uint64_t>(s[i] - '0');
    v &= 0xffffffffu;  // wraps as the kernel's conversion does
    ++i;
  }
  if (i == digits) return false;
  *out = static_cast<uint32_t>(v);
  s.remove_prefix(i);
  return true;
}

}  // namespace

StatusOr<PressureTriggerSpec> ParsePressureTrigger(std::string_view text) {
  PressureTriggerSpec spec;
  std::string_view s = text;
  if (s.starts_with("some")) {
    spec.state = PressureState::kSome;
  } else if (s.starts_with("full")) {
    spec.state = PressureState::kFull;
  } else {
    return Status(StatusCode::kInvalidArgument,
                  "memory.pressure: expected 'some' or 'full'");
  }
  s.remove_prefix(4);
  uint32_t threshold_us = 0;
  uint32_t window_us = 0;
  if (!ScanU32(s, &threshold_us) || !ScanU32(s, &window_us)) {
    return Status(StatusCode::kInvalidArgument,
                  "memory.pressure: expected '<some|full> <threshold_us> "
                  "<window_us>'");
  }
  if (window_us < internal::kPsiWindowMinUs ||
      window_us > internal::kPsiWindowMaxUs) {
    return Status(StatusCode::kInvalidArgument,
                  "memory.pressure: window must be 500000..10000000 us");
  }
  if (threshold_us == 0 || threshold_us > window_us) {
    return Status(StatusCode::kInvalidArgument,
                  "memory.pressure: threshold must be 1..window us");
  }
  spec.threshold = std::chrono::microseconds(threshold_us);
  spec.window = std::chrono::microseconds(window_us);
  return spec;
}

PressureTrigger::PressureTrigger(std::shared_ptr<internal::PsiTrigger> t)
    : t_(std::move(t)) {}

PressureTrigger::~PressureTrigger() { internal::Psi::Disarm(t_); }

StatusOr<std::unique_ptr<PressureTrigger>> PressureTrigger::Arm(
    Group& group, const PressureTriggerSpec& spec,
    std::function<void()> on_event) {
  const int64_t window_us = spec.window.count();
  const int64_t threshold_us = spec.threshold.count();
  if (window_us < internal::kPsiWindowMinUs ||
      window_us > internal::kPsiWindowMaxUs || threshold_us <= 0 ||
      threshold_us > window_us) {
    return Status(StatusCode::kInvalidArgument,
                  "pressure trigger: window 500000..10000000 us, threshold "
                  "1..window");
  }
  auto t = std::make_shared<internal::PsiTrigger>();
  t->group = GroupRef(&group);
  t->state = spec.state == PressureState::kSome ? 0 : 1;
  t->threshold_ns = static_cast<uint64_t>(threshold_us) * 1000;
  t->window_ns = static_cast<uint64_t>(window_us) * 1000;
  t->on_event = std::move(on_event);
  if (Status st = internal::Psi::Arm(t); !st.ok()) return st;
  return std::unique_ptr<PressureTrigger>(new PressureTrigger(std::move(t)));
}

bool PressureTrigger::TakeEvent() {
  return t_->event.exchange(false, std::memory_order_relaxed);
}

bool PressureTrigger::EventPending() const {
  return t_->event.load(std::memory_order_relaxed);
}

uint64_t PressureTrigger::events() const {
  return t_->events.load(std::memory_order_relaxed);
}

}  // namespace umemcg

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The heap profiler's sampling and its tables (include/umemcg/heap_profile.h,
// src/profile/sampler.h).
//
// Sampling math. Each thread runs one Poisson process over the bytes it
// allocates, with mean interval `base` = the smallest interval configured
// anywhere (default 512 KiB): the countdown to the next point is drawn from
// Exp(1 / base). A block in which a point falls enters the slow path. Its
// group's interval r >= base is reached by thinning: each point is kept
// with probability base / r, which turns the process into one of interval
// r. Only the first point of the block is looked at one by one; whether
// any of the later ones (in the `after` bytes that follow it) survives is
// one draw with probability 1 - exp(-after / r), the same thinned process.
// The next countdown is drawn afresh after the block (the process is
// memoryless). A block of s bytes is therefore sampled with probability
// 1 - exp(-s / r), and each sample stands for 1 / (1 - exp(-s / r))
// blocks and s times that bytes (what pprof expects of Poisson samples,
// as Go's runtime scales its heap profile).
//
// Tables. Everything lives in memory mapped by this file (never malloc: the
// preload calls in from inside malloc), under one mutex, taken only on the
// slow path, by frees of sampled blocks, by readers, when an objcg is
// freed, and by the fork handlers across fork() (sampler.h). Sites (an owner
// objcg and a stack) hold the cumulative and in-use values; records (one per
// live sampled block) map a block's address to its site and weights. A site
// holds no reference on its objcg: the objcg's free (Controller::FreeObjCgroup)
// drops its sites, after adding their cumulative values to the sites of the
// objcg that inherits its charges (its nearest online ancestor's), so a removed
// group's history stays in its ancestors' profiles after its objcg is gone.

#include "profile/sampler.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unwind.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <new>

#include "port/fork.h"
#include "profile/sample_math.h"
#include "umemcg/controller.h"
#include "umemcg/group.h"
#include "umemcg/heap_profile.h"
#include "umemcg/obj_cgroup.h"

namespace umemcg {
namespace profile {

constinit thread_local ThreadSampler tls_sampler
    __attribute__((tls_model("initial-exec")));
// Relaxed: see sampler.h.
constinit std::atomic<bool> g_page_charges{false};

namespace {

// Countdown when sampling cannot decide now (nested in the slow path, or
// sampled allocations of a group that is off): check again after this
// many bytes.
constexpr int64_t kRecheckBytes = 64 << 20;

// ---- Memory: mapped, never returned ----

void* MapZeroed(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

struct Site {
  Site* next;
  // No reference: the objcg's free removes its sites first
  // (ForgetObjCgroup), so a site's objcg is alive while g_mu is held.
  ObjCgroup* objcg;
  uint64_t hash;
  uint32_t nframes;
  uint64_t alloc_samples;
  uint64_t inuse_samples;
  uint64_t alloc_sampled_bytes;  // unscaled
  uint64_t inuse_sampled_bytes;
  double alloc_objects;
  double alloc_space;
  double inuse_objects;
  double inuse_space;
  uintptr_t frames[kHeapProfileMaxFrames];
};

struct Record {
  Record* next;
  uintptr_t block;
  Site* site;
  uint64_t size;
  double objects;
  double space;
};

template <typename T>
struct HashTable {
  T** buckets = nullptr;
  size_t mask = 0;
  size_t count = 0;
};

// Everything below is guarded by g_mu.
pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
HashTable<Site> g_sites;
HashTable<Record> g_records;
Record* g_free_records = nullptr;
Site* g_free_sites = nullptr;
char* g_arena = nullptr;
size_t g_arena_left = 0;
uint64_t g_live = 0;

// ---- Page samples ----
//
// A page charge has no address: its sample gets a key of its own (bit 63,
// never a user-space address) from its objcg's queue, oldest first. An
// uncharge whose countdown expired stands for size / p(size) uncharged
// bytes (the same estimator as a sample's): that credit releases the
// queue's oldest samples, so a group's estimated in-use page bytes follow
// charged minus uncharged, and each sample leaves in charge order.
constexpr uintptr_t kPageKey = uintptr_t{1} << 63;
constexpr int kPageQueues = 4096;
constexpr int kQueueShift = 40;
struct PageQueue {
  const ObjCgroup* objcg;  // null: free slot
  uint64_t head;           // oldest live sequence number
  uint64_t tail;           // next sequence number
  double credit;           // uncharged bytes not yet released
};
PageQueue g_page_queues[kPageQueues];  // guarded by g_mu
int g_page_queues_used = 0;            // slots ever used (scan bound)

// Rates: (controller or group) -> interval. Few entries; a linear scan on
// the slow path.
struct RateEntry {
  const void* key;         // Controller* or Group*
  const void* controller;  // the controller (key itself, or the group's)
  uint64_t group_id;       // the group's id, 0 for a controller
  bool is_group;
  uint64_t rate;
};
constexpr int kMaxRates = 1024;
RateEntry g_rates[kMaxRates];
int g_nrates = 0;
// g_nrates, readable without g_mu: group frees skip the lock when no rate
// was ever set. Relaxed: set under g_mu before the entry can matter to a
// free (the setter holds a reference to the group).
std::atomic<int> g_nrates_hint{0};
// The smallest interval in force anywhere (never 0); what every thread's
// countdown is drawn with. Relaxed: a stale value only changes how often
// threads enter the slow path until their next draw, never a decision's
// probabilities (these use the group's own rate).
std::atomic<uint64_t> g_base_rate{kDefaultHeapProfileRate.raw()};
std::atomic<StackCapture> g_capture{StackCapture::kUnwindTables};

class Locked {
 public:
  Locked() { pthread_mutex_lock(&g_mu); }
  ~Locked() { pthread_mutex_unlock(&g_mu); }
  Locked(const Locked&) = delete;
  Locked& operator=(const Locked&) = delete;
};

void* ArenaAlloc(size_t bytes) {
  bytes = (bytes + 63) & ~size_t{63};
  if (g_arena_left < bytes) {
    const size_t chunk = std::max<size_t>(bytes, 1 << 20);
    g_arena = static_cast<char*>(MapZeroed(chunk));
    if (g_arena == nullptr) {
      g_arena_left = 0;
      return nullptr;
    }
    g_arena_left = chunk;
  }
  void* p = g_arena;
  g_arena += bytes;
  g_arena_left -= bytes;
  return p;
}

// Grows `t` to twice as many buckets when it holds more entries than
// buckets. Returns false if the table has no buckets and none could be
// mapped.
template <typename T, typename KeyOf>
bool Reserve(HashTable<T>& t, KeyOf key_of) {
  if (t.buckets != nullptr && t.count <= t.mask) return true;
  const size_t n = t.buckets == nullptr ? 4096 : (t.mask + 1) * 2;
  T** fresh = static_cast<T**>(MapZeroed(n * sizeof(T*)));
  if (fresh == nullptr) return t.buckets != nullptr;
  if (t.buckets != nullptr) {
    for (size_t i = 0; i <= t.mask; ++i) {
      for (T* e = t.buckets[i]; e != nullptr;) {
        T* next = e->next;
        const size_t b = key_of(e) & (n - 1);
        e->next = fresh[b];
        fresh[b] = e;
        e = next;
      }
    }
    munmap(t.buckets, (t.mask + 1) * sizeof(T*));
  }
  t.buckets = fresh;
  t.mask = n - 1;
  return true;
}

uint64_t Mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

uint64_t BlockKey(const Record* r) { return Mix(r->block); }
uint64_t SiteKey(const Site* s) { return s->hash; }

// ---- Random numbers ----

uint64_t NextRandom(ThreadSampler& t) {
  // xorshift64*
  uint64_t x = t.rng;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  t.rng = x;
  return x * 0x2545f4914f6cdd1dull;
}

// Uniform in (0, 1].
double Uniform(ThreadSampler& t) {
  return static_cast<double>((NextRandom(t) >> 11) + 1) * 0x1.0p-53;
}

int64_t DrawCountdown(ThreadSampler& t, uint64_t mean) {
  const double d = -Log(Uniform(t)) * static_cast<double>(mean);
  return static_cast<int64_t>(std::min(d, 0x1.0p62)) + 1;
}

void SeedThread(ThreadSampler& t, uint64_t seed) {
  t.rng = Mix(seed + 0x9e3779b97f4a7c15ull) | 1;
}

// ---- Rates ----

RateEntry* FindRate(const void* key, uint64_t group_id, bool is_group) {
  for (int i = 0; i < g_nrates; ++i) {
    RateEntry& e = g_rates[i];
    if (e.key == key && e.is_group == is_group && e.group_id == group_id) {
      return &e;
    }
  }
  return nullptr;
}

void RecomputeBase() {
  uint64_t base = kDefaultHeapProfileRate.raw();
  for (int i = 0; i < g_nrates; ++i) {
    if (g_rates[i].rate != 0) base = std::min(base, g_rates[i].rate);
  }
  g_base_rate.store(base, std::memory_order_relaxed);
}

void SetRate(const void* key, const void* controller, uint64_t group_id,
             bool is_group, uint64_t rate) {
  Locked lock;
  if (RateEntry* e = FindRate(key, group_id, is_group)) {
    e->rate = rate;
  } else if (g_nrates < kMaxRates) {
    g_rates[g_nrates++] = {key, controller, group_id, is_group, rate};
  }
  g_nrates_hint.store(g_nrates, std::memory_order_relaxed);
  RecomputeBase();
}

// Removes the entries whose key or controller is `key`.
void RemoveRatesLocked(const void* key, bool by_controller) {
  for (int i = 0; i < g_nrates;) {
    const RateEntry& e = g_rates[i];
    if (e.key == key || (by_controller && e.controller == key)) {
      g_rates[i] = g_rates[--g_nrates];
    } else {
      ++i;
    }
  }
  g_nrates_hint.store(g_nrates, std::memory_order_relaxed);
  RecomputeBase();
}

void ClearRate(const void* key, uint64_t group_id) {
  Locked lock;
  if (RateEntry* e = FindRate(key, group_id, true)) {
    *e = g_rates[--g_nrates];
  }
  g_nrates_hint.store(g_nrates, std::memory_order_relaxed);
  RecomputeBase();
}

// REQUIRES: g_mu held; `g` referenced by the caller (its ancestors then
// are too).
uint64_t RateForLocked(const Group& g) {
  for (const Group* a = &g; a != nullptr; a = a->parent()) {
    if (const RateEntry* e = FindRate(a, a->id(), true)) return e->rate;
  }
  if (const RateEntry* e = FindRate(&g.controller(), 0, false)) {
    return e->rate;
  }
  return kDefaultHeapProfileRate.raw();
}

// ---- Stacks ----

struct UnwindState {
  uintptr_t* frames;
  int n;
  int max;
};

_Unwind_Reason_Code UnwindOne(struct _Unwind_Context* ctx, void* arg) {
  auto* s = static_cast<UnwindState*>(arg);
  const uintptr_t ip = _Unwind_GetIP(ctx);
  if (ip == 0) return _URC_END_OF_STACK;
  s->frames[s->n++] = ip;
  return s->n < s->max ? _URC_NO_REASON : _URC_END_OF_STACK;
}

struct StackBounds {
  uintptr_t lo = 0;
  uintptr_t hi = 0;
};
constinit thread_local StackBounds tls_stack;

// The calling thread's stack, once per thread (pthread_getattr_np may
// allocate; the caller is inside the slow path's busy section).
const StackBounds& ThreadStack() {
  if (tls_stack.hi == 0) {
    pthread_attr_t attr;
    void* addr = nullptr;
    size_t size = 0;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
      pthread_attr_getstack(&attr, &addr, &size);
      pthread_attr_destroy(&attr);
    }
    tls_stack.lo = reinterpret_cast<uintptr_t>(addr);
    tls_stack.hi = reinterpret_cast<uintptr_t>(addr) + size;
    if (tls_stack.hi == 0) tls_stack.hi = 1;  // unknown: no walk
  }
  return tls_stack;
}

// Walks the frame-pointer chain from this function's frame, stopping at
// the first link that leaves the thread's stack or does not go up it.
// Compiled with frame pointers (CMakeLists.txt) so that its own frame has
// one; callers without them show as missing frames.
[[gnu::noinline]] int CaptureFramePointers(uintptr_t* frames, int max) {
  const StackBounds& b = ThreadStack();
  auto* fp = static_cast<uintptr_t*>(__builtin_frame_address(0));
  int n = 0;
  while (n < max) {
    const auto addr = reinterpret_cast<uintptr_t>(fp);
    if (addr < b.lo || addr + 2 * sizeof(uintptr_t) > b.hi ||
        (addr & (sizeof(uintptr_t) - 1)) != 0) {
      break;
    }
    const uintptr_t ip = fp[1];
    if (ip == 0) break;
    frames[n++] = ip;
    auto* next = reinterpret_cast<uintptr_t*>(fp[0]);
    if (next <= fp) break;
    fp = next;
  }
  return n;
}

// libunwind's unw_backtrace, loaded with dlopen at the first sample when
// libunwind.so.8 is installed (Debian libunwind8): it caches how to unwind
// each return address and is far faster than libgcc's unwinder
// (profile_benchmark). Never waited for: a thread that finds another one
// loading it uses libgcc's for that sample, so a thread inside the dynamic
// loader that allocates can never wait on one that waits for the loader.
using UnwBacktrace = int (*)(void**, int);
std::atomic<int> g_unw_state{0};  // 0 not tried, 1 loading, 2 done
std::atomic<UnwBacktrace> g_unw{nullptr};

#if defined(__SANITIZE_THREAD__)
#define UMEMCG_PROFILE_NO_LIBUNWIND 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UMEMCG_PROFILE_NO_LIBUNWIND 1
#endif
#endif

UnwBacktrace Libunwind() {
#ifdef UMEMCG_PROFILE_NO_LIBUNWIND
  // Under ThreadSanitizer libunwind's thread-exit destructor takes a
  // mutex after TSan let go of the thread (a crash): libgcc's unwinder.
  return nullptr;
#endif
  int state = g_unw_state.load(std::memory_order_acquire);
  if (state == 2) return g_unw.load(std::memory_order_relaxed);
  if (state != 0 || !g_unw_state.compare_exchange_strong(
                        state, 1, std::memory_order_acq_rel)) {
    return nullptr;
  }
  UnwBacktrace f = nullptr;
  if (void* h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL)) {
    f = reinterpret_cast<UnwBacktrace>(dlsym(h, "unw_backtrace"));
  }
  // Relaxed: published by the release store of the state below.
  g_unw.store(f, std::memory_order_relaxed);
  g_unw_state.store(2, std::memory_order_release);
  return f;
}

[[gnu::noinline]] int CaptureUnwind(uintptr_t* frames, int max) {
  if (UnwBacktrace unw = Libunwind()) {
    return unw(reinterpret_cast<void**>(frames), max);
  }
  UnwindState s{frames, 0, max};
  _Unwind_Backtrace(UnwindOne, &s);
  return s.n;
}

// Captures the stack and cuts the frames below `entry_return` (or, without
// one, the profiler's own two). Returns the number kept in `out`.
int CaptureStack(uintptr_t* out, const void* entry_return) {
  constexpr int kSlack = 16;  // the allocator's and the profiler's frames
  uintptr_t raw[kHeapProfileMaxFrames + kSlack];
  const int n =
      g_capture.load(std::memory_order_relaxed) == StackCapture::kFramePointers
          ? CaptureFramePointers(raw, kHeapProfileMaxFrames + kSlack)
          : CaptureUnwind(raw, kHeapProfileMaxFrames + kSlack);
  int first = std::min(n, 2);
  const auto ra = reinterpret_cast<uintptr_t>(entry_return);
  if (ra != 0) {
    for (int i = 0; i < n && i < kSlack; ++i) {
      if (raw[i] == ra) {
        first = i;
        break;
      }
    }
  }
  const int kept = std::min(n - first, kHeapProfileMaxFrames);
  std::memcpy(out, raw + first, static_cast<size_t>(kept) * sizeof(uintptr_t));
  return kept;
}

uint64_t HashStack(const ObjCgroup* objcg, const uintptr_t* frames, int n) {
  uint64_t h = Mix(reinterpret_cast<uintptr_t>(objcg) + 0x1234567);
  for (int i = 0; i < n; ++i) h = Mix(h ^ (frames[i] + 0x9e3779b97f4a7c15ull));
  return h;
}

// REQUIRES: g_mu held.
Site* FindOrAddSiteLocked(ObjCgroup* objcg, const uintptr_t* frames, int n) {
  const uint64_t hash = HashStack(objcg, frames, n);
  if (g_sites.buckets != nullptr) {
    for (Site* s = g_sites.buckets[hash & g_sites.mask]; s != nullptr;
         s = s->next) {
      if (s->hash == hash && s->objcg == objcg &&
          s->nframes == static_cast<uint32_t>(n) &&
          std::memcmp(s->frames, frames, n * sizeof(uintptr_t)) == 0) {
        return s;
      }
    }
  }
  if (!Reserve(g_sites, SiteKey)) return nullptr;
  Site* s = g_free_sites;
  if (s != nullptr) {
    g_free_sites = s->next;
    std::memset(static_cast<void*>(s), 0, sizeof(Site));
  } else {
    s = static_cast<Site*>(ArenaAlloc(sizeof(Site)));
    if (s == nullptr) return nullptr;
  }
  // The caller holds a reference to objcg (SampleSlow's contract), so the
  // site may take one.
  s->objcg = objcg;
  s->hash = hash;
  s->nframes = static_cast<uint32_t>(n);
  std::memcpy(s->frames, frames, n * sizeof(uintptr_t));
  const size_t b = hash & g_sites.mask;
  s->next = g_sites.buckets[b];
  g_sites.buckets[b] = s;
  ++g_sites.count;
  return s;
}

// REQUIRES: g_mu held.
Record* TakeRecordLocked(uintptr_t block) {
  if (g_records.buckets == nullptr) return nullptr;
  Record** link = &g_records.buckets[Mix(block) & g_records.mask];
  for (Record* r = *link; r != nullptr; link = &r->next, r = r->next) {
    if (r->block == block) {
      *link = r->next;
      --g_records.count;
      return r;
    }
  }
  return nullptr;
}

void ReleaseRecordLocked(Record* r) {
  Site* s = r->site;
  s->inuse_samples -= 1;
  s->inuse_sampled_bytes -= r->size;
  s->inuse_objects -= r->objects;
  s->inuse_space -= r->space;
  if (s->inuse_samples == 0) {  // no rounding residue
    s->inuse_objects = 0;
    s->inuse_space = 0;
  }
  --g_live;
  r->next = g_free_records;
  g_free_records = r;
}

}  // namespace

// ---- Fork (an innermost participant of port/fork.h) ----

namespace {

class ProfilerFork final : public internal::ForkParticipant {
 public:
  void PrepareFork() override { pthread_mutex_lock(&g_mu); }
  void ParentAfterFork() override { pthread_mutex_unlock(&g_mu); }
  // The child's copy of g_mu was taken by this thread in PrepareFork (so no
  // table or rate is half updated here). The profile starts empty in the
  // child; the rates stay. The parent's tables stay mapped and unreferenced
  // (copies of its pages); the objcg references they hold are the parent's
  // business.
  void ChildAfterFork() override {
    pthread_mutex_unlock(&g_mu);
    g_sites = {};
    g_records = {};
    g_free_records = nullptr;
    g_free_sites = nullptr;
    g_arena = nullptr;
    g_arena_left = 0;
    g_live = 0;
    std::memset(static_cast<void*>(g_page_queues), 0, sizeof(g_page_queues));
    g_page_queues_used = 0;
  }
};

}  // namespace

void RegisterForFork() {
  static ProfilerFork participant;  // never destroyed before exit's handlers
  static std::once_flag once;
  std::call_once(once,
                 [] { internal::RegisterInnermostForFork(&participant); });
}

bool SampleDecide(ObjCgroup* owner, uint64_t size, uint64_t* rate_out) {
  ThreadSampler& t = tls_sampler;
  if (t.busy != 0) {  // an allocation made by the slow path itself
    t.bytes_until_sample = kRecheckBytes;
    return false;
  }
  const uint64_t base = g_base_rate.load(std::memory_order_relaxed);
  if (t.rng == 0) {
    // The thread's first allocation: its process starts at this block's
    // first byte (a countdown of 0 only brought it here).
    // Relaxed: only needs to differ between threads.
    static std::atomic<uint64_t> threads{0};
    SeedThread(t, reinterpret_cast<uintptr_t>(&t) ^
                      (threads.fetch_add(1, std::memory_order_relaxed) << 32));
    t.bytes_until_sample = DrawCountdown(t, base) - static_cast<int64_t>(size);
    if (t.bytes_until_sample >= 0) return false;  // no point in this block
  }
  // The point fell `after` bytes before the block's end (the countdown is
  // -after now), unless the countdown was already overdrawn.
  const uint64_t after =
      std::min<uint64_t>(size, static_cast<uint64_t>(-t.bytes_until_sample));
  t.bytes_until_sample = DrawCountdown(t, base);
  if (owner->is_root()) return false;  // the root's objcg charges nothing

  ++t.busy;
  bool sampled = false;
  uint64_t rate;
  {
    GroupRef group = owner->GetGroup();
    Locked lock;
    rate = RateForLocked(*group);
  }
  if (rate != 0) {
    if (rate <= base) {
      sampled = true;
    } else {
      const double keep = static_cast<double>(base) / static_cast<double>(rate);
      sampled = Uniform(t) <= keep ||
                Uniform(t) <= OneMinusExpNeg(static_cast<double>(after) /
                                             static_cast<double>(rate));
    }
  }
  --t.busy;
  *rate_out = rate;
  return sampled;
}

namespace {

// Records `block` (g_mu held); false when out of table memory.
bool RecordLocked(ObjCgroup* owner, uintptr_t block, uint64_t size,
                  uint64_t rate, const uintptr_t* frames, int nframes) {
  bool sampled = true;
  const double p =
      OneMinusExpNeg(static_cast<double>(size) / static_cast<double>(rate));
  const double weight = p > 0 ? 1.0 / p : 1.0;
  {
    Site* s = FindOrAddSiteLocked(owner, frames, nframes);
    Record* r = g_free_records;
    if (r != nullptr) {
      g_free_records = r->next;
    } else if (s != nullptr) {
      r = static_cast<Record*>(ArenaAlloc(sizeof(Record)));
    }
    if (s == nullptr || r == nullptr || !Reserve(g_records, BlockKey)) {
      if (r != nullptr) {
        r->next = g_free_records;
        g_free_records = r;
      }
      sampled = false;  // out of memory: not recorded
    } else {
      r->block = block;
      r->site = s;
      r->size = size;
      r->objects = weight;
      r->space = weight * static_cast<double>(size);
      const size_t b = Mix(r->block) & g_records.mask;
      r->next = g_records.buckets[b];
      g_records.buckets[b] = r;
      ++g_records.count;
      ++g_live;
      s->alloc_samples += 1;
      s->alloc_sampled_bytes += size;
      s->inuse_sampled_bytes += size;
      s->alloc_objects += r->objects;
      s->alloc_space += r->space;
      s->inuse_samples += 1;
      s->inuse_objects += r->objects;
      s->inuse_space += r->space;
    }
  }
  return sampled;
}

uintptr_t PageKey(int q, uint64_t seq) {
  return kPageKey | (static_cast<uintptr_t>(q) << kQueueShift) |
         (seq & ((uintptr_t{1} << kQueueShift) - 1));
}

// The queue of `objcg`; with `create`, a free slot if it has none. -1 when
// none (or the table is full).
int PageQueueLocked(const ObjCgroup* objcg, bool create) {
  int free_slot = -1;
  for (int i = 0; i < g_page_queues_used; ++i) {
    if (g_page_queues[i].objcg == objcg) return i;
    if (free_slot < 0 && g_page_queues[i].objcg == nullptr) free_slot = i;
  }
  if (!create) return -1;
  if (free_slot < 0) {
    if (g_page_queues_used == kPageQueues) return -1;
    free_slot = g_page_queues_used++;
  }
  g_page_queues[free_slot] = PageQueue{objcg, 0, 0, 0};
  return free_slot;
}

Record* FindRecordLocked(uintptr_t block) {
  if (g_records.buckets == nullptr) return nullptr;
  for (Record* r = g_records.buckets[Mix(block) & g_records.mask]; r != nullptr;
       r = r->next) {
    if (r->block == block) return r;
  }
  return nullptr;
}

}  // namespace

bool SampleRecord(ObjCgroup* owner, const void* block, uint64_t size,
                  uint64_t rate, const void* entry_return) {
  ThreadSampler& t = tls_sampler;
  ++t.busy;
  uintptr_t frames[kHeapProfileMaxFrames];
  const int nframes = CaptureStack(frames, entry_return);
  bool sampled;
  {
    Locked lock;
    sampled = RecordLocked(owner, reinterpret_cast<uintptr_t>(block), size,
                           rate, frames, nframes);
  }
  --t.busy;
  return sampled;
}

void SamplePages(ObjCgroup* objcg, uint64_t pages, const void* entry_return) {
  ThreadSampler& t = tls_sampler;
  uint64_t rate = 0;
  const uint64_t size = pages << kPageShift;
  if (!SampleDecide(objcg, size, &rate)) return;
  ++t.busy;
  uintptr_t frames[kHeapProfileMaxFrames];
  const int nframes = CaptureStack(frames, entry_return);
  {
    Locked lock;
    const int q = PageQueueLocked(objcg, /*create=*/true);
    if (q >= 0) {
      PageQueue& pq = g_page_queues[q];
      // A key is used once recorded (a hole, out of table memory, is
      // skipped when the queue reaches it).
      (void)RecordLocked(objcg, PageKey(q, pq.tail), size, rate, frames,
                         nframes);
      ++pq.tail;
    }
  }
  --t.busy;
}

void UnsamplePages(ObjCgroup* objcg, uint64_t pages) {
  uint64_t rate = 0;
  const uint64_t size = pages << kPageShift;
  if (!SampleDecide(objcg, size, &rate)) return;
  const double p =
      OneMinusExpNeg(static_cast<double>(size) / static_cast<double>(rate));
  Locked lock;
  const int q = PageQueueLocked(objcg, /*create=*/false);
  if (q < 0) return;  // no page sample of this group
  PageQueue& pq = g_page_queues[q];
  pq.credit += p > 0 ? static_cast<double>(size) / p : 0;
  // Release the oldest while the credit covers at least half of one (the
  // remainder, positive or negative, carries over: no bias from rounding).
  while (pq.head != pq.tail) {
    Record* r = FindRecordLocked(PageKey(q, pq.head));
    if (r == nullptr) {  // a hole
      ++pq.head;
      continue;
    }
    if (pq.credit < r->space / 2) break;
    pq.credit -= r->space;
    r = TakeRecordLocked(r->block);
    ReleaseRecordLocked(r);
    ++pq.head;
  }
  if (pq.head == pq.tail) pq.credit = 0;  // nothing left to owe against
}

namespace {}  // namespace

bool PageGateSlow(uint64_t size) {
  // Relaxed: see sampler.h.
  return g_page_charges.load(std::memory_order_relaxed) &&
         CountdownExpired(size);
}

bool SampleSlow(ObjCgroup* owner, const void* block, uint64_t size,
                const void* entry_return) {
  uint64_t rate = 0;
  if (!SampleDecide(owner, size, &rate)) return false;
  return SampleRecord(owner, block, size, rate, entry_return);
}

void Forget(const void* block) {
  Locked lock;
  if (Record* r = TakeRecordLocked(reinterpret_cast<uintptr_t>(block))) {
    ReleaseRecordLocked(r);
  }
}

void ForgetGroup(const Group* group) {
  if (g_nrates_hint.load(std::memory_order_relaxed) == 0) return;
  Locked lock;
  RemoveRatesLocked(group, false);
}

void ForgetController(const Controller* controller) {
  if (g_nrates_hint.load(std::memory_order_relaxed) == 0) return;
  Locked lock;
  RemoveRatesLocked(controller, true);
}

void ForgetObjCgroup(const ObjCgroup* objcg, ObjCgroup* heir) {
  Locked lock;
  // Its page samples' queue goes (their records go with its sites below).
  if (const int q = PageQueueLocked(objcg, /*create=*/false); q >= 0) {
    g_page_queues[q].objcg = nullptr;
  }
  if (g_sites.buckets == nullptr || g_sites.count == 0) return;
  if (heir == objcg) heir = nullptr;
  // Unlink its sites first: adding the heir's may grow the table.
  Site* dead = nullptr;
  bool had_live = false;
  for (size_t i = 0; i <= g_sites.mask; ++i) {
    Site** link = &g_sites.buckets[i];
    while (Site* s = *link) {
      if (s->objcg != objcg) {
        link = &s->next;
        continue;
      }
      had_live |= s->inuse_samples != 0;
      *link = s->next;
      --g_sites.count;
      s->next = dead;
      dead = s;
    }
  }
  // The history (in use is 0: the objcg went with its last block) to the
  // heir's site of the same stack.
  for (Site* s = dead; heir != nullptr && s != nullptr; s = s->next) {
    if (s->alloc_samples == 0) continue;
    Site* h =
        FindOrAddSiteLocked(heir, s->frames, static_cast<int>(s->nframes));
    if (h == nullptr) continue;  // out of table memory: this history is lost
    h->alloc_samples += s->alloc_samples;
    h->alloc_sampled_bytes += s->alloc_sampled_bytes;
    h->alloc_objects += s->alloc_objects;
    h->alloc_space += s->alloc_space;
  }
  while (dead != nullptr) {
    Site* s = dead;
    dead = s->next;
    s->objcg = nullptr;  // marks the site dead for the records below
    s->next = g_free_sites;
    g_free_sites = s;
  }
  if (!had_live) return;
  // Blocks still live when their objcg went (a contract violation of the
  // integration that charged them): their records go too.
  for (size_t i = 0; i <= g_records.mask; ++i) {
    Record** link = &g_records.buckets[i];
    while (Record* r = *link) {
      if (r->site->objcg != nullptr) {
        link = &r->next;
        continue;
      }
      *link = r->next;
      --g_records.count;
      --g_live;
      r->next = g_free_records;
      g_free_records = r;
    }
  }
}

}  // namespace profile

// ---- Public API (heap_profile.h) ----

void SetHeapProfileRate(Controller& controller, Bytes rate) {
  profile::SetRate(&controller, &controller, 0, false, rate.raw());
}

void SetHeapProfileRate(Group& group, Bytes rate) {
  profile::SetRate(&group, &group.controller(), group.id(), true, rate.raw());
}

void ClearHeapProfileRate(Group& group) {
  profile::ClearRate(&group, group.id());
}

Bytes HeapProfileRate(const Group& group) {
  profile::Locked lock;
  return Bytes(profile::RateForLocked(group));
}

void SetHeapProfilePageCharges(bool on) {
  // Relaxed: see sampler.h (every thread sees it at its next page
  // operation).
  profile::g_page_charges.store(on, std::memory_order_relaxed);
}

void SetHeapProfileStackCapture(StackCapture capture) {
  profile::g_capture.store(capture, std::memory_order_relaxed);
}

namespace {

// `g` and, with `subtree`, every descendant, each referenced.
void CollectGroups(Group& g, bool subtree, std::vector<GroupRef>& out) {
  out.emplace_back(&g);
  if (!subtree) return;
  const std::string base = g.path();
  for (const std::string& name : g.ChildNames()) {
    auto child = g.controller().Lookup(base.empty() ? name : base + "/" + name);
    if (child.ok()) CollectGroups(*child.value(), true, out);
  }
}

}  // namespace

HeapProfileSnapshot SnapshotHeapProfile(Group& group, bool subtree) {
  // The groups read, referenced: an objcg pointing at one of them names a
  // group that cannot be freed meanwhile, so pointers compare safely.
  std::vector<GroupRef> refs;
  CollectGroups(group, subtree, refs);
  std::vector<const Group*> groups;
  for (const GroupRef& r : refs) groups.push_back(r.get());
  std::sort(groups.begin(), groups.end());
  auto wanted = [&](const Group* g) {
    return std::binary_search(groups.begin(), groups.end(), g);
  };

  HeapProfileSnapshot out;
  std::map<std::vector<uintptr_t>, HeapProfileEntry> merged;
  {
    profile::Locked lock;
    out.rate = Bytes(profile::RateForLocked(group));
    if (profile::g_sites.buckets != nullptr) {
      for (size_t i = 0; i <= profile::g_sites.mask; ++i) {
        for (profile::Site* s = profile::g_sites.buckets[i]; s != nullptr;
             s = s->next) {
          // The objcg is alive (its free waits for g_mu); the group it
          // points at now is only compared.
          if (!wanted(s->objcg->group())) continue;
          std::vector<uintptr_t> stack(s->frames, s->frames + s->nframes);
          HeapProfileEntry& e = merged[stack];
          if (e.stack.empty()) e.stack = std::move(stack);
          e.alloc_objects += s->alloc_objects;
          e.alloc_space += s->alloc_space;
          e.inuse_objects += s->inuse_objects;
          e.inuse_space += s->inuse_space;
          e.alloc_samples += s->alloc_samples;
          e.inuse_samples += s->inuse_samples;
          e.alloc_sampled_bytes += s->alloc_sampled_bytes;
          e.inuse_sampled_bytes += s->inuse_sampled_bytes;
        }
      }
    }
  }
  out.entries.reserve(merged.size());
  for (auto& [stack, e] : merged) out.entries.push_back(std::move(e));
  return out;
}

bool NoteHeapAllocation(ObjCgroup* owner, const void* block, Bytes size) {
  if (owner == nullptr || !profile::CountdownExpired(size.raw())) return false;
  return profile::SampleSlow(owner, block, size.raw(),
                             __builtin_return_address(0));
}

void ForgetHeapAllocation(const void* block) { profile::Forget(block); }

namespace {
// Relaxed: a function pointer installed once at start-up; a reader that
// misses it just does not show the file yet.
std::atomic<HeapProfileEncoder> g_encoder{nullptr};
}  // namespace

void SetHeapProfileEncoder(HeapProfileEncoder encoder) {
  g_encoder.store(encoder, std::memory_order_relaxed);
}

HeapProfileEncoder GetHeapProfileEncoder() {
  return g_encoder.load(std::memory_order_relaxed);
}

void SeedHeapProfileThreadForTesting(uint64_t seed) {
  profile::ThreadSampler& t = profile::tls_sampler;
  profile::SeedThread(t, seed);
  t.bytes_until_sample = profile::DrawCountdown(
      t, profile::g_base_rate.load(std::memory_order_relaxed));
}

uint64_t HeapProfileLiveSamplesForTesting() {
  profile::Locked lock;
  return profile::g_live;
}

}  // namespace umemcg

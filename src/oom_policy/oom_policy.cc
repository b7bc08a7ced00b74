// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// OomPolicy (umemcg/oom_policy.h): the public face of policy_impl.h.

#include "umemcg/oom_policy.h"

#include <memory>
#include <mutex>

#include "oom_policy/policy_impl.h"

namespace umemcg {

using oom_policy_internal::kOomScoreAdjMax;
using oom_policy_internal::kOomScoreAdjMin;

OomPolicy::OomPolicy(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
OomPolicy::~OomPolicy() {
  // The handler installed in the controller shares impl_: its pending
  // victims' GroupRefs would keep their groups, and so the controller, alive
  // (a cycle through the handler). The policy's user is gone; so is its use
  // of the handler (see the header), so they go now.
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->pending.clear();
}

std::unique_ptr<OomPolicy> OomPolicy::Create(Controller& controller,
                                             OomPolicyOptions options) {
  return std::unique_ptr<OomPolicy>(
      new OomPolicy(std::make_unique<Impl>(controller, std::move(options))));
}

Status OomPolicy::SetKillAction(Group& group, KillAction action) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  Impl::Settings& s = impl_->settings[group.id()];
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

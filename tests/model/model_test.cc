// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The oracle itself: the naive model must get the semantics right before
// anything is compared with it.

#include "model/model.h"

#include <gtest/gtest.h>

namespace umemcg {
namespace {

using model::GroupId;
using model::kNoGroup;
using model::kRoot;
using model::Model;

TEST(ModelTest, HierarchicalLimitsAndForcedCharges) {
  Model m;
  GroupId a = kNoGroup;
  GroupId b = kNoGroup;
  ASSERT_EQ(m.CreateGroup(kRoot, "a", &a), StatusCode::kOk);
  ASSERT_EQ(m.CreateGroup(a, "b", &b), StatusCode::kOk);
  EXPECT_EQ(m.CreateGroup(a, "b", &b), StatusCode::kAlreadyExists);
  EXPECT_EQ(m.path(b), "a/b");
  ASSERT_EQ(m.SetMax(a, Pages(10)), StatusCode::kOk);
  ASSERT_EQ(m.SetMax(b, Pages(6)), StatusCode::kOk);
  EXPECT_TRUE(m.TryCharge(b, Pages(6)).ok());  // usage == max is allowed
  model::ChargeOutcome r = m.TryCharge(b, Pages(1));
  EXPECT_EQ(r.code, StatusCode::kResourceExhausted);
  EXPECT_EQ(r.limited_by, b);
  r = m.TryCharge(a, Pages(5));
  EXPECT_EQ(r.limited_by, a);
  r = m.ForceCharge(b, Pages(2));
  EXPECT_TRUE(r.ok());
  EXPECT_TRUE(r.forced);
  EXPECT_EQ(r.limited_by, b);
  EXPECT_EQ(m.usage(b), Pages(8));
  EXPECT_EQ(m.usage(a), Pages(8));
  EXPECT_EQ(m.usage(kRoot), Pages(8));
  EXPECT_TRUE(m.TryCharge(kRoot, Pages(100)).ok());  // free no-op
  EXPECT_EQ(m.usage(kRoot), Pages(8));
  EXPECT_EQ(m.SetMax(kRoot, Pages(1)), StatusCode::kInvalidArgument);
  EXPECT_EQ(m.RemoveGroup(a), StatusCode::kBusy);
  ASSERT_EQ(m.RemoveGroup(b), StatusCode::kOk);
  EXPECT_EQ(m.TryCharge(b, Pages(1)).code, StatusCode::kFailedPrecondition);
  EXPECT_EQ(m.SetMax(b, Pages(1)), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(m.Uncharge(b, Pages(8)));  // allowed while offline
  EXPECT_EQ(m.usage(a), Pages(0));
  EXPECT_FALSE(m.Uncharge(a, Pages(1)));
  EXPECT_EQ(m.underflows(), 1u);
  EXPECT_EQ(m.usage(a), Pages(0));                        // clamped
  ASSERT_EQ(m.CreateGroup(a, "b", &b), StatusCode::kOk);  // name reusable
  EXPECT_EQ(m.TryCharge(b, Pages(kPageCounterMax.raw() + 1)).code,
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace umemcg

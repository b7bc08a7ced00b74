// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0

#include <gtest/gtest.h>

#include <cerrno>

#include "umemcg/events.h"
#include "umemcg/status.h"
#include "umemcg/units.h"

namespace umemcg {
namespace {

TEST(UnitsTest, PagesAndBytesConvert) {
  EXPECT_EQ(Pages(3).in_bytes(), 3 * 4096u);
  EXPECT_EQ(ToBytes(Pages(2)), Bytes(8192));
  EXPECT_EQ(Bytes(4097).floor_pages(), Pages(1));
  EXPECT_EQ(Bytes(4097).ceil_pages(), Pages(2));
  EXPECT_EQ(Bytes(4096).ceil_pages(), Pages(1));
  EXPECT_EQ(Pages(2) + Pages(3), Pages(5));
  EXPECT_EQ(Pages(5) - Pages(3), Pages(2));
  EXPECT_LT(Pages(1), Pages(2));
}

TEST(StatusTest, OkHasNoMessage) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.ToString(), "OK");
}

TEST(StatusTest, ErrorCarriesCodeMessageAndErrno) {
  Status s(StatusCode::kBusy, "usage exceeds the new max");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.ToString(), "BUSY: usage exceeds the new max");
  EXPECT_EQ(ErrnoOf(s.code()), EBUSY);
  Status copy = s;
  EXPECT_EQ(copy, s);
  EXPECT_EQ(ErrnoOf(StatusCode::kInvalidArgument), EINVAL);
  EXPECT_EQ(ErrnoOf(StatusCode::kResourceExhausted), ENOMEM);
  EXPECT_EQ(ErrnoOf(StatusCode::kAgain), EAGAIN);
  EXPECT_EQ(ErrnoOf(StatusCode::kAddressInUse), EADDRINUSE);
  EXPECT_STREQ(StatusCodeName(StatusCode::kAddressInUse), "ADDRESS_IN_USE");
}

TEST(StatusTest, StatusOrHoldsValueOrError) {
  StatusOr<int> v(7);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v.value(), 7);
  StatusOr<int> e(Status(StatusCode::kNotFound, "x"));
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kNotFound);
}

TEST(EventsTest, NamesRoundTrip) {
  const char* names[] = {"low", "high",     "max",
                         "oom", "oom_kill", "oom_group_kill"};
  for (size_t i = 0; i < kNumMemoryEvents; ++i) {
    EXPECT_STREQ(MemoryEventName(static_cast<MemoryEvent>(i)), names[i]);
    EXPECT_EQ(ParseMemoryEvent(names[i]), static_cast<MemoryEvent>(i));
  }
  EXPECT_FALSE(ParseMemoryEvent("swap").has_value());
}

}  // namespace
}  // namespace umemcg

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0

#include <gtest/gtest.h>

#include "cluster/redis_client.h"

namespace umemcg::cluster_internal {
namespace {

TEST(RedisUrlTest, Forms) {
  auto u = ParseRedisUrl("redis://cache.local:6380/2");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u.value().host, "cache.local");
  EXPECT_EQ(u.value().port, 6380);
  EXPECT_EQ(u.value().db, 2);
  EXPECT_TRUE(u.value().password.empty());

  u = ParseRedisUrl("redis://alice:s%40cret@10.0.0.1");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u.value().user, "alice");
  EXPECT_EQ(u.value().password, "s@cret");
  EXPECT_EQ(u.value().port, 6379);
  EXPECT_EQ(u.value().db, 0);

  u = ParseRedisUrl("redis://:pw@[::1]:7000/");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u.value().host, "::1");
  EXPECT_EQ(u.value().port, 7000);
  EXPECT_EQ(u.value().user, "");
  EXPECT_EQ(u.value().password, "pw");
  EXPECT_EQ(RedisUrlForDisplay(u.value()), "[::1]:7000/0");

  u = ParseRedisUrl("unix:///run/redis.sock?db=3");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u.value().unix_socket, "/run/redis.sock");
  EXPECT_EQ(u.value().db, 3);

  u = ParseRedisUrl("");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(RedisUrlForDisplay(u.value()), "127.0.0.1:6379/0");
}

TEST(RedisUrlTest, MalformedIsInvalidArgumentWithAReason) {
  for (const char* bad :
       {"localhost:6379", "http://x", "redis://", "redis://:6379",
        "redis://host:0", "redis://host:65536", "redis://host:abc",
        "redis://host:", "redis://host/db", "redis://host/-1", "redis://[::1",
        "redis://::1:6379", "redis://u:%zz@host", "redis://u:%4@host",
        "unix://relative.sock", "unix:///s?db=x", "redis://ho st",
        "redis://host\n"}) {
    auto u = ParseRedisUrl(bad);
    EXPECT_FALSE(u.ok()) << bad;
    if (!u.ok()) {
      EXPECT_EQ(u.status().code(), StatusCode::kInvalidArgument) << bad;
      EXPECT_NE(u.status().message().find("redis URL"), std::string::npos);
    }
  }
}

TEST(RedisUrlTest, TlsIsRefusedPlainly) {
  auto u = ParseRedisUrl("rediss://secure:6380");
  ASSERT_FALSE(u.ok());
  EXPECT_EQ(u.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(u.status().message().find("TLS"), std::string::npos);
  EXPECT_NE(u.status().message().find("hiredis"), std::string::npos);
}

}  // namespace
}  // namespace umemcg::cluster_internal

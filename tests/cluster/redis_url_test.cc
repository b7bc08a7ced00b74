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
        "redis://host\n",
        // Found by redis_url_fuzz: a bracket inside a bracketed host.
        "redis://@[[]", "redis://[a]b]:1", "redis://a]b"}) {
    auto u = ParseRedisUrl(bad);
    EXPECT_FALSE(u.ok()) << bad;
    if (!u.ok()) {
      EXPECT_EQ(u.status().code(), StatusCode::kInvalidArgument) << bad;
      EXPECT_NE(u.status().message().find("redis URL"), std::string::npos);
    }
  }
}

TEST(RedisUrlTest, SentinelForms) {
  auto u = ParseRedisUrl(
      "redis-sentinel://:pw@10.0.0.1,10.0.0.2:26380,[::1]:5000/mymaster/2");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  ASSERT_TRUE(u.value().sentinel());
  EXPECT_EQ(u.value().master_name, "mymaster");
  EXPECT_EQ(u.value().password, "pw");
  EXPECT_EQ(u.value().db, 2);
  const std::vector<std::pair<std::string, int>> want = {
      {"10.0.0.1", 26379}, {"10.0.0.2", 26380}, {"::1", 5000}};
  EXPECT_EQ(u.value().sentinels, want);
  EXPECT_EQ(RedisUrlForDisplay(u.value()),
            "redis-sentinel://10.0.0.1:26379,10.0.0.2:26380,[::1]:5000/"
            "mymaster/2");
  // The display form parses back to the same sentinels.
  auto again = ParseRedisUrl(RedisUrlForDisplay(u.value()));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again.value().sentinels, want);
  u = ParseRedisUrl("redis-sentinel://s1/m");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u.value().db, 0);
  EXPECT_FALSE(ParseRedisUrl("redis://h:1").value().sentinel());
  for (const char* bad :
       {"redis-sentinel://s1", "redis-sentinel://s1/", "redis-sentinel:///m",
        "redis-sentinel://s1,/m", "redis-sentinel://s1:0/m",
        "redis-sentinel://s1/m/x", "redis-sentinel://s1/a b",
        "redis-sentinel://s1,s2:99999/m"}) {
    auto b = ParseRedisUrl(bad);
    EXPECT_FALSE(b.ok()) << bad;
    if (!b.ok()) {
      EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument) << bad;
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

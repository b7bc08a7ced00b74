// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The cluster quota's Lua scripts. Page-counter semantics over the key
// layout of scripts.h: a lease on a group counts at the group and at each
// ancestor; a grant is refused where any level's max would be exceeded.
// Numbers stay below 2^53, exact in Lua's doubles.

#include "cluster/scripts.h"

namespace umemcg::cluster_internal {

#define UMEMCG_LUA_PRELUDE \
  "if redis.replicate_commands then redis.replicate_commands() end\n"         \
  "local P = KEYS[1]\n"                                                        \
  "local EXP = P .. ':exp'\n"                                                  \
  "local GROUPS = P .. ':groups'\n"                                            \
  "local REMOVED = P .. ':removed'\n"                                          \
  "local UNLIMITED = 2251799813685247\n"                                       \
  "local function gkey(p) return P .. ':g:' .. p end\n"                        \
  "local function lkey(p) return P .. ':l:' .. p end\n"                        \
  "local function skey(p) return P .. ':s:' .. p end\n"                        \
  "local function fail(code, msg) error({err = code .. ' ' .. msg}) end\n"     \
  "local function num(v, what)\n"                                              \
  "  if v == false or v == nil then return 0 end\n"                            \
  "  local n = tonumber(v)\n"                                                  \
  "  if n == nil or n ~= math.floor(n) then\n"                                 \
  "    fail('UMEMCG_CORRUPT', 'not an integer in ' .. what .. ': ' ..\n"       \
  "         tostring(v))\n"                                                    \
  "  end\n"                                                                    \
  "  return n\n"                                                               \
  "end\n"                                                                      \
  "local function now_ms()\n"                                                  \
  "  local t = redis.call('TIME')\n"                                           \
  "  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"      \
  "end\n"                                                                      \
  /* The path and its ancestors, leaf first. */                                \
  "local function levels(path)\n"                                              \
  "  local out = {path}\n"                                                     \
  "  local p = path\n"                                                         \
  "  while true do\n"                                                          \
  "    local i = string.find(p, '/[^/]*$')\n"                                  \
  "    if not i then break end\n"                                              \
  "    p = string.sub(p, 1, i - 1)\n"                                          \
  "    out[#out + 1] = p\n"                                                    \
  "  end\n"                                                                    \
  "  return out\n"                                                             \
  "end\n"                                                                      \
  "local function hnum(key, field)\n"                                          \
  "  return num(redis.call('HGET', key, field), key .. ' ' .. field)\n"        \
  "end\n"                                                                      \
  /* Adds delta at every level (page_counter_charge / _uncharge). */           \
  "local function charge(path, delta)\n"                                       \
  "  for _, lv in ipairs(levels(path)) do\n"                                   \
  "    local k = gkey(lv)\n"                                                   \
  "    hnum(k, 'usage')\n"                                                     \
  "    local u = redis.call('HINCRBY', k, 'usage', delta)\n"                   \
  "    if delta > 0 and u > hnum(k, 'peak') then\n"                            \
  "      redis.call('HSET', k, 'peak', u)\n"                                   \
  "    end\n"                                                                  \
  "  end\n"                                                                    \
  "end\n"                                                                      \
  /* Returns expired leases to their groups (server clock). */                 \
  "local function collect(now)\n"                                              \
  "  local dead = redis.call('ZRANGEBYSCORE', EXP, '-inf', now,\n"             \
  "                          'LIMIT', 0, 10000)\n"                             \
  "  for _, m in ipairs(dead) do\n"                                            \
  "    local nl = string.find(m, '\\n', 1, true)\n"                            \
  "    if nl then\n"                                                           \
  "      local path = string.sub(m, 1, nl - 1)\n"                              \
  "      local node = string.sub(m, nl + 1)\n"                                 \
  "      local pages = hnum(lkey(path), node)\n"                               \
  "      if pages ~= 0 then\n"                                                 \
  "        charge(path, -pages)\n"                                             \
  "        redis.call('HINCRBY', gkey(path), 'expired', 1)\n"                  \
  "      end\n"                                                                \
  "      redis.call('HDEL', lkey(path), node)\n"                               \
  "      redis.call('HDEL', skey(path), node)\n"                               \
  "    end\n"                                                                  \
  "    redis.call('ZREM', EXP, m)\n"                                           \
  "  end\n"                                                                    \
  "end\n"                                                                      \
  /* min over levels of max - usage, and the first level (leaf first) */       \
  /* whose room is below `amount`. */                                          \
  "local function room_of(path, amount)\n"                                     \
  "  local room = UNLIMITED\n"                                                 \
  "  local limited = ''\n"                                                     \
  "  for _, lv in ipairs(levels(path)) do\n"                                   \
  "    local k = gkey(lv)\n"                                                   \
  "    local r = hnum(k, 'max') - hnum(k, 'usage')\n"                          \
  "    if r < room then room = r end\n"                                        \
  "    if limited == '' and r < amount then limited = lv end\n"                \
  "  end\n"                                                                    \
  "  return room, limited\n"                                                   \
  "end\n"                                                                      \
  "local function valid_path(path)\n"                                          \
  "  if path == '' or string.find(path, '\\n', 1, true) or\n"                  \
  "     string.find(path, '//', 1, true) or string.sub(path, 1, 1) == '/' or\n" \
  "     string.sub(path, -1) == '/' then\n"                                    \
  "    fail('UMEMCG_INVALID', 'bad cluster group path \\'' .. path .. '\\'')\n" \
  "  end\n"                                                                    \
  "end\n"                                                                      \
  "local function must_exist(path)\n"                                          \
  "  if redis.call('EXISTS', gkey(path)) == 0 then\n"                          \
  "    fail('UMEMCG_NOTFOUND', 'unknown cluster group \\'' .. path .. '\\'')\n" \
  "  end\n"                                                                    \
  "end\n"                                                                      \
  "local now = now_ms()\n"                                                     \
  "collect(now)\n"

const char kLeaseScript[] = UMEMCG_LUA_PRELUDE
    "local path, node = ARGV[1], ARGV[2]\n"
    "local seq = num(ARGV[3], 'seq')\n"
    "local want = num(ARGV[4], 'want')\n"
    "local need = num(ARGV[5], 'need')\n"
    "local force = ARGV[6] == '1'\n"
    "local ttl = num(ARGV[7], 'ttl')\n"
    "valid_path(path)\n"
    "must_exist(path)\n"
    "if need > want then need = want end\n"
    "local had = redis.call('HGET', lkey(path), node)\n"
    "local old = num(had, 'lease')\n"
    "local status = 0\n"
    "local target = want\n"
    "local limited = ''\n"
    // The level a forced claim takes from at or under its max to over it.
    "local crossed = ''\n"
    // The learning window after a re-creation (the latest over the levels):
    // only claims (force) may grow a lease.
    "local learn = 0\n"
    "for _, lv in ipairs(levels(path)) do\n"
    "  local u = hnum(gkey(lv), 'learn_until')\n"
    "  if u > learn then learn = u end\n"
    "end\n"
    "if had and seq <= hnum(skey(path), node) then\n"
    "  status = 4\n"
    "  target = old\n"
    "else\n"
    "  if want > old and not force and learn > now then\n"
    "    target = old\n"
    "    status = 5\n"
    "  elseif want > old then\n"
    "    local room, lim = room_of(path, need - old)\n"
    "    local can = old\n"
    "    if room > 0 then can = old + room end\n"
    "    if want <= can then\n"
    "      target = want\n"
    "    elseif need <= can then\n"
    "      target = can\n"
    "      status = 1\n"
    "    else\n"
    "      limited = lim\n"
    "      redis.call('HINCRBY', gkey(lim), 'events_max_local', 1)\n"
    "      for _, lv in ipairs(levels(lim)) do\n"
    "        redis.call('HINCRBY', gkey(lv), 'events_max', 1)\n"
    "      end\n"
    "      if force then\n"
    "        target = need\n"
    "        status = 3\n"
    "        if room >= 0 then crossed = lim end\n"
    "      else\n"
    "        target = old\n"
    "        status = 2\n"
    "      end\n"
    "    end\n"
    "  end\n"
    "  if target ~= old then charge(path, target - old) end\n"
    // A released lease (0 pages) stays as a record until its expiry so
    // that a late duplicate of an older request is still seen as stale.
    "  redis.call('HSET', lkey(path), node, target)\n"
    "  redis.call('HSET', skey(path), node, seq)\n"
    "  redis.call('ZADD', EXP, now + ttl, path .. '\\n' .. node)\n"
    "end\n"
    // Over max by a claim (after an outage; a forced charge): the other
    // nodes hear it now, as after a set-max below the usage (a drain from
    // this node), and reclaim their shares instead of learning it at their
    // next request (up to a heartbeat).
    "if crossed ~= '' then\n"
    "  redis.call('PUBLISH', P .. ':drain', crossed .. '\\n' .. node)\n"
    "end\n"
    "local room_after = room_of(path, 0)\n"
    "local k = gkey(path)\n"
    "local lost = 0\n"
    "if not had then lost = 1 end\n"
    "local learn_left = 0\n"
    "if learn > now then learn_left = learn - now end\n"
    // The configuration of every level, leaf first, for re-creation.
    "local chain = {}\n"
    "for _, lv in ipairs(levels(path)) do\n"
    "  chain[#chain + 1] = lv\n"
    "  chain[#chain + 1] = hnum(gkey(lv), 'max')\n"
    "  chain[#chain + 1] = hnum(gkey(lv), 'ver')\n"
    "end\n"
    "local drain_gen = 0\n"
    "for _, lv in ipairs(levels(path)) do\n"
    "  drain_gen = drain_gen + hnum(gkey(lv), 'drain_gen')\n"
    "end\n"
    "return {status, target, ttl, room_after, hnum(k, 'usage'),\n"
    "        hnum(k, 'max'), hnum(k, 'events_max'), limited, lost,\n"
    "        redis.call('HLEN', lkey(path)), learn_left, chain, drain_gen}\n";

const char kSetMaxScript[] = UMEMCG_LUA_PRELUDE
    "local path = ARGV[1]\n"
    "local max = num(ARGV[2], 'max')\n"
    "valid_path(path)\n"
    "if max < 0 or max > UNLIMITED then max = UNLIMITED end\n"
    "local lv = levels(path)\n"
    "for i = #lv, 1, -1 do\n"
    "  local k = gkey(lv[i])\n"
    "  if redis.call('EXISTS', k) == 0 then\n"
    "    redis.call('HSET', k, 'max', UNLIMITED, 'usage', 0, 'peak', 0,\n"
    "               'events_max', 0, 'events_max_local', 0, 'expired', 0)\n"
    "    redis.call('SADD', GROUPS, lv[i])\n"
    "  end\n"
    "end\n"
    "for i = 1, #lv do redis.call('SREM', REMOVED, lv[i]) end\n"
    // The configuration version: the server's clock in ms, and above the
    // previous one, so it also orders a set-max made after Redis lost the
    // group above every version a node cached before the loss.
    "local k = gkey(path)\n"
    "local ver = math.max(hnum(k, 'ver') + 1, now)\n"
    "redis.call('HSET', k, 'max', max, 'ver', ver)\n"
    // Below the usage: the nodes hear it now (a drain from no node), return
    // their unused lease and see the cluster over max in the reply.
    "if max < hnum(k, 'usage') then\n"
    "  redis.call('PUBLISH', P .. ':drain', path .. '\\n')\n"
    "end\n"
    "return hnum(k, 'usage')\n";

const char kRemoveScript[] = UMEMCG_LUA_PRELUDE
    "local path = ARGV[1]\n"
    "valid_path(path)\n"
    "must_exist(path)\n"
    "local prefix = path .. '/'\n"
    "for _, g in ipairs(redis.call('SMEMBERS', GROUPS)) do\n"
    "  if string.sub(g, 1, #prefix) == prefix then\n"
    "    fail('UMEMCG_BUSY', 'cluster group \\'' .. path ..\n"
    "         '\\' has child groups')\n"
    "  end\n"
    "end\n"
    "if hnum(gkey(path), 'usage') ~= 0 then\n"
    "  fail('UMEMCG_BUSY', 'cluster group \\'' .. path ..\n"
    "       '\\' has leased pages')\n"
    "end\n"
    "for _, node in ipairs(redis.call('HKEYS', lkey(path))) do\n"
    "  redis.call('ZREM', EXP, path .. '\\n' .. node)\n"
    "end\n"
    "redis.call('DEL', gkey(path), lkey(path), skey(path))\n"
    "redis.call('SREM', GROUPS, path)\n"
    // A tombstone: bound nodes must not re-create a group an operator
    // removed (a FLUSHALL takes it too, and then they do).
    "redis.call('SADD', REMOVED, path)\n"
    "return 1\n";

const char kDrainScript[] = UMEMCG_LUA_PRELUDE
    "local path, node = ARGV[1], ARGV[2]\n"
    "local window = num(ARGV[3], 'window')\n"
    "local cooldown = num(ARGV[4], 'cooldown')\n"
    "valid_path(path)\n"
    "must_exist(path)\n"
    "local k = gkey(path)\n"
    "local till = hnum(k, 'drain_until')\n"
    // One drain at a time (the kernel's percpu_charge_mutex, one level
    // up): join the one running; right after one, do not start another.
    "if now < till then return {0, till - now} end\n"
    "if now < till + cooldown then return {0, 0} end\n"
    "redis.call('HINCRBY', k, 'drain_gen', 1)\n"
    "redis.call('HINCRBY', k, 'drains', 1)\n"
    "redis.call('HSET', k, 'drain_until', now + window)\n"
    "redis.call('PUBLISH', P .. ':drain', path .. '\\n' .. node)\n"
    "return {1, window}\n";

const char kRecreateScript[] = UMEMCG_LUA_PRELUDE
    "local ttl = num(ARGV[1], 'ttl')\n"
    "if #ARGV < 4 then fail('UMEMCG_INVALID', 'no configuration') end\n"
    "if redis.call('SISMEMBER', REMOVED, ARGV[2]) == 1 then return -1 end\n"
    "local created = 0\n"
    "for i = 2, #ARGV - 2, 3 do\n"
    "  local path = ARGV[i]\n"
    "  local max = num(ARGV[i + 1], 'max')\n"
    "  local ver = num(ARGV[i + 2], 'ver')\n"
    "  valid_path(path)\n"
    "  if max < 0 or max > UNLIMITED then max = UNLIMITED end\n"
    "  local k = gkey(path)\n"
    "  if redis.call('EXISTS', k) == 0 then\n"
    "    redis.call('HSET', k, 'max', max, 'usage', 0, 'peak', 0,\n"
    "               'events_max', 0, 'events_max_local', 0, 'expired', 0,\n"
    "               'ver', ver, 'learn_until', now + ttl)\n"
    "    redis.call('SADD', GROUPS, path)\n"
    "    if i == 2 then created = 1 end\n"
    "  elseif hnum(k, 'ver') < ver then\n"
    // A configuration this node saw last and Redis lost (a restart that
    // lost the last writes): the newer one wins, never the older.
    "    redis.call('HSET', k, 'max', max, 'ver', ver)\n"
    "  end\n"
    "end\n"
    "return created\n";

const char kSnapshotScript[] = UMEMCG_LUA_PRELUDE
    "local out = {}\n"
    "local paths = redis.call('SMEMBERS', GROUPS)\n"
    "table.sort(paths)\n"
    "for _, path in ipairs(paths) do\n"
    "  local k = gkey(path)\n"
    "  local leases = {}\n"
    "  local l = redis.call('HGETALL', lkey(path))\n"
    "  for i = 1, #l, 2 do\n"
    "    local pages = num(l[i + 1], 'lease')\n"
    "    if pages > 0 then\n"
    "      local exp = redis.call('ZSCORE', EXP, path .. '\\n' .. l[i])\n"
    "      local left = 0\n"
    "      if exp then left = num(exp, 'expiry') - now end\n"
    "      leases[#leases + 1] = {l[i], pages, left}\n"
    "    end\n"
    "  end\n"
    "  out[#out + 1] = {path, hnum(k, 'max'), hnum(k, 'usage'),\n"
    "                   hnum(k, 'peak'), hnum(k, 'events_max'),\n"
    "                   hnum(k, 'events_max_local'), hnum(k, 'expired'),\n"
    "                   leases}\n"
    "end\n"
    "return {now, out}\n";

#undef UMEMCG_LUA_PRELUDE

}  // namespace umemcg::cluster_internal

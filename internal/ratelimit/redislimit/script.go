package redislimit

import "github.com/redis/go-redis/v9"

// reserveScript is the GCRA of package ratelimit with reservation, on one
// key (KEYS[1]) holding the key's state. ARGV: the interval, the burst's
// offset ((B-1)·I, saturated to an int64 by the caller) and the maximum
// wait, all in nanoseconds; then the Limit's terms as the caller gave
// them (count, per in nanoseconds, burst), which decide nothing and are
// written with the TAT for States to show. It answers {1, wait} when it
// took the event and {0, wait} when it took nothing, wait in nanoseconds.
//
// The state is "<TAT> <count> <per> <burst>" (see the package doc), the
// TAT as the decimal Unix nanoseconds, as Go's time.Time.UnixNano writes
// them. A state of the TAT alone, as versions before the terms wrote it,
// is read too: a rolling upgrade finds such keys until they expire. Lua's
// numbers are doubles, exact for integers below 2^53, so the script splits
// the TAT into its seconds and nanoseconds and computes every difference
// from now in nanoseconds, exact within 104 days. Now is Redis's own
// TIME, so the nodes of a cluster, whatever their clocks, share one
// timeline. The key expires when its TAT passes (PX, rounded up to the
// millisecond): an idle key is no key.
//
// Derived from the allowN script of github.com/go-redis/redis_rate v10.0.1
// (lua.go), itself from rwz/redis-gcra's perform_gcra_ratelimit.lua. The
// changes: the event is taken when its wait is at most the caller's maximum
// wait, and nothing is written otherwise (redis_rate only allows an event
// due now); the TAT is integer nanoseconds rather than floating seconds
// since 2017, and kept with the terms of the last granted event; the cost
// is always one event; the answer is the decision and the wait alone.
// Their notices, as their licences require:
//
//	redis_rate: Copyright (c) 2013 The github.com/go-redis/redis_rate
//	Authors. All rights reserved.
//
//	Redistribution and use in source and binary forms, with or without
//	modification, are permitted provided that the following conditions are
//	met:
//
//	   * Redistributions of source code must retain the above copyright
//	notice, this list of conditions and the following disclaimer.
//	   * Redistributions in binary form must reproduce the above
//	copyright notice, this list of conditions and the following disclaimer
//	in the documentation and/or other materials provided with the
//	distribution.
//
//	THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS AND CONTRIBUTORS
//	"AS IS" AND ANY EXPRESS OR IMPLIED WARRANTIES, INCLUDING, BUT NOT
//	LIMITED TO, THE IMPLIED WARRANTIES OF MERCHANTABILITY AND FITNESS FOR
//	A PARTICULAR PURPOSE ARE DISCLAIMED. IN NO EVENT SHALL THE COPYRIGHT
//	OWNER OR CONTRIBUTORS BE LIABLE FOR ANY DIRECT, INDIRECT, INCIDENTAL,
//	SPECIAL, EXEMPLARY, OR CONSEQUENTIAL DAMAGES (INCLUDING, BUT NOT
//	LIMITED TO, PROCUREMENT OF SUBSTITUTE GOODS OR SERVICES; LOSS OF USE,
//	DATA, OR PROFITS; OR BUSINESS INTERRUPTION) HOWEVER CAUSED AND ON ANY
//	THEORY OF LIABILITY, WHETHER IN CONTRACT, STRICT LIABILITY, OR TORT
//	(INCLUDING NEGLIGENCE OR OTHERWISE) ARISING IN ANY WAY OUT OF THE USE
//	OF THIS SOFTWARE, EVEN IF ADVISED OF THE POSSIBILITY OF SUCH DAMAGE.
//
//	redis-gcra: Copyright (c) 2017 Pavel Pravosud (The MIT License).
//
//	Permission is hereby granted, free of charge, to any person obtaining
//	a copy of this software and associated documentation files (the
//	"Software"), to deal in the Software without restriction, including
//	without limitation the rights to use, copy, modify, merge, publish,
//	distribute, sublicense, and/or sell copies of the Software, and to
//	permit persons to whom the Software is furnished to do so, subject to
//	the following conditions:
//
//	The above copyright notice and this permission notice shall be
//	included in all copies or substantial portions of the Software.
//
//	THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND,
//	EXPRESS OR IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF
//	MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND
//	NONINFRINGEMENT. IN NO EVENT SHALL THE AUTHORS OR COPYRIGHT HOLDERS BE
//	LIABLE FOR ANY CLAIM, DAMAGES OR OTHER LIABILITY, WHETHER IN AN ACTION
//	OF CONTRACT, TORT OR OTHERWISE, ARISING FROM, OUT OF OR IN CONNECTION
//	WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE SOFTWARE.
var reserveScript = redis.NewScript(`
-- TIME before a write needs effects replication: the default from Redis 7,
-- asked for here for 6.2 (a no-op since).
redis.replicate_commands()

local interval = tonumber(ARGV[1])
local burst_offset = tonumber(ARGV[2])
local max_wait = tonumber(ARGV[3])

local t = redis.call("TIME")
local now_s, now_ns = tonumber(t[1]), tonumber(t[2]) * 1000

-- tat = max(TAT, now), as seconds and nanoseconds; ahead = tat - now.
-- The TAT is the state up to its first space (all of an older state).
local tat_s, tat_ns, ahead = now_s, now_ns, 0
local v = redis.call("GET", KEYS[1])
if v then
  local digits = v
  local space = string.find(v, " ", 1, true)
  if space then
    digits = string.sub(v, 1, space - 1)
  end
  local s, ns = tonumber(string.sub(digits, 1, -10)), tonumber(string.sub(digits, -9))
  if not s or not ns or #digits < 10 then
    return redis.error_reply("ratelimit state of " .. KEYS[1] .. " is not Unix nanoseconds: " .. v)
  end
  local d = (s - now_s) * 1e9 + (ns - now_ns)
  if d > 0 then
    tat_s, tat_ns, ahead = s, ns, d
  end
end

-- The event may happen at tat + I - B·I: wait is how long after now.
local wait = ahead - burst_offset
if wait < 0 then
  wait = 0
end
-- An integer reply: keep it within an int64.
if wait > 4e18 then
  wait = 4e18
end
if wait > max_wait then
  return {0, wait}
end

tat_ns = tat_ns + interval
tat_s = tat_s + math.floor(tat_ns / 1e9)
tat_ns = tat_ns % 1e9
redis.call("SET", KEYS[1], string.format("%d%09d %s %s %s", tat_s, tat_ns, ARGV[4], ARGV[5], ARGV[6]), "PX", string.format("%.0f", math.ceil((ahead + interval) / 1e6)))
return {1, wait}
`)

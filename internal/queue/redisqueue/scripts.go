package redisqueue

import "github.com/redis/go-redis/v9"

// The scripts keep the stream and the queued hash consistent with each other.
// Their results are small integers or lists of IDs; see the package doc for
// the layout.

// pushScript adds an entry unless the instance is queued (0) or the queue is
// full (-1); it returns 1 when it added one.
//
// An instance whose entry is in the queued hash but already pending in the
// group was read by a consumer that has not done (or, dead, never will do)
// its bookkeeping: only the visibility timeout would hand that entry to
// anyone, so the push queues a new one instead of coalescing. A consumer
// that is alive and about to do its bookkeeping then finds the hash
// changed and leaves it; the instance is delivered twice, which the
// instance lock makes harmless. Before the first read there is no group,
// and nothing is pending.
//
// KEYS: stream, queued. ARGV: instance, reason, capacity, group.
var pushScript = redis.NewScript(`
local cur = redis.call('HGET', KEYS[2], ARGV[1])
if cur then
	local p = redis.pcall('XPENDING', KEYS[1], ARGV[4], cur, cur, 1)
	if type(p) ~= 'table' or p.err or #p == 0 then return 0 end
	redis.call('HDEL', KEYS[2], ARGV[1])
end
if redis.call('HLEN', KEYS[2]) >= tonumber(ARGV[3]) then return -1 end
local id = redis.call('XADD', KEYS[1], '*', 'instance', ARGV[1], 'reason', ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], id)
return 1
`)

// popScript reads the next new entry for a consumer (XREADGROUP without
// BLOCK, which scripts may not use) and does poppedScript's bookkeeping, in
// one step. It returns {ID, instance, reason}, instance being "" for a
// malformed entry, or nil when no entry is waiting.
//
// KEYS: stream, queued. ARGV: group, consumer.
var popScript = redis.NewScript(`
local r = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', 1, 'STREAMS', KEYS[1], '>')
if not r then return false end
local e = r[1][2][1]
local id, f = e[1], e[2]
local inst, reason = '', ''
for i = 1, #f, 2 do
	if f[i] == 'instance' then inst = f[i + 1] elseif f[i] == 'reason' then reason = f[i + 1] end
end
if inst ~= '' and redis.call('HGET', KEYS[2], inst) == id then
	redis.call('HDEL', KEYS[2], inst)
end
return {id, inst, reason}
`)

// poppedScript removes instance from the queued hash if its queued entry is
// the one popped.
//
// KEYS: queued. ARGV: instance, entry ID.
var poppedScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
	return redis.call('HDEL', KEYS[1], ARGV[1])
end
return 0
`)

// ackScript acknowledges and deletes an entry, and repeats the popped
// bookkeeping in case the consumer died before doing it.
//
// KEYS: stream, queued. ARGV: group, entry ID, instance.
var ackScript = redis.NewScript(`
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
if redis.call('HGET', KEYS[2], ARGV[3]) == ARGV[2] then
	redis.call('HDEL', KEYS[2], ARGV[3])
end
return 1
`)

// requeueScript hands a popped, unhandled entry back: it acknowledges it
// and, unless the instance was queued again meanwhile, adds it anew (at the
// back; capacity is not checked, since the item was counted when pushed).
//
// KEYS: stream, queued. ARGV: group, entry ID, instance, reason.
var requeueScript = redis.NewScript(`
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
local cur = redis.call('HGET', KEYS[2], ARGV[3])
if cur and cur ~= ARGV[2] then return 0 end
local id = redis.call('XADD', KEYS[1], '*', 'instance', ARGV[3], 'reason', ARGV[4])
redis.call('HSET', KEYS[2], ARGV[3], id)
return 1
`)

// keepAliveScript resets the idle time of the given pending entries that
// the consumer still owns, and returns their IDs; the others were acked or
// taken over by another consumer.
//
// KEYS: stream. ARGV: group, consumer, entry IDs...
var keepAliveScript = redis.NewScript(`
local kept = {}
for i = 3, #ARGV do
	local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)
	if p[1] and p[1][2] == ARGV[2] then
		redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'JUSTID')
		kept[#kept + 1] = ARGV[i]
	end
end
return kept
`)

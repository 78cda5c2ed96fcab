package redisqueue

import "github.com/redis/go-redis/v9"

// The scripts keep the fair structures (the lanes, the rings, the weights,
// the turn counters), the queued hash and the stream consistent with each
// other; each runs atomically, so no other call ever sees them half
// changed. See the package doc for the layout. A lane's, a ring's and a
// weight hash's name is computed in the script from the prefix for the pop
// (which visits every priority) and passed as a key elsewhere; every name
// is under the queue's hash tag, so a script touches one cluster slot.
//
// A value of the queued hash is either an item (JSON, so it starts with
// "{"), queued in its lane, or the ID of a stream entry pushed by the
// version of this package that kept queued items in the stream (before
// the fair order), whose bookkeeping the scripts keep as that version did.

// pushScript queues an item in its lane unless the instance is queued (0)
// or queue.Admits refuses it (-1); it returns 1 when it queued it, and then
// adds a wake token for a waiting Pop. The rule, with C the capacity and S
// the fair share: admitted while the queued hash holds fewer than C
// items, or while the item's lane holds fewer than S and the hash fewer
// than 2×C; the lane's LLEN is read only when the hash holds C or more.
//
// An instance queued as an old-version stream entry that is already
// pending in the group was read by a consumer that has not done (or,
// dead, never will do) its bookkeeping: only the visibility timeout would
// hand that entry to anyone, so the push queues the item anew instead of
// coalescing. Before the first read there is no group, and nothing is
// pending.
//
// KEYS: queued, stream, lane, ring, weights, wake.
// ARGV: instance, item, capacity, group, key, weight, wake tokens kept,
// fair share.
var pushScript = redis.NewScript(`
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur then
	if string.byte(cur, 1) == 123 then return 0 end
	local p = redis.pcall('XPENDING', KEYS[2], ARGV[4], cur, cur, 1)
	if type(p) ~= 'table' or p.err or #p == 0 then return 0 end
	redis.call('HDEL', KEYS[1], ARGV[1])
end
local n, c = redis.call('HLEN', KEYS[1]), tonumber(ARGV[3])
if n >= c and (n >= 2 * c or redis.call('LLEN', KEYS[3]) >= tonumber(ARGV[8])) then return -1 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if redis.call('RPUSH', KEYS[3], ARGV[1]) == 1 then
	redis.call('RPUSH', KEYS[4], ARGV[5])
end
redis.call('HSET', KEYS[5], ARGV[5], ARGV[6])
redis.call('XADD', KEYS[6], 'MAXLEN', '~', ARGV[7], '*', 't', '1')
return 1
`)

// popScript takes the next item in the fair order, adds it to the stream
// and reads it for the consumer (XREADGROUP without BLOCK, which scripts
// may use), so that it is in the consumer's pending entries from the
// moment it leaves its lane. It returns {entry ID, {field, value...}}, or
// nil when nothing is queued.
//
// First it delivers any entry in the stream that no consumer has read:
// one pushed by the old version before an upgrade (or by an old node
// during a rolling one), with that version's bookkeeping. Then, for the
// highest priority whose ring is not empty: if the head key has used its
// turn (used ≥ its weight), it moves to the end of the ring and the turn
// starts again; the head key's lane gives its first instance; a lane left
// empty leaves the ring and forgets its weight and the turn, so that no
// key outlives its last item. A ring key without a lane (which only a
// hand edit can cause) is dropped, and an instance without its item is
// delivered with its id alone: it has work in the store either way.
//
// KEYS: stream, queued, used. ARGV: group, consumer, key prefix, lowest
// priority.
var popScript = redis.NewScript(`
local r = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', 1, 'STREAMS', KEYS[1], '>')
if r then
	local e = r[1][2][1]
	local id, f = e[1], e[2]
	for i = 1, #f, 2 do
		if f[i] == 'instance' then
			if redis.call('HGET', KEYS[2], f[i + 1]) == id then
				redis.call('HDEL', KEYS[2], f[i + 1])
			end
			break
		end
	end
	return {id, f}
end
for p = 1, tonumber(ARGV[4]) do
	local ring = ARGV[3] .. 'ring:' .. p
	local weights = ARGV[3] .. 'weight:' .. p
	local k = redis.call('LINDEX', ring, 0)
	while k do
		local used = tonumber(redis.call('HGET', KEYS[3], p) or '0')
		if used >= tonumber(redis.call('HGET', weights, k) or '1') then
			redis.call('LMOVE', ring, ring, 'LEFT', 'RIGHT')
			k = redis.call('LINDEX', ring, 0)
			used = 0
		end
		local lane = ARGV[3] .. 'lane:' .. p .. ':' .. k
		local inst = redis.call('LPOP', lane)
		if redis.call('LLEN', lane) == 0 then
			redis.call('LPOP', ring)
			redis.call('HDEL', weights, k)
			redis.call('HDEL', KEYS[3], p)
		else
			redis.call('HSET', KEYS[3], p, used + 1)
		end
		if inst then
			local v = redis.call('HGET', KEYS[2], inst) or ''
			redis.call('HDEL', KEYS[2], inst)
			local id = redis.call('XADD', KEYS[1], '*', 'instance', inst, 'item', v)
			redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', 1, 'STREAMS', KEYS[1], '>')
			return {id, {'instance', inst, 'item', v}}
		end
		k = redis.call('LINDEX', ring, 0)
	end
end
return false
`)

// poppedScript removes instance from the queued hash if its queued entry is
// the one popped: the bookkeeping of an old-version entry taken over from
// a consumer that read it and died before doing it.
//
// KEYS: queued. ARGV: instance, entry ID.
var poppedScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
	return redis.call('HDEL', KEYS[1], ARGV[1])
end
return 0
`)

// ackScript acknowledges and deletes an entry, and repeats the popped
// bookkeeping of an old-version entry in case its reader died before
// doing it (an item's JSON never equals an entry ID).
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

// requeueScript hands a popped, unhandled entry back: it acknowledges and
// deletes it and, unless the instance was queued again meanwhile, queues
// the item at the head of its lane, where it was (its key joins the end of
// the ring if its lane had emptied; a lane that exists keeps its weight,
// that of a later push). Capacity is not checked: the item was counted
// when pushed. It returns 1 when it queued the item.
//
// KEYS: queued, stream, lane, ring, weights, wake (pushScript's).
// ARGV: group, entry ID, instance, item, key, weight, wake tokens kept.
var requeueScript = redis.NewScript(`
redis.call('XACK', KEYS[2], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[2], ARGV[2])
local cur = redis.call('HGET', KEYS[1], ARGV[3])
if cur and cur ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], ARGV[3], ARGV[4])
if redis.call('LPUSH', KEYS[3], ARGV[3]) == 1 then
	redis.call('RPUSH', KEYS[4], ARGV[5])
end
redis.call('HSETNX', KEYS[5], ARGV[5], ARGV[6])
redis.call('XADD', KEYS[6], 'MAXLEN', '~', ARGV[7], '*', 't', '1')
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

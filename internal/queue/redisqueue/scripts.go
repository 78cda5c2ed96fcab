package redisqueue

import "github.com/redis/go-redis/v9"

// The scripts keep the fair structures (the lanes, the rings, the weights,
// the turn counters), the queued hash and the stream of one shard
// consistent with each other; each runs atomically, so no other call ever
// sees them half changed. See the package doc for the layout. Every key a
// script touches is one of its KEYS but the pop's lanes, whose names it
// reads from the rings: it builds each from its ring's declared name, so
// that a lane is under its ring's hash tag, and a script touches one
// cluster slot.
//
// A value of the queued hash is either an item (JSON, so it starts with
// "{"), queued in its lane, or the ID of a stream entry pushed by the
// version of this package that kept queued items in the stream (before
// the fair order), whose bookkeeping the scripts keep as that version did.

// scripts are the Lua scripts a Queue runs. A queue of one shard runs
// them as they are, which Redis 6.2 accepts; a queue of several runs them
// with the shebang "#!lua" (Redis 7.0 and newer), under which a Redis
// Cluster refuses a script's access to a key of another slot than its
// declared keys' even when the same node serves it (without the shebang,
// Redis 7 allows it, for the scripts written before Redis Cluster checked
// keys), so that a key outside its shard is an error and not a silent
// cross-shard write.
//
// Under the shebang Redis also refuses a whole script, before it runs,
// while it is out of memory (maxmemory reached with noeviction), where a
// script without it is refused at its first write only if that write can
// grow memory. The scripts that only delete or rewrite in place (ack,
// popped, keep-alive) carry the flag allow-oom, so that, as without the
// shebang, a full Redis still takes the acks that free it.
type scripts struct {
	push, pop, popped, ack, requeue, keepAlive *redis.Script
}

// newScripts returns the scripts, with the shebang when guarded.
func newScripts(guarded bool) *scripts {
	head, freeing := "", ""
	if guarded {
		head, freeing = "#!lua\n", "#!lua flags=allow-oom\n"
	}
	return &scripts{
		push:      redis.NewScript(head + pushSource),
		pop:       redis.NewScript(head + popSource),
		popped:    redis.NewScript(freeing + poppedSource),
		ack:       redis.NewScript(freeing + ackSource),
		requeue:   redis.NewScript(head + requeueSource),
		keepAlive: redis.NewScript(freeing + keepAliveSource),
	}
}

// plainScripts are the scripts of a queue of one shard, and
// guardedScripts those of a queue of several (see scripts).
var (
	plainScripts   = newScripts(false)
	guardedScripts = newScripts(true)
)

// pushSource queues an item in its lane unless the instance is queued (0)
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
const pushSource = `
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
`

// popSource takes the next item in the fair order, adds it to the stream
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
// A lane's name cannot be declared, since the ring names its key: it is
// its ring's name with "ring:P" replaced by "lane:P:" and the key, under
// the same tag.
//
// KEYS: stream, queued, used, the ring of each priority from 1 to L, the
// weight hash of each. ARGV: group, consumer, the lowest priority L.
const popSource = `
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
local lowest = tonumber(ARGV[3])
for p = 1, lowest do
	local ring, weights = KEYS[3 + p], KEYS[3 + lowest + p]
	local lanes = string.sub(ring, 1, -#('ring:' .. p) - 1) .. 'lane:' .. p .. ':'
	local k = redis.call('LINDEX', ring, 0)
	while k do
		local used = tonumber(redis.call('HGET', KEYS[3], p) or '0')
		if used >= tonumber(redis.call('HGET', weights, k) or '1') then
			redis.call('LMOVE', ring, ring, 'LEFT', 'RIGHT')
			k = redis.call('LINDEX', ring, 0)
			used = 0
		end
		local lane = lanes .. k
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
`

// poppedSource removes instance from the queued hash if its queued entry is
// the one popped: the bookkeeping of an old-version entry taken over from
// a consumer that read it and died before doing it.
//
// KEYS: queued. ARGV: instance, entry ID.
const poppedSource = `
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
	return redis.call('HDEL', KEYS[1], ARGV[1])
end
return 0
`

// ackSource acknowledges and deletes an entry, and repeats the popped
// bookkeeping of an old-version entry in case its reader died before
// doing it (an item's JSON never equals an entry ID).
//
// KEYS: stream, queued. ARGV: group, entry ID, instance.
const ackSource = `
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
if redis.call('HGET', KEYS[2], ARGV[3]) == ARGV[2] then
	redis.call('HDEL', KEYS[2], ARGV[3])
end
return 1
`

// requeueSource hands a popped, unhandled entry back: it acknowledges and
// deletes it and, unless the instance was queued again meanwhile, queues
// the item at the head of its lane, where it was (its key joins the end of
// the ring if its lane had emptied; a lane that exists keeps its weight,
// that of a later push). Capacity is not checked: the item was counted
// when pushed. It returns 1 when it queued the item.
//
// KEYS: queued, stream, lane, ring, weights, wake (pushScript's).
// ARGV: group, entry ID, instance, item, key, weight, wake tokens kept.
const requeueSource = `
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
`

// keepAliveSource resets the idle time of the given pending entries that
// the consumer still owns, and returns their IDs; the others were acked or
// taken over by another consumer.
//
// KEYS: stream. ARGV: group, consumer, entry IDs...
const keepAliveSource = `
local kept = {}
for i = 3, #ARGV do
	local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)
	if p[1] and p[1][2] == ARGV[2] then
		redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'JUSTID')
		kept[#kept + 1] = ARGV[i]
	end
end
return kept
`

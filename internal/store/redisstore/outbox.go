package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/host/weft"
)

// The outbox: messages between the stores of a partitioned store.
//
// No Redis command may touch the keys of two hash tags, so a script that
// writes a message for an instance of another store (a commit's message
// to an instance of another partition, the catalog's Deliver or batch)
// records it in its own store's outbox instead (outboxWrite in the
// scripts' prelude), in the same script as the change that sends it. The
// router then relays each entry (pendingOutbox) to the target's store,
// which applies it at most once (receive), and acknowledges it in the
// source (ackOutbox). A relay repeated after a crash between the two
// steps is harmless: the target remembers the entries it applied for
// Config.DeliveredRetention, by source and entry id, so a second copy
// writes nothing, even when the first was consumed from the inbox since.

// outboxEntry is one message waiting in a store's outbox for its relay.
type outboxEntry struct {
	// Source is the tag of the store whose outbox holds the entry (its
	// s.p): with ID, what the target remembers the entry by.
	Source string
	// ID is the entry's id, unique within its store (P obseq).
	ID string
	// At is when the entry was written, by the source store's clock.
	At time.Time
	// Target and MsgID are the receiving instance and the message's id.
	Target, MsgID string
	// Doc is the message record exactly as writeMessage's doc argument
	// (messageArgs: the weft.Message's JSON without its Seq).
	Doc string
}

// ackOutboxScript deletes acknowledged outbox entries. ARGV: counted
// entry ids. An entry already gone is skipped; its index member is read
// from its value (time .. id).
var ackOutboxScript = script(`
local n = takeN()
for i = 1, n do
  local eid = take()
  local v = redis.call("HGET", P .. "ob", eid)
  if v then
    redis.call("ZREM", P .. "obx", string.sub(v, 1, 16) .. eid)
    redis.call("HDEL", P .. "ob", eid)
  end
end
return n
`)

// receiveScript applies relayed outbox entries in the target's store, each
// at most once: rcv maps source .. "/" .. entry id to the time the store
// forgets it, and rcvx holds forget time .. that field. ARGV: now, the
// forget time of what is received now, the ZRANGEBYLEX bound of the
// forget times not after now (upTo), then counted entries (field, target,
// message id, doc). It answers how many it applied. It also forgets at
// most 100 entries whose time passed, so that the memory stays bounded
// without a sweep of its own.
var receiveScript = script(`
local now, forget, bound = take(), take(), take()
local applied = 0
for i = 1, takeN() do
  local f, target, mid, doc = take(), take(), take(), take()
  if redis.call("HEXISTS", P .. "rcv", f) == 0 then
    writeMessage(target, mid, doc, now)
    redis.call("HSET", P .. "rcv", f, forget)
    redis.call("ZADD", P .. "rcvx", 0, forget .. f)
    applied = applied + 1
  end
end
for _, m in ipairs(redis.call("ZRANGEBYLEX", P .. "rcvx", "-", bound, "LIMIT", 0, 100)) do
  redis.call("HDEL", P .. "rcv", string.sub(m, 17))
  redis.call("ZREM", P .. "rcvx", m)
end
return applied
`)

// copyGenerationScript raises a partition's copy of the catalog
// generation (cg) to ARGV[2], and never lowers it: a copy that arrives
// late, after a create raised the partition's further, changes nothing.
// It answers 1 when it raised cg, else 0.
var copyGenerationScript = script(`
local gen = take()
if genOrder(gen) > genOrder(redis.call("GET", P .. "cg")) then
  redis.call("SET", P .. "cg", gen)
  return 1
end
return 0
`)

// pendingOutbox returns the entries of the store's outbox written before
// before, oldest first, at most limit (weft.ClampLimit). An entry
// acknowledged between the index read and the record read is left out.
func (s *Store) pendingOutbox(ctx context.Context, before time.Time, limit int) ([]outboxEntry, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	at := before.UTC().Format(time.RFC3339Nano)
	ms, err := s.c.ZRangeByLex(ctx, s.p+"obx", &redis.ZRangeBy{Min: "-", Max: "(" + hexTime(before), Count: int64(weft.ClampLimit(limit))}).Result()
	if err != nil {
		return nil, s.fail(ctx, "outbox entries before", at, err)
	}
	if len(ms) == 0 {
		return nil, nil
	}
	eids := make([]string, len(ms))
	for i, m := range ms {
		if len(m) < 17 {
			return nil, s.corrupt(fmt.Errorf("corrupt outbox index member %q", m))
		}
		eids[i] = m[16:]
	}
	return s.outboxRecords(ctx, "outbox entries before", at, eids)
}

// outboxEntries returns the entries eids of the store's outbox (those a
// commit just wrote, for the router to relay at once), in the order of
// eids, leaving out those acknowledged since.
func (s *Store) outboxEntries(ctx context.Context, eids []string) ([]outboxEntry, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	if len(eids) == 0 {
		return nil, nil
	}
	return s.outboxRecords(ctx, "outbox entries from", eids[0], eids)
}

// outboxRecords reads the records of outbox entries eids (one HMGET),
// leaving out those that are gone; op and what name the call in errors.
func (s *Store) outboxRecords(ctx context.Context, op, what string, eids []string) ([]outboxEntry, error) {
	vals, err := s.c.HMGet(ctx, s.p+"ob", eids...).Result()
	if err != nil {
		return nil, s.fail(ctx, op, what, err)
	}
	out := make([]outboxEntry, 0, len(vals))
	for i, v := range vals {
		raw, ok := v.(string)
		if !ok {
			continue // acknowledged since
		}
		e, err := parseOutboxEntry(s.p, eids[i], raw)
		if err != nil {
			return nil, s.corrupt(err)
		}
		out = append(out, e)
	}
	return out, nil
}

// parseOutboxEntry decodes the value of entry eid in the outbox of the
// store tagged source: time (16 hex digits), len(target) ":" target,
// len(mid) ":" mid, doc (outboxWrite).
func parseOutboxEntry(source, eid, v string) (outboxEntry, error) {
	bad := fmt.Errorf("corrupt outbox entry %q: %q", eid, v)
	if len(v) < 16 {
		return outboxEntry{}, bad
	}
	at, err := parseHexTime(v[:16])
	if err != nil {
		return outboxEntry{}, bad
	}
	target, rest, ok := lenPrefixed(v[16:])
	if !ok {
		return outboxEntry{}, bad
	}
	mid, doc, ok := lenPrefixed(rest)
	if !ok {
		return outboxEntry{}, bad
	}
	return outboxEntry{Source: source, ID: eid, At: at, Target: target, MsgID: mid, Doc: doc}, nil
}

// lenPrefixed reads a string written as its length, ":" and the string
// from the front of v.
func lenPrefixed(v string) (str, rest string, ok bool) {
	i := strings.IndexByte(v, ':')
	if i < 1 {
		return "", "", false
	}
	n, err := strconv.Atoi(v[:i])
	if err != nil || n < 0 || n > len(v)-i-1 {
		return "", "", false
	}
	return v[i+1 : i+1+n], v[i+1+n:], true
}

// ackOutbox deletes entries of the store's outbox that their targets have
// received: one script, so that an entry and its index member go
// together. Entries already gone are skipped; an entry of another store's
// outbox is an error, and nothing is deleted.
func (s *Store) ackOutbox(ctx context.Context, entries []outboxEntry) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	if len(entries) == 0 {
		return nil
	}
	a := s.args(len(entries))
	for _, e := range entries {
		if e.Source != s.p {
			return fmt.Errorf("redisstore: acknowledge outbox entry %q in %s: it is an entry of %s", e.ID, s.p, e.Source)
		}
		a = a.add(e.ID)
	}
	if err := s.write(ctx, ackOutboxScript, a).Err(); err != nil {
		return s.fail(ctx, "acknowledge outbox entries from", entries[0].ID, err)
	}
	return nil
}

// receive applies entries relayed from other stores' outboxes to this
// store's inboxes, in one script: each entry at most once while the store
// remembers it (Config.DeliveredRetention), so that a relay repeated after
// a crash writes nothing, even when the first copy was consumed since. A
// message for an instance the store does not hold is dropped, as a local
// send's is.
func (s *Store) receive(ctx context.Context, entries []outboxEntry) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	if len(entries) == 0 {
		return nil
	}
	now := s.now()
	a := s.args(hexTime(now), hexTime(now.Add(s.cfg.DeliveredRetention)), upTo(now), len(entries))
	for _, e := range entries {
		a = a.add(e.Source+"/"+e.ID, e.Target, e.MsgID, e.Doc)
	}
	if err := s.write(ctx, receiveScript, a).Err(); err != nil {
		return s.fail(ctx, "receive outbox entries from", entries[0].Source+"/"+entries[0].ID, err)
	}
	return nil
}

// copyGeneration raises the store's catalog generation (a partition's
// copy) to gen when gen is ordered after it (genOrder), and leaves it
// otherwise: a partition's copy only ever rises.
func (s *Store) copyGeneration(ctx context.Context, gen string) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	if err := s.write(ctx, copyGenerationScript, s.args(gen)).Err(); err != nil {
		return s.fail(ctx, "copy catalog generation", gen, err)
	}
	return nil
}
